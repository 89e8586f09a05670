#!/usr/bin/env bash
# testbin.sh builds the real Kubernetes binaries the tests and the demo use (etcd, kube-apiserver,
# kubectl, kubelet, kube-scheduler, kube-controller-manager, helm), and Prometheus' promtool and
# prometheus, from the Go module proxy, because their release hosts are out of reach here.
# Results are cached: a second run checks versions and exits in well under a second.
#
#   hack/testbin.sh              build what is missing, print the directory holding the binaries
#   hack/testbin.sh NAME...      the same for these binaries only
#   hack/testbin.sh --demo [NAME...]
#                                these binaries (default: etcd and kube-apiserver) if missing, and
#                                the demo command as bin/demo, in the same build
#   hack/testbin.sh --path       print the directory only (no build)
#
# Besides the Kubernetes binaries, NAME may be a tool the release and its tests use, each
# `go install`ed once per version into $TESTBIN_DIR/tools/NAME-vVERSION and linked into the
# directory: registry (the CNCF registry, distribution's cmd/registry: the real-node tier's OCI
# registry), crane (go-containerregistry's: pushes the release's image there) and
# cyclonedx-gomod (the release's SBOM).
#
# A cold build is mostly compilation (on 2 cores, about 9 and a half to 12 minutes for etcd and
# kube-apiserver, see BENCHMARKS.md, "Cold start"), so this script compiles each package once:
# etcd, the Kubernetes binaries and the demo are built by one `go build` in one module graph
# (this repository's go.mod with Kubernetes' and etcd's requirements, every module they use
# pinned to its version in their own graph: setup_build), so that the demo's client-go, api and
# apimachinery are theirs, and its own packages and link fill the cores while the last of the
# API server's compile. Modules download 16 at a time while the standard library packages that
# every build uses compile. helm, and promtool with prometheus, modules of their own, build
# alongside. While anything builds, a line every 15 s says what and for how long.
#
# Environment: TESTBIN_DIR (cache root, default ~/.cache/xenorchestra-ccm/testbin),
# TESTBIN_NO_KUBELET=1 to leave the kubelet, kube-scheduler, kube-controller-manager, registry
# and crane out when no NAME is given (only the real-node tests, test/kubelet, need them),
# K8S_VERSION (default 1.37.2, the newest supported) to build another supported Kubernetes
# version into a directory of its own: a full version, e.g. 1.34.4 (`go list -m -versions
# k8s.io/kubernetes` lists them); CI tests the oldest supported minor this way.
set -euo pipefail

# K8S_MINORS are the Kubernetes minors the project supports (README, "Supported Kubernetes
# versions"; the chart's kubeVersion): the three upstream supports and one older.
K8S_MINORS="1.34 1.35 1.36 1.37"
K8S_VERSION=${K8S_VERSION:-1.37.2}
ETCD_VERSION=3.7.3
HELM_VERSION=3.22.0
# Prometheus' Go module version 0.3MM.P is its release 3.MM.P (prometheus_release). Versions up
# to 0.314.0 have replace or exclude directives in their go.mod, which `go install` refuses.
PROMETHEUS_VERSION=0.316.0
prometheus_release=${PROMETHEUS_VERSION#0.}
prometheus_release="${prometheus_release:0:1}.$((10#${prometheus_release:1:2})).${prometheus_release#*.}"

if [[ ! "$K8S_VERSION" =~ ^1\.[0-9]+\.[0-9]+$ || " $K8S_MINORS " != *" ${K8S_VERSION%.*} "* ]]; then
  echo "testbin: K8S_VERSION=$K8S_VERSION: want a full version of a supported minor ($K8S_MINORS), e.g. ${K8S_MINORS%% *}.0" >&2
  exit 2
fi
REGISTRY_VERSION=3.1.2
CRANE_VERSION=0.22.1
CYCLONEDX_GOMOD_VERSION=1.10.0

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xenorchestra-ccm/testbin}
bin="$root/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION"
if [[ "${1:-}" == "--path" ]]; then echo "$bin"; exit 0; fi

