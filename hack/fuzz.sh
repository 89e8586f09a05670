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
#
# hack/fuzz.sh --compile only compiles each package's instrumented test binary (every package
# built with the fuzzers' coverage instrumentation, which no other build shares), so that a later
# run starts at once: .ci/run does it while make test runs.
set -euo pipefail
cd "$(dirname "$0")/.."
targets() { git grep -o -E '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed 's/func //'; }

if [[ ${1:-} == --compile ]]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  # One target per package is enough: the instrumentation does not depend on the target.
  targets | while IFS=: read -r file name; do echo "./$(dirname "$file") $name"; done | sort -u -k1,1 |
    while read -r pkg name; do go test -c -fuzz "^${name}\$" -o "$dir/" "$pkg"; done
  exit
fi

fuzztime=${FUZZTIME:-20000x}
status=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $name ($fuzztime)"
  if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" >"/tmp/fuzz-$name.log" 2>&1; then
    cat "/tmp/fuzz-$name.log"
    status=1
  fi
done < <(targets)
exit $status
