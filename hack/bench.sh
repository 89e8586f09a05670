#!/usr/bin/env bash
# hack/bench.sh: run every benchmark and write BENCHMARKS.md (`make bench`).
#
#   hack/bench.sh            full run: 10-minute churn run, 5 relists per steady-state window,
#                            20 reaction samples (about 40 minutes on 2 CPUs)
#   hack/bench.sh --quick    quick run (also QUICK=1): 60-second churn run, 1 relist per
#                            window, 10 samples, shorter micro-benchmarks (about 18 minutes)
#
# Environment: BENCH_DIR keeps the raw outputs there (default: a temporary folder, printed);
# BENCH_OUT is the report (default BENCHMARKS.md at the repository root); BENCH_CHURN overrides
# the churn run's length (a Go duration); BENCH_ARGS adds flags of the end-to-end test (see
# test/bench/e2e_test.go, e.g. "-bench.sizes=100,1000", or "-bench.phases=steady,estates"
# to run the bursts with only those phases; the phases are steady, reactions, churn, estates).
# The report keeps the sections added by hand at the end of BENCH_OUT (see
# test/bench/render.go, HandWritten).
#
# It needs nothing beyond Go: hack/testbin.sh provides kube-apiserver and etcd. Run it on a quiet
# machine: the report records the CPU count, the CPU model and the load average.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

quick="${QUICK:-}"
for arg in "$@"; do
	case "$arg" in
	--quick) quick=1 ;;
	-h | --help)
		sed -n '2,19p' "$0"
		exit 0
		;;
	*)
		echo "bench.sh: unknown argument $arg" >&2
		exit 2
		;;
	esac
done

dir="${BENCH_DIR:-$(mktemp -d -t xo-ccm-bench.XXXXXX)}"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd) # the end-to-end run and the renderer run in test/ (the test module)
out=$(realpath -m "${BENCH_OUT:-$root/BENCHMARKS.md}")
pkg="github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager"
version="$(git describe --tags --always --dirty 2>/dev/null || echo dev)"

if [[ -n "$quick" ]]; then
	command="make bench QUICK=1"
	churn="${BENCH_CHURN:-60s}"
	benchtime="300ms"
	modeflags=(-bench.quick)
else
	command="make bench"
	churn="${BENCH_CHURN:-10m}"
	benchtime="1s"
	modeflags=()
fi

echo "bench: raw outputs in $dir; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo "bench: control-plane binaries (hack/testbin.sh)" >&2
hack/testbin.sh >/dev/null
KUBEBUILDER_ASSETS="$(hack/testbin.sh --path)"
export KUBEBUILDER_ASSETS

echo "bench: building the controller as make build does" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X $pkg/cmd/app.version=$version" \
	-o "$dir/xenorchestra-cloud-controller-manager" ./cmd/xenorchestra-cloud-controller-manager

echo "bench: micro-benchmarks" >&2
# A failing micro-benchmark does not stop the run: the report lists it under its errors.
micro_status=0
go test -run '^$' -bench . -benchmem -count 1 -benchtime "$benchtime" \
	./webhook/ ./xo/ ./xo/inventory/ ./xo/node/ 2>&1 | tee "$dir/micro.txt" || micro_status=$?

echo "bench: end-to-end benchmarks (churn run $churn)" >&2
status=0
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags.
go -C test test -tags bench -run '^TestEndToEnd$' -count 1 -timeout 4h -v ./bench/ -args \
	-bench.out="$dir/results.json" -bench.binary="$dir/xenorchestra-cloud-controller-manager" \
	-bench.command="$command" -bench.churn="$churn" "${modeflags[@]}" ${BENCH_ARGS:-} \
	2>&1 | tee "$dir/e2e.txt" || status=$?

if [[ ! -s "$dir/results.json" ]]; then
	echo "bench: the end-to-end benchmarks wrote no results (see $dir/e2e.txt)" >&2
	exit 1
fi
go -C test run ./bench/render -results "$dir/results.json" -micro "$dir/micro.txt" -out "$out"
echo "bench: wrote $out" >&2
if grep -q -F '**missed**' "$out"; then
	echo "bench: targets missed:" >&2
	grep -F '**missed**' "$out" | cut -d'|' -f2,3 | sed 's/^/  /' >&2
fi
if [[ $micro_status -ne 0 ]]; then
	echo "bench: some micro-benchmarks failed (see $dir/micro.txt)" >&2
	status=$micro_status
fi
if [[ $status -ne 0 ]]; then
	echo "bench: some checks failed (listed in the report under \"Errors during the run\")" >&2
fi
exit "$status"