demo=0
if [[ "${1:-}" == "--demo" ]]; then
  shift
  demo=1
  (($#)) || set -- etcd kube-apiserver
fi
want=("$@")
if ((${#want[@]} == 0)); then
  want=(etcd kube-apiserver kubectl helm cyclonedx-gomod)
  [[ "${TESTBIN_NO_KUBELET:-}" == 1 ]] || want+=(kubelet kube-scheduler kube-controller-manager registry crane)
  want+=(promtool prometheus)
fi
for b in "${want[@]}"; do
  case $b in
    etcd | kube-apiserver | kubectl | kubelet | kube-scheduler | kube-controller-manager | helm) ;;
    registry | crane | cyclonedx-gomod | promtool | prometheus) ;;
    *) echo "testbin: unknown binary $b (etcd, kube-apiserver, kubectl, kubelet, kube-scheduler, kube-controller-manager, helm, registry, crane, cyclonedx-gomod, promtool, prometheus)" >&2; exit 2 ;;
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
# Compiler flags of every build here, the demo's included, so that they share compiled packages.
# No DWARF: the binaries are stripped anyway (-s -w), and generating it costs a tenth of the
# compile time. No -trimpath: the demo finds the repository through its source file paths.
gcflags=all=-dwarf=false
k8s_src="$root/src/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"

# setup_k8s writes the module that requires Kubernetes and etcd.
setup_k8s() {
  mkdir -p "$k8s_src"
  cd "$k8s_src"
  # The require lines are written last: without them the setup did not finish.
  grep -qs "go.etcd.io/etcd/server/v3 v$ETCD_VERSION" go.mod && return 0
  rm -f go.mod go.sum
  go mod init testbin/k8s >/dev/null 2>&1
  go mod download k8s.io/kubernetes@v$K8S_VERSION
  local modfile
  modfile=$(go mod download -json k8s.io/kubernetes@v$K8S_VERSION | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local
  # paths; a dependent module has to name the published versions itself.
  local staging
  staging=$(grep -E '^\s*k8s.io/[a-z0-9-]+ v0\.0\.0\s*$' "$modfile" | awk '{print $1}' | sort -u)
  for m in $staging; do go mod edit -replace "$m=$m@v0.$minor.${K8S_VERSION##*.}"; done
  go mod edit -require "k8s.io/kubernetes@v$K8S_VERSION" -require "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
}

# setup_build writes $build_mod, the module file of every build here but helm's: the
# repository's go.mod, requiring Kubernetes and etcd, with every module of their graph replaced
# by its version there. So etcd and the Kubernetes binaries build with exactly their own graph's
# versions, and the demo, a package of this repository, builds in the same `go build` with those
# versions of the modules it shares with them (client-go, api, apimachinery: compiled once).
build_mod="$k8s_src/build.mod"
setup_build() {
  setup_k8s
  local sum=${build_mod%.mod}.sum edits=() m v
  cp "$repo/go.mod" "$build_mod"
  touch "$sum"
  LC_ALL=C sort -u "$repo/go.sum" "$sum" -o "$sum"
  edits=(-require "k8s.io/kubernetes@v$K8S_VERSION" -require "go.etcd.io/etcd/server/v3@v$ETCD_VERSION")
  while read -r m v; do edits+=("-replace=$m=$m@$v"); done < <(
    cd "$k8s_src" && go list -m -f '{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' all)
  go mod edit -modfile="$build_mod" "${edits[@]}"
}

# build NAME...: etcd, kube-apiserver, kubectl, kubelet and/or demo (hack/demo, as
# $repo/bin/demo) in one `go build`, each package compiled once.
build() {
  local pkgs=() b
  for b in "$@"; do
    case $b in
      etcd) pkgs+=("go.etcd.io/etcd/server/v3") ;;
      demo) pkgs+=("./hack/demo") ;;
      *) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
    esac
  done
  # While the modules download, the standard library packages that every build here uses compile:
  # net/http and the rest of these roots import 204 packages, all needed, where std is 360 (35 s
  # against 50 s on 2 cores, and the build waits for it).
  go build -gcflags="$gcflags" net/http net/http/pprof encoding/json text/template html/template \
    os/exec regexp compress/gzip archive/tar go/ast &
  local std=$!
  # The go command fetches as many modules at once as GOMAXPROCS (2 here); 16 at a time take the
  # module graph's go.mod files in 1.6 s instead of 10.5 s, and halve the downloads.
  GOMAXPROCS=16 setup_build
  cd "$repo"
  GOMAXPROCS=16 go list -modfile="$build_mod" -deps "${pkgs[@]}" >/dev/null
  wait $std
  local ver="-X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ver+=" -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  # With -o naming a directory, go build writes each command there under its own name; etcd's
  # is server, the element before /v3.
  go build -modfile="$build_mod" -gcflags="$gcflags" -ldflags "-s -w $ver" -o "$bin/" "${pkgs[@]}"
  if [[ " $* " == *" etcd "* ]]; then mv "$bin/server" "$bin/etcd"; fi
  if [[ " $* " == *" demo "* ]]; then mkdir -p "$repo/bin" && mv "$bin/demo" "$repo/bin/demo"; fi
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
  go build -gcflags="$gcflags" -ldflags "$ld" -o "$bin/helm" helm.sh/helm/v3/cmd/helm
}

