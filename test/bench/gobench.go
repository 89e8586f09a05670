package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// GoBench is one result line of `go test -bench`.
type GoBench struct {
	// Pkg is the import path from the preceding "pkg:" line.
	Pkg string `json:"pkg"`
	// Name is the benchmark's name without the "-<GOMAXPROCS>" suffix.
	Name  string `json:"name"`
	Procs int    `json:"procs"`
	N     int64  `json:"n"`
	// Metrics are the value/unit pairs in order (ns/op, B/op, allocs/op, custom units).
	Metrics []Metric `json:"metrics"`
}

// Metric is one value of a benchmark line.
type Metric struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Get returns the value of the metric with this unit.
func (b GoBench) Get(unit string) (float64, bool) {
	for _, m := range b.Metrics {
		if m.Unit == unit {
			return m.Value, true
		}
	}
	return 0, false
}

// maxBenchLine bounds one line of go test output.
const maxBenchLine = 1 << 20

// ParseGoBench reads the output of `go test -bench` (several packages may follow each other)
// and returns its benchmark lines. Other lines (PASS, ok, goos, logs) are skipped; a line that
// starts like a result but does not parse as one is an error naming its line number.
func ParseGoBench(r io.Reader) ([]GoBench, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxBenchLine)
	var out []GoBench
	pkg := ""
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if p, ok := strings.CutPrefix(text, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(text, "Benchmark") {
			continue
		}
		fields := strings.Fields(text)
		// A benchmark's name alone on a line (its logs follow) or a "--- FAIL" report.
		if len(fields) < 2 {
			continue
		}
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			// "BenchmarkX   some log output": not a result line.
			continue
		}
		if len(fields)%2 != 0 {
			return nil, fmt.Errorf("line %d: odd number of value/unit fields in %q", line, text)
		}
		b := GoBench{Pkg: pkg, N: n}
		b.Name, b.Procs = splitProcs(fields[0])
		for i := 2; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: value %q: %w", line, fields[i], err)
			}
			b.Metrics = append(b.Metrics, Metric{Value: v, Unit: fields[i+1]})
		}
		out = append(out, b)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read benchmark output: %w", err)
	}
	return out, nil
}

// FailedPackages returns the packages that `go test` output reports as failed ("FAIL<tab>pkg"
// lines), in order.
func FailedPackages(out string) []string {
	var pkgs []string
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, "FAIL\t"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				pkgs = append(pkgs, f[0])
			}
		}
	}
	return pkgs
}

// splitProcs splits "BenchmarkX/sub-8" into "BenchmarkX/sub" and 8; without a numeric suffix
// the name is kept whole and procs is 1.
func splitProcs(s string) (string, int) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 {
		return s, 1
	}
	p, err := strconv.Atoi(s[i+1:])
	if err != nil || p <= 0 {
		return s, 1
	}
	return s[:i], p
}
