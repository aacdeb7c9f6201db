# lockwarden: a Kubernetes operator that gives pods distributed locks as Kubernetes objects.
# `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# Built binaries (Kubernetes, etcd, kwok) live outside the repository so that clones share them.
export LOCKWARDEN_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/lockwarden
CONTROLLER_GEN := go tool controller-gen
# The release the binaries are stamped with (internal/version): the VERSION file, which the chart's
# appVersion must match (make verify checks). Override for a pre-release: make build VERSION=0.2.0-rc.1.
VERSION ?= $(shell cat VERSION)
# -ldflags that stamp VERSION, the git commit and the build time into a binary (hack/ldflags.sh).
LDFLAGS = $(shell VERSION='$(VERSION)' hack/ldflags.sh)
# The image repository; the chart's image.repository (hack/release.sh checks that they agree).
IMG_REPO ?= ghcr.io/lockwarden/lockwarden
IMG ?= $(IMG_REPO):latest
CONTAINER_TOOL ?= docker
# The platforms of the multi-arch image (make docker-buildx), and the buildx builder that builds it.
PLATFORMS ?= linux/amd64,linux/arm64
BUILDX_BUILDER ?= lockwarden
# The release's git tag, and where its files are downloaded from (the GitHub release).
RELEASE_TAG = v$(VERSION:v%=%)
URL_BASE ?= https://github.com/lockwarden/lockwarden/releases/download/$(RELEASE_TAG)
# make release builds and pushes the image only when RELEASE_IMAGE=1.
RELEASE_IMAGE ?= 0
GO_TEST_FLAGS ?= -count=1 -timeout 20m
# The oldest Kubernetes release lockwarden supports, which make test-compat proves: 1.32 is the
# first whose CRD validation has CEL's format library and whose field selectors serve the CRDs'
# selectable fields (lockctl status). The README and the chart's kubeVersion state the same floor.
COMPAT_K8S_VERSION ?= v1.32.13

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Quick start

.PHONY: demo
demo: ## Start the local cluster, run the manager, apply the samples and show them.
	hack/demo.sh

.PHONY: run-local
run-local: ## Start the local cluster, install the CRDs and run the manager against it.
	hack/run-local.sh

##@ Development

.PHONY: manifests
manifests: ## Generate the CRDs and RBAC from the Go types and markers; the chart's copies of them; its values schema, README and values table from values.yaml.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases
	go run ./hack/chartgen

.PHONY: generate
generate: ## Generate the DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
# The build tags of the test-only files (e2e suite, local cluster check, benchmarks, reliability
# harness, the manager's test clock, deliberate bugs and pause points): they compile together, so
# one pass over ./... with all of them type-checks and vets every tagged file, and a second pass
# without tags covers the files that those tags leave out (//go:build !mutants and the like).
VET_TAGS := e2e,localcluster,bench,reliability,testclock,mutants,failpoints
vet: ## Run go vet, without build tags and with every build tag (the e2e suite, local cluster check, benchmark and reliability harness, test builds), and lockctl for darwin (a krew platform).
	go vet ./...
	go vet -tags $(VET_TAGS) ./...
	# lockctl is released for darwin too (hack/krew/lock.yaml), which make test builds no binary
	# for (test/release links the host's alone): type-check it there, test files included.
	GOOS=darwin GOARCH=arm64 go vet ./cmd/lockctl/...

# The tags of the second lint pass: those that only add files. .golangci.yml's first pass adds
# mutants, failpoints and testclock too, which drop the production builds of the files they replace.
LINT_TAGS_ADDING ?= e2e,localcluster,bench,reliability

.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml: staticcheck, unused, revive, govet, errcheck, ineffassign) over every package, tests and build-tagged files included; builds it into the cache if missing.
	lint="$$(hack/k8s-binaries.sh golangci-lint-bin)"; failed=0; \
	"$$lint" run ./... || failed=1; \
	"$$lint" run --build-tags $(LINT_TAGS_ADDING) ./... || failed=1; \
	exit $$failed

.PHONY: verify
verify: ## Regenerate everything and fail if the tree changed (generated files, gofmt, go.mod); run make lint.
	hack/verify.sh

.PHONY: helm-lint
helm-lint: ## Lint the Helm chart (strict) with the helm built into the cache.
	"$$(hack/k8s-binaries.sh helm-bin)" lint --strict charts/lockwarden

.PHONY: test
test: verify vet helm-lint test-unit test-compat-api test-local-cluster test-e2e test-reliability-smoke ## Run every suite: verification, unit and envtest suites, the API suite on the oldest supported release, the local cluster's loopback check, e2e on the local cluster, the reliability smoke set.

