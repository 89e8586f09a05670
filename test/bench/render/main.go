// Command render writes BENCHMARKS.md from the end-to-end results (JSON written by the
// bench-tagged test of package bench) and the output of `go test -bench`. Hand-written
// sections at the end of the existing file (see bench.HandWritten) are kept after the new
// figures.
//
//	go -C test run ./bench/render -results results.json -micro micro.txt -out BENCHMARKS.md
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/bench"
)

func main() {
	results := flag.String("results", "", "JSON results of the end-to-end benchmarks (required).")
	micro := flag.String("micro", "", "Output of `go test -bench` (optional).")
	out := flag.String("out", "BENCHMARKS.md", "File to write.")
	flag.Parse()
	if err := run(*results, *micro, *out); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(resultsFile, microFile, out string) error {
	if resultsFile == "" {
		return errors.New("-results is required")
	}
	data, err := os.ReadFile(resultsFile)
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	var r bench.Results
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("decode %s: %w", resultsFile, err)
	}
	var gb []bench.GoBench
	if microFile != "" {
		data, err := os.ReadFile(microFile)
		if err != nil {
			return fmt.Errorf("read micro-benchmarks: %w", err)
		}
		if gb, err = bench.ParseGoBench(bytes.NewReader(data)); err != nil {
			return fmt.Errorf("parse %s: %w", microFile, err)
		}
		for _, pkg := range bench.FailedPackages(string(data)) {
			r.Errors = append(r.Errors, fmt.Sprintf("micro-benchmarks of %s failed: the table lacks that package's benchmarks from the failing one on (see the run's micro.txt)", pkg))
		}
	}
	var buf bytes.Buffer
	if err := bench.Render(&buf, &r, gb); err != nil {
		return err
	}
	switch old, err := os.ReadFile(out); {
	case err == nil:
		buf.WriteString(bench.HandWritten(string(old)))
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read the hand-written sections of %s: %w", out, err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
