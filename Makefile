# xenorchestra-cloud-controller-manager
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

BINARY      := xenorchestra-cloud-controller-manager
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PKG         := github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager
LDFLAGS     := -s -w -X $(PKG)/cmd/app.version=$(VERSION)
GOLANGCI_LINT_VERSION := v2.15.0
BIN         := $(CURDIR)/bin
# make test and make vet compile as make build does (no cgo, -trimpath), so that what the tests
# build with it (the image of the real-node tier, the binary of the e2e and soak tests) reuses
# their compiled packages instead of compiling every dependency a second time: minutes, cold.
# (make test-race cannot: the race detector needs cgo.)
GOTEST_ENV  := CGO_ENABLED=0 GOFLAGS="-trimpath $(GOFLAGS)"
# TEST_P is how many packages make test builds and runs at once: one more than the CPUs (go
# test's default is as many), because the soak (a 5-minute schedule), the real-node and the e2e
# packages spend most of their time waiting on real time, and with as many slots as CPUs they
# hold the compiler back.
TEST_P      ?= $(shell echo $$(( $$(nproc) + 1 )))
IMAGE       ?= ghcr.io/xenorchestra-k8s/$(BINARY):$(VERSION)

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/xenorchestra-cloud-controller-manager (the same steps as the Dockerfile).
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/$(BINARY) ./cmd/$(BINARY)

.PHONY: testbin
testbin: ## Build or reuse etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, helm, promtool and prometheus for tests (cached).
	@hack/testbin.sh >/dev/null

.PHONY: realnode
realnode: ## As root, install what the real-node tests need from Debian (containerd, runc, CNI plugins, iptables) if missing.
	@hack/realnode.sh

.PHONY: openapi
openapi: ## Fetch XO's pinned OpenAPI document for the simulator's conformance test (cached).
	@hack/openapi.sh >/dev/null

.PHONY: test
# The repository holds two modules: the controller's (.) and the test module (test/go.mod): the
# integration tiers (e2e, real node, soak, benchmarks), the simulator's conformance test, the
# Dockerfile's test and the image builder, whose dependencies (BuildKit's parser, an OpenAPI
# validator, go-containerregistry, the CRI client) the controller does not need. make test runs
# both at once, so that the test module's long waits (the soak, the real node) overlap the
# controller's packages.
test: testbin openapi realnode ## Run every test (unit, simulator conformance, envtest integration, chart, the chart's Pods on a real node).
	export KUBEBUILDER_ASSETS="$$(hack/testbin.sh --path)" $(GOTEST_ENV); \
	go -C test test -p $(TEST_P) -count=1 -timeout 30m ./... & tests=$$!; \
	go test -p $(TEST_P) -count=1 -timeout 30m ./...; rc=$$?; \
	wait $$tests && exit $$rc

.PHONY: soak
soak: testbin ## Run the chaos soak of test/soak: SEED (default: random, printed) and DURATION (default 60m) give the schedule.
	@seed="$(SEED)"; [ -n "$$seed" ] || seed=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' '); \
	echo "soak: SEED=$$seed DURATION=$(or $(DURATION),60m) (replay: make soak SEED=$$seed DURATION=$(or $(DURATION),60m))"; \
	KUBEBUILDER_ASSETS="$$(hack/testbin.sh --path)" $(GOTEST_ENV) SOAK_SEED=$$seed SOAK_DURATION=$(or $(DURATION),60m) \
		go -C test test -count=1 -timeout 0 -run '^TestSoak$$' -v ./soak/

.PHONY: generate
generate: ## Write what the chart takes from the code: values.schema.json's config part, binary-flags.yaml (test/chartgen).
	go -C test run ./chartgen -root $(CURDIR)

.PHONY: fmt
fmt: ## gofmt every Go file.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet on both modules, compiling as make test does.
	$(GOTEST_ENV) go vet ./...
	$(GOTEST_ENV) go -C test vet ./...

# LINT_DIR caches the pinned golangci-lint, built once per version from the Go module proxy (2 to
# 3 minutes cold), beside hack/testbin.sh's binaries: a fresh checkout, CI's included, reuses it.
LINT_DIR    := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/xenorchestra-ccm/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Phony, so that a version bump relinks bin/golangci-lint; with the cache filled it only relinks.
# Named both ways, so that `make bin/golangci-lint` works too.
.PHONY: $(BIN)/golangci-lint bin/golangci-lint
$(BIN)/golangci-lint bin/golangci-lint:
	@test -x $(LINT_DIR)/golangci-lint || GOBIN=$(LINT_DIR) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mkdir -p $(BIN) && ln -sf $(LINT_DIR)/golangci-lint $(BIN)/golangci-lint

# lint compiles as make vet and make test do, so that after make vet it reuses their compiled
# packages (52 s and 48 s for the two modules, against 4 minutes with its own flags, cold).
# --allow-serial-runners: on a shared machine a second run waits for the first instead of failing.
.PHONY: lint
lint: $(BIN)/golangci-lint ## Run the pinned golangci-lint on both modules (built once into ~/.cache).
	$(GOTEST_ENV) $(BIN)/golangci-lint run --allow-serial-runners ./...
	cd test && $(GOTEST_ENV) $(BIN)/golangci-lint run --allow-serial-runners ./...

.PHONY: demo
demo: ## Run the whole controller on a local control plane and the XO simulator, and show what it does.
	@hack/testbin.sh --demo >/dev/null
	@$(BIN)/demo

.PHONY: run-xosim
run-xosim: ## Serve hack/demo-inventory.yaml with the XO simulator on loopback.
	go run ./cmd/xosim --inventory hack/demo-inventory.yaml

CHART := charts/xenorchestra-cloud-controller-manager

