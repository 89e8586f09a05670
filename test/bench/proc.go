package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const userHZ = 100

// ProcMem is a process's memory from /proc/<pid>/status, in bytes.
type ProcMem struct {
	// RSS is VmRSS, HWM VmHWM (the peak resident set), File RssFile: the resident pages
	// mapped from files, for a Go process its binary's code and read-only data.
	RSS, HWM, File int64
}

// ProcMemory reads a process's ProcMem.
func ProcMemory(pid int) (ProcMem, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcMem{}, fmt.Errorf("read status of process %d: %w", pid, err)
	}
	return parseStatus(data)
}

func parseStatus(data []byte) (ProcMem, error) {
	var m ProcMem
	fields := map[string]*int64{"VmRSS": &m.RSS, "VmHWM": &m.HWM, "RssFile": &m.File}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		dst := fields[k]
		if !ok || dst == nil {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return ProcMem{}, fmt.Errorf("unexpected %s line %q", k, sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return ProcMem{}, fmt.Errorf("%s: %w", k, err)
		}
		*dst = n << 10
		found++
	}
	if found != len(fields) {
		return ProcMem{}, errors.New("VmRSS, VmHWM or RssFile missing from /proc status")
	}
	return m, nil
}

// ProcStat is what the benchmarks read from /proc/<pid>/stat.
type ProcStat struct {
	PID  int
	PPID int
	// Comm is the executable's name (at most 15 characters).
	Comm string
	// CPU is user plus system time.
	CPU time.Duration
}

// ReadProcStat reads /proc/<pid>/stat.
func ReadProcStat(pid int) (ProcStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStat{}, fmt.Errorf("read stat of process %d: %w", pid, err)
	}
	return parseStat(data)
}

func parseStat(data []byte) (ProcStat, error) {
	s := string(data)
	// comm is in parentheses and may itself hold spaces and parentheses: cut at the last ')'.
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return ProcStat{}, errors.New("malformed /proc stat: no (comm)")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return ProcStat{}, fmt.Errorf("malformed /proc stat pid: %w", err)
	}
	f := strings.Fields(s[closing+1:])
	// After comm: state(0) ppid(1) ... utime(11) stime(12).
	if len(f) < 13 {
		return ProcStat{}, errors.New("malformed /proc stat: too few fields")
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseInt(f[11], 10, 64)
	st, err3 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return ProcStat{}, fmt.Errorf("malformed /proc stat: %w", err)
	}
	return ProcStat{PID: pid, PPID: ppid, Comm: s[open+1 : closing], CPU: time.Duration(ut+st) * time.Second / userHZ}, nil
}

// Children returns the processes whose parent is ppid, by executable name.
func Children(ppid int) (map[string][]ProcStat, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	out := map[string][]ProcStat{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended meanwhile
		}
		st, err := parseStat(data)
		if err != nil || st.PPID != ppid {
			continue
		}
		out[st.Comm] = append(out[st.Comm], st)
	}
	return out, nil
}

// LoadAvg returns the 1-, 5- and 15-minute load averages.
func LoadAvg() ([3]float64, error) {
	var l [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l, fmt.Errorf("read load average: %w", err)
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return l, errors.New("malformed /proc/loadavg")
	}
	for i := range l {
		if l[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return l, fmt.Errorf("malformed /proc/loadavg: %w", err)
		}
	}
	return l, nil
}

// CPUModel returns the first "model name" of /proc/cpuinfo, "" when there is none.
func CPUModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Kernel returns the running kernel's release.
func Kernel() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