# The packages whose tests take longest, which go test starts first: it runs test binaries in the
# order the packages are given, -p (the CPU count) at a time, so a long one started last would
# run alone at the end. Measured with go test -json (Elapsed per package); order is all this sets.
UNIT_SLOW_FIRST ?= test/release internal/backends/sql cmd/manager internal/backends/zookeeper pkg/lockclient internal/backends/etcd cmd/lockctl internal/backends/redlock charts internal/backends/redis
# The controller suite (Ginkgo, envtest) waits on leases, probes and Consistently far more than it
# computes (about 80 s of CPU in 440 s): ginkgo runs its specs in CONTROLLER_PROCS processes, each
# with a control plane and managers of its own, beside go test's other packages.
CONTROLLER_PKG := internal/controller
CONTROLLER_PROCS ?= 3
CONTROLLER_FLAGS ?= --timeout=20m --no-color

.PHONY: test-unit
test-unit: ## Unit tests and envtest suites (real kube-apiserver and etcd; test/apiclock runs the clocked test build of kube-apiserver); the slowest packages start first, the controller suite in CONTROLLER_PROCS processes beside them.
	pkgs=$$(hack/slow-first.sh $(UNIT_SLOW_FIRST) | grep -vx "$$(go list -m)/$(CONTROLLER_PKG)"); \
	export KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh envtest-dir)" LOCKWARDEN_CLOCKED_APISERVER="$$(hack/k8s-binaries.sh clocked-apiserver)"; \
	log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	go tool ginkgo --procs=$(CONTROLLER_PROCS) $(CONTROLLER_FLAGS) ./$(CONTROLLER_PKG) >"$$log" 2>&1 & ctrl=$$!; \
	failed=0; go test $(GO_TEST_FLAGS) $$pkgs || failed=1; \
	wait $$ctrl && echo "ok   $(CONTROLLER_PKG) (ginkgo --procs=$(CONTROLLER_PROCS))" || { cat "$$log"; echo "FAIL $(CONTROLLER_PKG) (ginkgo --procs=$(CONTROLLER_PROCS))"; failed=1; }; \
	[[ $$failed -eq 0 ]]
	go test $(GO_TEST_FLAGS) -tags testclock -run TestManagerClock ./cmd/manager/

.PHONY: test-compat
test-compat: ## The API validation and controller suites on the oldest supported kube-apiserver (COMPAT_K8S_VERSION, built from the module proxy).
	$(MAKE) --no-print-directory test-compat-api COMPAT_PACKAGES="./api/... ./internal/controller/..."

# The API validation suite alone on the oldest supported kube-apiserver: a few seconds, so make test
# runs it and a CRD rule that the oldest release cannot run fails at once.
COMPAT_PACKAGES ?= ./api/...
.PHONY: test-compat-api
test-compat-api: ## The API validation suite on the oldest supported kube-apiserver (part of make test).
	KUBEBUILDER_ASSETS="$$(K8S_VERSION=$(COMPAT_K8S_VERSION) hack/k8s-binaries.sh apiserver-dir)" \
	LOCKWARDEN_EXPECT_SERVER_VERSION=$(COMPAT_K8S_VERSION) \
		go test $(GO_TEST_FLAGS) $(COMPAT_PACKAGES)

.PHONY: compat-apiserver
compat-apiserver: ## Build the oldest supported kube-apiserver (COMPAT_K8S_VERSION) and print its KUBEBUILDER_ASSETS directory.
	K8S_VERSION=$(COMPAT_K8S_VERSION) hack/k8s-binaries.sh apiserver-dir

.PHONY: test-local-cluster
test-local-cluster: ## Start the local cluster (as make demo, test-e2e and bench do) and fail if any of its processes listens outside loopback.
	go test -tags localcluster $(GO_TEST_FLAGS) -v ./test/localcluster/

.PHONY: test-e2e
test-e2e: ## The e2e suite on the local cluster (or on KUBECONFIG_E2E's cluster when set).
	hack/test-e2e.sh

.PHONY: bench
bench: ## Benchmark grant and handoff latency and hot-lock throughput on a local cluster (prints figures).
	hack/bench.sh $(BENCH_ARGS)

.PHONY: bench-fairness
bench-fairness: ## A quiet namespace's grants, idle and beside a noisy one of 10,000 claims in churn, with a first-come-first-served work queue and with namespaces taking turns (prints figures; writes the table in docs/scale.md).
	BENCH_TEST=TestFairness hack/bench.sh -fair-doc="$$PWD/docs/scale.md" $(BENCH_ARGS)

.PHONY: bench-scale
bench-scale: ## Measure the manager at size on a local cluster of 100 kwok nodes: 1,000 locks, 10,000 pods, churn, failover, 100,000 claims (prints figures; BENCH_SCALE_ARGS="-locks 20 -pods-per-lock 5 ..." for a small run; see docs/scale.md).
	hack/bench-scale.sh $(BENCH_SCALE_ARGS)

.PHONY: test-reliability-smoke
test-reliability-smoke: ## The reliability harness's short smoke set (faults, fenced resource, checkers), in SMOKE_SHARDS processes at once (default 2; about 6 minutes).
	hack/test-reliability.sh smoke

.PHONY: test-reliability
test-reliability: ## The reliability harness's full matrix (every fault on every backend, shared locks on each; about 100 minutes); writes the results table into docs/reliability.md.
	hack/test-reliability.sh full