.PHONY: manifests
manifests: ## Render docs/deploy/cloud-controller-manager.yml (kubectl manifests) from the chart.
	hack/render-manifests.sh

.PHONY: helm-lint
helm-lint: testbin ## helm lint --strict the chart with its default values and every ci/*.yaml.
	@helm="$$(hack/testbin.sh --path)/helm"; \
	$$helm lint --strict $(CHART) && \
	for f in $(CHART)/ci/*.yaml; do $$helm lint --strict $(CHART) -f $$f || exit 1; done

# HELM is the helm binary of chart-package: the pinned one of hack/testbin.sh (`make testbin`).
HELM ?= $(shell hack/testbin.sh --path)/helm
# DIST is where chart-package writes the archive.
DIST ?= $(CURDIR)/dist

.PHONY: chart-package
chart-package: ## Package the chart into $(DIST) for `helm push` to an OCI registry (optional CHART_VERSION, APP_VERSION).
	@test -x "$(HELM)" || { echo "no helm at $(HELM): run make testbin, or pass HELM=<path>" >&2; exit 1; }
	"$(HELM)" package $(CHART) --destination "$(DIST)" \
		$(if $(CHART_VERSION),--version $(CHART_VERSION)) $(if $(APP_VERSION),--app-version $(APP_VERSION))

.PHONY: docker-build
docker-build: ## Build the image $(IMAGE) (same build steps as `make build`).
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

# SOURCE is the checkout make release builds (default this one; an earlier commit extracted with
# `git archive` builds an earlier release), CHANGELOG the file its notes come from.
SOURCE    ?= $(CURDIR)
CHANGELOG ?= $(SOURCE)/CHANGELOG.md

.PHONY: release
release: ## Build release VERSION=vX.Y.Z into $(DIST): binary, image (OCI layout), chart pinned to the image's digest, manifests, SBOM, SHA256SUMS, notes from CHANGELOG.md.
	@tools="$$(hack/testbin.sh helm cyclonedx-gomod)" && \
	go -C test run ./release -version "$(VERSION)" -dist "$(abspath $(DIST))" -source "$(abspath $(SOURCE))" \
		-changelog "$(abspath $(CHANGELOG))" -render-manifests "$(CURDIR)/hack/render-manifests.sh" \
		-helm "$$tools/helm" -cyclonedx-gomod "$$tools/cyclonedx-gomod"

# IMAGE_TAR is where `make image` writes the image, in `docker save` format: `ctr images import`
# and `docker load` read it.
IMAGE_TAR ?= $(DIST)/image.tar

# image builds the binary with the build recipe itself, the one the Dockerfile mirrors, so that
# the build command stays in one place (test/dockerfile checks both).
.PHONY: image
image: build ## Build the image $(IMAGE) into $(IMAGE_TAR) without Docker (go-containerregistry, test/image).
	go -C test run ./image -binary $(BIN)/$(BINARY) -version $(VERSION) -tag $(IMAGE) -o $(abspath $(IMAGE_TAR))

# RACE_PKGS are the packages whose code runs concurrently: the XO client, inventory and simulator,
# the controllers' workers, the webhook and certificate rotation, the command.
RACE_PKGS   := ./xo/... ./controllers/... ./webhook/... ./cmd/app
# RACE_FLAGS: the race build shares no compiled package with any other, so it is compiled without
# DWARF (a race report's stacks do not need it; it is a sixth of the compile time: 237 s against
# 200 s for controller-runtime's client and client-go's clientset, cold, on 2 cores), and without
# go test's vet, which make vet and make test have run on the same code.
RACE_FLAGS  := -vet=off -gcflags=all=-dwarf=false -ldflags=-w

# K8S_OLDEST is the oldest supported Kubernetes minor's newest patch on the Go module proxy
# (README, "Supported Kubernetes versions"; `go list -m -versions k8s.io/kubernetes`). make test
# runs against the newest, hack/testbin.sh's default.
K8S_OLDEST  ?= 1.34.4
# OLDEST_PKGS are the controller module's packages make test-oldest runs: those that talk to a
# real API server (the webhook through the admission chain, the controllers, the command and its
# check and explain subcommands); the test module's end-to-end tier (test/e2e) runs beside them.
OLDEST_PKGS := ./webhook/... ./controllers/... ./cmd/app ./cmd/app/diagnose

.PHONY: test-oldest
test-oldest: ## The webhook, controller, command (check and explain included) and end-to-end tests against the oldest supported Kubernetes (K8S_OLDEST; hack/testbin.sh builds its kube-apiserver and etcd once).
	export KUBEBUILDER_ASSETS="$$(K8S_VERSION=$(K8S_OLDEST) hack/testbin.sh etcd kube-apiserver helm prometheus)" $(GOTEST_ENV); \
	go -C test test -p $(TEST_P) -count=1 -timeout 30m ./e2e & e2e=$$!; \
	go test -p $(TEST_P) -count=1 -timeout 30m $(OLDEST_PKGS); rc=$$?; \
	wait $$e2e && exit $$rc

.PHONY: test-race
test-race: testbin ## The concurrent packages' tests under the race detector (XO client, inventory, simulator, controllers, webhook, command).
	KUBEBUILDER_ASSETS="$$(hack/testbin.sh --path)" go test -race $(RACE_FLAGS) -count=1 -timeout 30m $(RACE_PKGS)

.PHONY: fuzz
fuzz: ## Run every fuzz target FUZZTIME (default 20000x) each; crashers land in testdata/fuzz.
	hack/fuzz.sh

.PHONY: bench
bench: ## Run every benchmark and write BENCHMARKS.md (QUICK=1: 60 s churn run, fewer samples).
	hack/bench.sh $(if $(QUICK),--quick)
