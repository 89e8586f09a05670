package bench

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// ProcMem is a process's memory from /proc/<pid>/status, in bytes.
type ProcMem struct {
	// RSS is VmRSS, HWM VmHWM (the peak resident set), File RssFile: the resident pages
	// mapped from files, for a Go process its binary's code and read-only data.
	RSS, HWM, File int64
}

// ProcMemory reads a process's ProcMem.
func ProcMemory(pid int) (ProcMem, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ProcMem{}, fmt.Errorf("find process %d: %w", pid, err)
	}
	s, err := p.NewStatus()
	if err != nil {
		return ProcMem{}, fmt.Errorf("read status of process %d: %w", pid, err)
	}
	return ProcMem{RSS: int64(s.VmRSS), HWM: int64(s.VmHWM), File: int64(s.RssFile)}, nil
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

func procStat(s procfs.ProcStat) ProcStat {
	return ProcStat{PID: s.PID, PPID: s.PPID, Comm: s.Comm, CPU: time.Duration(s.CPUTime() * float64(time.Second))}
}

// ReadProcStat reads /proc/<pid>/stat.
func ReadProcStat(pid int) (ProcStat, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ProcStat{}, fmt.Errorf("find process %d: %w", pid, err)
	}
	s, err := p.Stat()
	if err != nil {
		return ProcStat{}, fmt.Errorf("read stat of process %d: %w", pid, err)
	}
	return procStat(s), nil
}

// Children returns the processes whose parent is ppid, by executable name.
func Children(ppid int) (map[string][]ProcStat, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := map[string][]ProcStat{}
	for _, p := range procs {
		s, err := p.Stat()
		if err != nil || s.PPID != ppid {
			continue // or the process ended meanwhile
		}
		out[s.Comm] = append(out[s.Comm], procStat(s))
	}
	return out, nil
}

// LoadAvg returns the 1-, 5- and 15-minute load averages.
func LoadAvg() ([3]float64, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return [3]float64{}, fmt.Errorf("open /proc: %w", err)
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return [3]float64{}, fmt.Errorf("read load average: %w", err)
	}
	return [3]float64{l.Load1, l.Load5, l.Load15}, nil
}

// CPUModel returns the first CPU's model name from /proc/cpuinfo, "" when there is none.
func CPUModel() string {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return ""
	}
	cpus, err := fs.CPUInfo()
	if err != nil || len(cpus) == 0 {
		return ""
	}
	return cpus[0].ModelName
}

// Kernel returns the running kernel's release.
func Kernel() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
