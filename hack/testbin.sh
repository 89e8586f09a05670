#!/usr/bin/env bash
# testbin.sh builds the real Kubernetes binaries the tests and the demo use (etcd, kube-apiserver,
# kubectl, kubelet, helm) from the Go module proxy, because their release hosts are out of reach
# here. Results are cached: a second run checks versions and exits in well under a second.
#
#   hack/testbin.sh              build what is missing, print the directory holding the binaries
#   hack/testbin.sh NAME...      the same for these binaries only (the demo: etcd kube-apiserver)
#   hack/testbin.sh --path       print the directory only (no build)
#
# The three module graphs (etcd, helm, Kubernetes) build concurrently, so one graph's downloads
# overlap another's compilation; the Kubernetes binaries share one `go build`. While anything
# builds, a line every 15 s says what and for how long.
#
# Environment: TESTBIN_DIR (cache root, default ~/.cache/xenorchestra-ccm/testbin),
# TESTBIN_NO_KUBELET=1 to leave the kubelet out when no NAME is given (only the kubelet
# integration test needs it).
set -euo pipefail

K8S_VERSION=1.37.2
ETCD_VERSION=3.7.3
HELM_VERSION=3.22.0

root=${TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xenorchestra-ccm/testbin}
bin="$root/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION"
if [[ "${1:-}" == "--path" ]]; then echo "$bin"; exit 0; fi

want=("$@")
if ((${#want[@]} == 0)); then
  want=(etcd kube-apiserver kubectl helm)
  [[ "${TESTBIN_NO_KUBELET:-}" == 1 ]] || want+=(kubelet)
fi
for b in "${want[@]}"; do
  case $b in
    etcd | kube-apiserver | kubectl | kubelet | helm) ;;
    *) echo "testbin: unknown binary $b (etcd, kube-apiserver, kubectl, kubelet, helm)" >&2; exit 2 ;;
  esac
done
wants() { [[ " ${want[*]} " == *" $1 "* ]]; }

mkdir -p "$bin" "$root/src"

log() { echo "testbin: $*" >&2; }

# elapsed SECONDS: 75 -> 1m15s.
elapsed() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# has NAME PATTERN ARGS...: true when bin/NAME runs and prints PATTERN.
has() {
  local name=$1 pattern=$2; shift 2
  [[ -x "$bin/$name" ]] || return 1
  # Capture first: with pipefail, grep -q closing the pipe early would fail the check.
  local out
  out=$("$bin/$name" "$@" 2>/dev/null) || true
  [[ "$out" == *"$pattern"* ]]
}

export CGO_ENABLED=0 GOFLAGS=-mod=mod
minor=${K8S_VERSION#*.}; minor=${minor%%.*}

# build_kube NAME...: kube-apiserver, kubectl and/or kubelet in one `go build`.
build_kube() {
  local src="$root/src/kube-$K8S_VERSION"
  mkdir -p "$src"
  cd "$src"
  # The require line is written last: without it the setup did not finish.
  if ! grep -qs "k8s.io/kubernetes v$K8S_VERSION" go.mod; then
    rm -f go.mod go.sum
    go mod init testbin/kube >/dev/null 2>&1
    go mod download k8s.io/kubernetes@v$K8S_VERSION
    local modfile
    modfile=$(go mod download -json k8s.io/kubernetes@v$K8S_VERSION | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local
    # paths; a dependent module has to name the published versions itself.
    local staging
    staging=$(grep -E '^\s*k8s.io/[a-z0-9-]+ v0\.0\.0\s*$' "$modfile" | awk '{print $1}' | sort -u)
    for m in $staging; do go mod edit -replace "$m=$m@v0.$minor.${K8S_VERSION##*.}"; done
    go mod edit -require "k8s.io/kubernetes@v$K8S_VERSION"
  fi
  local ver="-X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ver+=" -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  local pkgs=()
  for b in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  # With -o naming a directory, go build writes each command there under its own name.
  go build -trimpath -ldflags "-s -w $ver" -o "$bin/" "${pkgs[@]}"
}

build_etcd() {
  local src="$root/src/etcd-$ETCD_VERSION"
  mkdir -p "$src"
  cd "$src"
  if ! grep -qs "go.etcd.io/etcd/server/v3 v$ETCD_VERSION" go.mod; then
    rm -f go.mod go.sum
    go mod init testbin/etcd >/dev/null 2>&1
    go mod edit -require "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  fi
  go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
}

build_helm() {
  local src="$root/src/helm-$HELM_VERSION"
  mkdir -p "$src"
  cd "$src"
  if ! grep -qs "helm.sh/helm/v3 v$HELM_VERSION" go.mod; then
    rm -f go.mod go.sum
    go mod init testbin/helm >/dev/null 2>&1
    go mod edit -require "helm.sh/helm/v3@v$HELM_VERSION"
  fi
  # Without these helm reports Kubernetes v1.20 as its default capabilities.
  local ld="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"
  ld+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
  ld+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"
  go build -trimpath -ldflags "$ld" -o "$bin/helm" helm.sh/helm/v3/cmd/helm
}

# What is missing, per module graph.
kube=()
wants kube-apiserver && ! has kube-apiserver "v$K8S_VERSION" --version && kube+=(kube-apiserver)
wants kubectl && ! has kubectl "v$K8S_VERSION" version --client && kube+=(kubectl)
wants kubelet && ! has kubelet "v$K8S_VERSION" --version && kube+=(kubelet)
jobs_pid=() jobs_what=()
# start WHAT FUNC ARGS...: runs FUNC in the background and logs when it ends; the loop below
# waits for it. (Never call it, or FUNC, in an && or || list: bash then ignores set -e inside.)
start() {
  local what=$1 t0=$SECONDS; shift
  log "building $what"
  (
    "$@"
    log "built $what in $(elapsed $((SECONDS - t0)))"
  ) &
  jobs_pid+=($!) jobs_what+=("$what")
}
if wants etcd && ! has etcd "etcd Version: $ETCD_VERSION" --version; then
  start "etcd v$ETCD_VERSION" build_etcd
fi
if wants helm && ! has helm "v$HELM_VERSION" version --short; then
  start "helm v$HELM_VERSION" build_helm
fi
if ((${#kube[@]})); then
  log "${kube[*]}: cold, several minutes and ~2.5 GB of memory"
  start "${kube[*]} v$K8S_VERSION" build_kube "${kube[@]}"
fi

# Report every 15 s what still builds, then collect the exit statuses.
t0=$SECONDS next=$((SECONDS + 15))
while :; do
  running=()
  for i in "${!jobs_pid[@]}"; do
    kill -0 "${jobs_pid[$i]}" 2>/dev/null && running+=("${jobs_what[$i]}")
  done
  ((${#running[@]})) || break
  if ((SECONDS >= next)); then
    list=$(printf ', %s' "${running[@]}")
    log "still building ${list:2} ($(elapsed $((SECONDS - t0))))"
    next=$((next + 15))
  fi
  sleep 1
done
failed=()
for i in "${!jobs_pid[@]}"; do
  wait "${jobs_pid[$i]}" || failed+=("${jobs_what[$i]}")
done
if ((${#failed[@]})); then
  list=$(printf ', %s' "${failed[@]}")
  log "failed to build ${list:2}"
  exit 1
fi
echo "$bin"
