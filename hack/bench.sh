#!/usr/bin/env bash
# Runs the lock-engine benchmark (test/bench) on its own local containerless cluster and stops the
# cluster afterwards. Extra arguments go to the benchmark, e.g. hack/bench.sh -qps 20 -burst 30.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CLUSTER_NAME=lockwarden-bench
trap 'hack/local-cluster.sh down' EXIT
KUBECONFIG=$(hack/local-cluster.sh up)
export KUBECONFIG
hack/local-cluster.sh crds
ETCD_BINARY="$(hack/k8s-binaries.sh bin-dir)/etcd" go run ./test/bench "$@"
