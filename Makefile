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
IMG ?= ghcr.io/lockwarden/lockwarden:latest
CONTAINER_TOOL ?= docker
GO_TEST_FLAGS ?= -count=1 -timeout 20m

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
manifests: ## Generate the CRDs and RBAC from the Go types and markers, and the chart's copies of them and values table.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases
	go run ./hack/chartgen

.PHONY: generate
generate: ## Generate the DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet, including the build-tagged e2e suite, benchmark and reliability harness.
	go vet ./...
	go vet -tags e2e ./test/e2e/...
	go vet -tags bench ./test/bench/...
	go vet -tags reliability ./test/reliability/...
	go vet -tags testclock ./cmd/manager/...
	go vet -tags mutants,failpoints ./internal/... ./cmd/manager/...

.PHONY: verify
verify: ## Regenerate everything and fail if the tree changed (generated files, gofmt, go.mod).
	hack/verify.sh

.PHONY: helm-lint
helm-lint: ## Lint the Helm chart (strict) with the helm built into the cache.
	"$$(hack/k8s-binaries.sh helm-bin)" lint --strict charts/lockwarden

.PHONY: test
test: verify vet helm-lint test-unit test-e2e test-reliability-smoke ## Run every suite: verification, unit and envtest suites, e2e on the local cluster, the reliability smoke set.

.PHONY: test-unit
test-unit: ## Unit tests and envtest suites (real kube-apiserver and etcd; test/apiclock runs the clocked test build of kube-apiserver).
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh envtest-dir)" LOCKWARDEN_CLOCKED_APISERVER="$$(hack/k8s-binaries.sh clocked-apiserver)" \
		go test $(GO_TEST_FLAGS) ./...
	go test $(GO_TEST_FLAGS) -tags testclock -run TestManagerClock ./cmd/manager/

.PHONY: test-e2e
test-e2e: ## The e2e suite on the local cluster (or on KUBECONFIG_E2E's cluster when set).
	hack/test-e2e.sh

.PHONY: bench
bench: ## Benchmark grant and handoff latency and hot-lock throughput on a local cluster (prints figures).
	hack/bench.sh $(BENCH_ARGS)

.PHONY: bench-scale
bench-scale: ## Measure the manager at size on a local cluster of 100 kwok nodes: 1,000 locks, 10,000 pods, churn, failover, 100,000 claims (prints figures; BENCH_SCALE_ARGS="-locks 20 -pods-per-lock 5 ..." for a small run; see docs/scale.md).
	hack/bench-scale.sh $(BENCH_SCALE_ARGS)

.PHONY: test-reliability-smoke
test-reliability-smoke: ## The reliability harness's short smoke set (faults, fenced resource, checkers; a few minutes).
	hack/test-reliability.sh smoke

.PHONY: test-reliability
test-reliability: ## The reliability harness's full matrix (every fault on every backend, under an hour); writes the results table into docs/reliability.md.
	hack/test-reliability.sh full

.PHONY: test-reliability-mutants
test-reliability-mutants: ## Run every deliberately broken manager through the harness; fails unless each is caught (table in docs/reliability.md).
	hack/test-reliability.sh mutants

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
krew: ## Build the kubectl-lock archives of release VERSION and fill in its krew manifest, for URL_BASE: bin/krew/.
	hack/krew/release.sh "$(VERSION)" "$(URL_BASE)"

.PHONY: run
run: ## Run the manager against the cluster in KUBECONFIG.
	go run -ldflags "$(LDFLAGS)" ./cmd/manager

.PHONY: docker-build
docker-build: ## Build the image (needs a Docker engine), its binaries stamped with VERSION and the git commit.
	$(CONTAINER_TOOL) build $$(VERSION='$(VERSION)' hack/ldflags.sh --build-args) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the image.
	$(CONTAINER_TOOL) push $(IMG)

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