# has_module NAME MODULE VERSION: true when bin/NAME is a Go binary of MODULE at VERSION (as go
# install stamps it: the tools' own version commands differ, and some print none).
has_module() {
  [[ -x "$bin/$1" ]] || return 1
  local out
  out=$(go version -m "$bin/$1" 2>/dev/null) || return 1
  [[ "$out" == *$'\tmod\t'"$2"$'\t'"$3"* ]]
}

# install_tool NAME PACKAGE VERSION: go install PACKAGE@VERSION into the tools cache, once per
# version whatever K8S_VERSION, and link it into bin as NAME.
install_tool() {
  local name=$1 pkg=$2 version=$3 dir="$root/tools/$1-$3"
  if [[ ! -x "$dir/$name" ]]; then
    # GOFLAGS=-mod=mod (above) is refused by go install pkg@version.
    GOFLAGS= GOBIN="$dir" go install -trimpath -ldflags "-s -w" "$pkg@$version"
  fi
  ln -sfn "$dir/$name" "$bin/$name"
}

# build_registry builds the CNCF registry (distribution), that the real-node tier serves the
# release's chart and image from.
build_registry() { install_tool registry github.com/distribution/distribution/v3/cmd/registry "v$REGISTRY_VERSION"; }

# build_crane builds crane, that pushes the release's image (an OCI layout) to a registry.
build_crane() { install_tool crane github.com/google/go-containerregistry/cmd/crane "v$CRANE_VERSION"; }

# build_cyclonedx_gomod builds cyclonedx-gomod, that writes the release's SBOM from the
# binary's module information.
build_cyclonedx_gomod() { install_tool cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod "v$CYCLONEDX_GOMOD_VERSION"; }

# link_etcd links an etcd of ETCD_VERSION that another K8S_VERSION's directory holds, if any:
# etcd does not depend on the Kubernetes version, and compiling it again costs minutes (CI builds
# the newest version's binaries, then the oldest's).
link_etcd() {
  local other
  for other in "$root"/k8s-*-etcd-"$ETCD_VERSION"-*/etcd; do
    if [[ "$other" != "$bin/etcd" && -x "$other" && ! -L "$other" ]]; then
      ln -sfn "$other" "$bin/etcd"
      return 0
    fi
  done
  return 1
}

# build_prometheus builds promtool and prometheus in one `go install`, which compiles their shared
# packages once, into the tools cache as install_tool does (once per version whatever
# K8S_VERSION), and links them into $bin. Without the web UI's assets
# (its pages answer 500, its API works) and without service discovery (remove_all_sd: the tests
# scrape static targets), which leaves out the cloud SDKs: 1.9 GB of modules and most of the
# compile time.
build_prometheus() {
  local dir="$root/tools/prometheus-$PROMETHEUS_VERSION" mod=github.com/prometheus/prometheus
  if ! [[ -x "$dir/promtool" && -x "$dir/prometheus" ]]; then
    # GOFLAGS=-mod=mod (above) is refused by go install pkg@version.
    GOFLAGS= GOBIN="$dir" go install -tags remove_all_sd -gcflags="$gcflags" \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=$prometheus_release -X github.com/prometheus/common/version.Revision=v$PROMETHEUS_VERSION" \
      "$mod/cmd/promtool@v$PROMETHEUS_VERSION" "$mod/cmd/prometheus@v$PROMETHEUS_VERSION"
  fi
  ln -sfn "$dir/promtool" "$bin/promtool"
  ln -sfn "$dir/prometheus" "$bin/prometheus"
}