.PHONY: test-reliability-mutants
test-reliability-mutants: ## Run every deliberately broken manager through the harness; fails unless each is caught (table in docs/reliability.md).
	hack/test-reliability.sh mutants

.PHONY: test-reliability-soak
test-reliability-soak: ## The full matrix over many seeds (SEEDS=20, or SOAK_FOR=8h), stopping at the first failure and printing its replay command (about 100 minutes a seed).
	SEEDS=$(SEEDS) SOAK_FOR=$(SOAK_FOR) hack/test-reliability.sh soak

##@ Local Kubernetes (no Docker: real control plane binaries, kwok nodes)

.PHONY: k8s-binaries
k8s-binaries: ## Build kube-apiserver, controller-manager, scheduler, kubectl, etcd and kwok into the cache.
	hack/k8s-binaries.sh all

.PHONY: envtest
envtest: ## Print the envtest asset directory (KUBEBUILDER_ASSETS), building it if needed.
	@hack/k8s-binaries.sh envtest-dir

.PHONY: cluster
cluster: ## Start the local cluster and print its kubeconfig path.
	@hack/local-cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster.
	hack/local-cluster.sh down

##@ Build

.PHONY: build
build: kubectl-plugin ## Build the manager, lockctl and the kubectl plugin kubectl-lock into bin/, stamped with VERSION and the git commit.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/manager ./cmd/manager

.PHONY: kubectl-plugin
kubectl-plugin: ## Build bin/lockctl and its copy bin/kubectl-lock, the kubectl plugin `kubectl lock` (put it on PATH).
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/lockctl ./cmd/lockctl
	cp bin/lockctl bin/kubectl-lock

.PHONY: krew
krew: ## Build the kubectl-lock archives of release VERSION and fill in its krew manifest for URL_BASE (the GitHub release): bin/krew/.
	hack/krew/release.sh "$(RELEASE_TAG)" "$(URL_BASE)"

.PHONY: run
run: ## Run the manager against the cluster in KUBECONFIG.
	go run -ldflags "$(LDFLAGS)" ./cmd/manager

.PHONY: docker-build
docker-build: ## Build the image (needs a Docker engine), its binaries stamped with VERSION and the git commit.
	$(CONTAINER_TOOL) build $$(VERSION='$(VERSION)' hack/ldflags.sh --build-args) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the image.
	$(CONTAINER_TOOL) push $(IMG)

# Docker's default builder cannot build an image for several platforms; a docker-container builder
# can, and is kept for its cache. The Dockerfile cross-compiles, so no emulation (QEMU) is needed.
.PHONY: docker-buildx
docker-buildx: ## Build the image for PLATFORMS and push it as IMG, with docker buildx (needs Docker), stamped like docker-build.
	$(CONTAINER_TOOL) buildx inspect $(BUILDX_BUILDER) >/dev/null 2>&1 \
	  || $(CONTAINER_TOOL) buildx create --name $(BUILDX_BUILDER) --driver docker-container >/dev/null
	$(CONTAINER_TOOL) buildx build --builder $(BUILDX_BUILDER) --platform $(PLATFORMS) \
	  $$(VERSION='$(VERSION)' hack/ldflags.sh --build-args) -t $(IMG) --push .

##@ Release (docs/releasing.md)

.PHONY: release
release: ## Build release VERSION into dist/: install.yaml, the chart package, the krew archives, SHA256SUMS; with RELEASE_IMAGE=1 also push the image IMG_REPO:VERSION for PLATFORMS.
	VERSION='$(VERSION)' IMG_REPO='$(IMG_REPO)' URL_BASE='$(URL_BASE)' KREW_PLATFORMS= hack/release.sh dist
ifeq ($(RELEASE_IMAGE),1)
	$(MAKE) --no-print-directory docker-buildx IMG='$(IMG_REPO):$(VERSION)'
else
	@echo "release: skipped the image $(IMG_REPO):$(VERSION): RELEASE_IMAGE=1 make release builds it for $(PLATFORMS) with docker buildx and pushes it"
endif

##@ Deployment

.PHONY: install
install: ## Install the CRDs into the cluster in KUBECONFIG.
	"$$(hack/k8s-binaries.sh bin-dir)/kubectl" apply --server-side -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRDs (and with them every lock object) from the cluster in KUBECONFIG.
	"$$(hack/k8s-binaries.sh bin-dir)/kubectl" delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: ## Deploy the controller with kustomize to the cluster in KUBECONFIG, with the image IMG.
	"$$(hack/k8s-binaries.sh bin-dir)/kubectl" kustomize config/default \
	  | sed 's|image: ghcr.io/lockwarden/lockwarden:latest|image: $(IMG)|' \
	  | "$$(hack/k8s-binaries.sh bin-dir)/kubectl" apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove the controller deployed with make deploy.
	"$$(hack/k8s-binaries.sh bin-dir)/kubectl" delete --ignore-not-found -k config/default
