// Package bench holds the end-to-end benchmarks of the controller and the report they feed.
//
// The benchmarks themselves are in files built only with the tag "bench" (so that `go test
// ./...` stays fast): they start a real etcd and kube-apiserver, the XO simulator, and the real
// controller binary as a subprocess, then measure initialization bursts, steady-state XO and API
// server load, reaction times, and memory, and write the figures as JSON (Results).
//
//	make bench            (hack/bench.sh: micro-benchmarks + this package, then BENCHMARKS.md)
//	make bench QUICK=1    (a shorter churn run and fewer samples)
//
// The package's untagged code turns Results and the output of `go test -bench` into
// BENCHMARKS.md (see Render and the render command).
package bench