# What is missing.
k8s=()
if wants etcd && ! has etcd "etcd Version: $ETCD_VERSION" --version && ! link_etcd; then k8s+=(etcd); fi
if wants kube-apiserver && ! has kube-apiserver "v$K8S_VERSION" --version; then k8s+=(kube-apiserver); fi
if wants kubectl && ! has kubectl "v$K8S_VERSION" version --client; then k8s+=(kubectl); fi
if wants kubelet && ! has kubelet "v$K8S_VERSION" --version; then k8s+=(kubelet); fi
if wants kube-scheduler && ! has kube-scheduler "v$K8S_VERSION" --version; then k8s+=(kube-scheduler); fi
if wants kube-controller-manager && ! has kube-controller-manager "v$K8S_VERSION" --version; then k8s+=(kube-controller-manager); fi
helm=0
if wants helm && ! has helm "v$HELM_VERSION" version --short; then helm=1; fi

jobs_pid=() jobs_what=()
# start WHAT FUNC ARGS...: runs FUNC in the background and logs when it ends; wait_all waits for
# it. (Never call it, or FUNC, in an && or || list: bash then ignores set -e inside.)
start() {
  local what=$1 t0=$SECONDS; shift
  log "building $what"
  (
    "$@"
    log "built $what in $(elapsed $((SECONDS - t0)))"
  ) &
  jobs_pid+=($!) jobs_what+=("$what")
}

# wait_all reports every 15 s what still builds, then collects the exit statuses.
wait_all() {
  local t0=$SECONDS next=$((SECONDS + 15)) running i list failed=()
  while :; do
    running=()
    for i in "${!jobs_pid[@]}"; do
      if kill -0 "${jobs_pid[$i]}" 2>/dev/null; then running+=("${jobs_what[$i]}"); fi
    done
    ((${#running[@]})) || break
    if ((SECONDS >= next)); then
      list=$(printf ', %s' "${running[@]}")
      log "still building ${list:2} ($(elapsed $((SECONDS - t0))))"
      next=$((next + 15))
    fi
    sleep 1
  done
  for i in "${!jobs_pid[@]}"; do
    wait "${jobs_pid[$i]}" || failed+=("${jobs_what[$i]}")
  done
  jobs_pid=() jobs_what=()
  if ((${#failed[@]})); then
    list=$(printf ', %s' "${failed[@]}")
    log "failed to build ${list:2}"
    exit 1
  fi
}

if ((${#k8s[@]})); then
  log "${k8s[*]}: not built yet; compiling from source takes minutes and up to 2 GB of memory (2 cores, cold: etcd and kube-apiserver 9 to 12 minutes, the other Kubernetes binaries several more)"
fi
# The demo builds every time (it is this repository's code), with what is missing.
if ((demo)); then k8s+=(demo); fi
if ((${#k8s[@]})); then start "${k8s[*]} (Kubernetes v$K8S_VERSION, etcd v$ETCD_VERSION)" build "${k8s[@]}"; fi
if ((helm)); then start "helm v$HELM_VERSION" build_helm; fi
if wants registry && ! has_module registry github.com/distribution/distribution/v3 "v$REGISTRY_VERSION"; then start "registry v$REGISTRY_VERSION" build_registry; fi
if wants crane && ! has_module crane github.com/google/go-containerregistry "v$CRANE_VERSION"; then start "crane v$CRANE_VERSION" build_crane; fi
if wants cyclonedx-gomod && ! has_module cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod "v$CYCLONEDX_GOMOD_VERSION"; then start "cyclonedx-gomod v$CYCLONEDX_GOMOD_VERSION" build_cyclonedx_gomod; fi
if { wants promtool && ! has_module promtool github.com/prometheus/prometheus "v$PROMETHEUS_VERSION"; } ||
  { wants prometheus && ! has_module prometheus github.com/prometheus/prometheus "v$PROMETHEUS_VERSION"; }; then
  start "promtool and prometheus v$PROMETHEUS_VERSION" build_prometheus
fi
wait_all
echo "$bin"
