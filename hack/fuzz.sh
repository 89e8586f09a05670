#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the repository for a fixed time each (FUZZTIME, default
# 10s). A crasher is written by go test under the package's testdata/fuzz/ folder: commit it, and
# it runs as a regression case in every `go test` from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
status=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $name ($fuzztime)"
  if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" >"/tmp/fuzz-$name.log" 2>&1; then
    cat "/tmp/fuzz-$name.log"
    status=1
  fi
done < <(git grep -o -E '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed 's/func //')
exit $status
