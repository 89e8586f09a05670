package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results.json")
	micro := filepath.Join(dir, "micro.txt")
	out := filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(results, []byte(`{"command":"make bench QUICK=1","machine":{"cpus":2},"bursts":[{"nodes":100,"webhook":true,"initialized":100,"total":500000000}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(micro, []byte("pkg: example.com/x\nBenchmarkX-2 10 100 ns/op\npanic: lookup missed\nFAIL\texample.com/x\t5.7s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(results, micro, out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"`make bench QUICK=1`", "| 100 | on | 500 ms | 0 |", "| example.com/x | X | 100 |", "- micro-benchmarks of example.com/x failed"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("report lacks %q:\n%s", want, data)
		}
	}

	// A hand-written section added at the end survives the next runs, once.
	const coldStart = "## Cold start\n\nMeasured by hand: 1.2 s.\n"
	if err := os.WriteFile(out, append(data, coldStart...), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := run(results, micro, out); err != nil {
			t.Fatal(err)
		}
	}
	if data, err = os.ReadFile(out); err != nil {
		t.Fatal(err)
	}
	if got := string(data); strings.Count(got, coldStart) != 1 || !strings.HasSuffix(got, coldStart) || !strings.Contains(got, "| 100 | on | 500 ms | 0 |") {
		t.Errorf("after two runs, the report does not end with the hand-written section once:\n%s", got)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	badMicro := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(badMicro, []byte("BenchmarkX-2 10 x ns/op\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(results, "", dir); err == nil || !strings.Contains(err.Error(), "read the hand-written sections") {
		t.Errorf("run onto a folder = %v, want an error reading its hand-written sections", err)
	}
	for _, tt := range []struct{ results, micro, want string }{
		{"", "", "-results is required"},
		{filepath.Join(dir, "missing.json"), "", "read results"},
		{bad, "", "decode"},
		{results, filepath.Join(dir, "missing.txt"), "read micro-benchmarks"},
		{results, badMicro, "parse"},
	} {
		if err := run(tt.results, tt.micro, out); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q, %q) = %v, want an error containing %q", tt.results, tt.micro, err, tt.want)
		}
	}
}
