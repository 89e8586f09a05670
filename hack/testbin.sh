#!/usr/bin/env bash
# testbin.sh builds the real Kubernetes binaries the tests and the demo use (kube-apiserver,
# kubectl, kubelet, etcd, helm) from the Go module proxy, because their release hosts are out of
# reach here. Results are cached: a second run checks versions and exits in well under a second.
#
#   hack/testbin.sh            build what is missing, print the directory holding the binaries
#   hack/testbin.sh --path     print the directory only (no build)
#
# Environment: TESTBIN_DIR (cache root, default ~/.cache/xenorchestra-ccm/testbin),
# TESTBIN_NO_KUBELET=1 to skip the kubelet (only the kubelet integration test needs it).
set -euo pipefail

K8S_VERSION=1.37.2
ETCD_VERSION=3.7.3
HELM_VERSION=3.22.0

root=${TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xenorchestra-ccm/testbin}
bin="$root/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION"
if [[ "${1:-}" == "--path" ]]; then echo "$bin"; exit 0; fi
mkdir -p "$bin" "$root/src"

log() { echo "testbin: $*" >&2; }

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

build_kube() {
  local want=("kube-apiserver" "kubectl")
  [[ "${TESTBIN_NO_KUBELET:-}" == 1 ]] || want+=("kubelet")
  local missing=()
  has kube-apiserver "v$K8S_VERSION" --version || missing+=(kube-apiserver)
  has kubectl "v$K8S_VERSION" version --client || missing+=(kubectl)
  [[ " ${want[*]} " == *" kubelet "* ]] && { has kubelet "v$K8S_VERSION" --version || missing+=(kubelet); }
  ((${#missing[@]})) || return 0
  log "building ${missing[*]} v$K8S_VERSION (cold: several minutes, ~2.5 GB memory)"
  local src="$root/src/kube-$K8S_VERSION"
  mkdir -p "$src"
  (
    cd "$src"
    if [[ ! -f go.mod ]]; then
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
    for b in "${missing[@]}"; do
      go build -trimpath -ldflags "-s -w $ver" -o "$bin/$b" "k8s.io/kubernetes/cmd/$b"
      log "built $b"
    done
  )
}

build_etcd() {
  has etcd "etcd Version: $ETCD_VERSION" --version && return 0
  log "building etcd v$ETCD_VERSION"
  local src="$root/src/etcd-$ETCD_VERSION"
  mkdir -p "$src"
  (
    cd "$src"
    [[ -f go.mod ]] || { go mod init testbin/etcd >/dev/null 2>&1; go mod edit -require "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"; }
    go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
  )
}

build_helm() {
  has helm "v$HELM_VERSION" version --short && return 0
  log "building helm v$HELM_VERSION"
  local src="$root/src/helm-$HELM_VERSION"
  mkdir -p "$src"
  (
    cd "$src"
    [[ -f go.mod ]] || { go mod init testbin/helm >/dev/null 2>&1; go mod edit -require "helm.sh/helm/v3@v$HELM_VERSION"; }
    # Without these helm reports Kubernetes v1.20 as its default capabilities.
    local ld="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"
    ld+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
    ld+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"
    go build -trimpath -ldflags "$ld" -o "$bin/helm" helm.sh/helm/v3/cmd/helm
  )
}

build_etcd
build_helm
build_kube
echo "$bin"
