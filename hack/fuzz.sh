#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the repository for a fixed number of executions each
# (FUZZTIME, default 20000x; a duration such as 10s also works). A crasher is written by go test
# under the package's testdata/fuzz/ folder: commit it, and it runs as a regression case in every
# `go test` from then on.
#
# Why a count and not a duration: with a duration, Go's fuzz coordinator before Go 1.27 can report
# its own deadline as a failure ("context deadline exceeded", no crasher written) when a worker is
# mid-input as time runs out on a loaded machine (golang/go#75804; seen in our CI on
# FuzzAdmissionHandler). A count has no deadline to race. 20000 executions take 2 to 30 s per
# target here (the admission handler is the slowest, at about 1,000 per second on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
targets() { git grep -o -E '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed 's/func //'; }
# gotest PKG ARGS... runs go test on PKG (./dir) in the module that holds it: the controller's,
# or the test module (test/go.mod).
gotest() {
  local pkg=$1
  shift
  if [[ $pkg == ./test/* ]]; then
    go -C test test "./${pkg#./test/}" "$@"
  else
    go test "$pkg" "$@"
  fi
}

fuzztime=${FUZZTIME:-20000x}
# The fuzzers' instrumented build shares no compiled package with any other build: it is compiled
# without DWARF (a crasher's stack does not need it; a sixth of the compile time) and without go
# test's vet (make vet and make test run it on the same code). Seed corpora run in make test.
flags=(-vet=off -gcflags=all=-dwarf=false -ldflags=-w)
status=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $name ($fuzztime)"
  if ! gotest "$pkg" "${flags[@]}" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" >"/tmp/fuzz-$name.log" 2>&1; then
    cat "/tmp/fuzz-$name.log"
    status=1
  fi
done < <(targets)
exit $status
