#!/usr/bin/env bash
# Runs the e2e suite (test/e2e). Without KUBECONFIG_E2E it starts a local containerless cluster of
# its own (named lockwarden-e2e or $E2E_CLUSTER_NAME, so that a cluster from `make cluster` is left alone) and stops it
# afterwards; with KUBECONFIG_E2E it runs against that cluster (kind, or any other).
#
# With KIND_CLUSTER set (and Docker and kind installed) it runs on that kind cluster instead: it
# builds the image (IMG, default lockwarden:e2e), loads it into the cluster, and the chart specs
# install the chart with it, so the controller pods really run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin=$(hack/k8s-binaries.sh bin-dir)
export PATH="$bin:$PATH" # the kubectl matching the control plane, and helm

if [[ -n "${KIND_CLUSTER:-}" ]]; then
  export E2E_IMAGE=${IMG:-lockwarden:e2e}
  make --no-print-directory docker-build IMG="$E2E_IMAGE"
  kind load docker-image "$E2E_IMAGE" --name "$KIND_CLUSTER"
  KUBECONFIG=$(mktemp)
  trap 'rm -f "$KUBECONFIG"' EXIT
  kind get kubeconfig --name "$KIND_CLUSTER" >"$KUBECONFIG"
  # A kind cluster's nodes are containers the suite does not fail: the node-loss spec is skipped.
  export KUBECONFIG KIND_CLUSTER E2E_NODE_FAILURE=none
elif [[ -n "${KUBECONFIG_E2E:-}" ]]; then
  export KUBECONFIG="$KUBECONFIG_E2E" E2E_NODE_FAILURE=none
else
  export CLUSTER_NAME=${E2E_CLUSTER_NAME:-lockwarden-e2e}
  trap 'hack/local-cluster.sh down' EXIT
  # Nodes that can be failed on purpose (hack/kwokctl-e2e.yaml): E2E_NODE_FAILURE tells the suite
  # how. A cluster already running under this name is reused as it is: down it first to change it.
  KUBECONFIG=$(KWOKCTL_CONFIG=hack/kwokctl-e2e.yaml hack/local-cluster.sh up)
  export KUBECONFIG E2E_NODE_FAILURE=kwok-label
fi

go test -tags e2e -count=1 -timeout 20m -v ./test/e2e/ -ginkgo.v -ginkgo.no-color ${E2E_ARGS:-}
