#!/usr/bin/env bash
# Runs the benchmark (test/bench, a Go test behind the bench build tag so that it can start the
# same real servers as the backend suites) on its own local containerless cluster and stops the
# cluster afterwards. Extra arguments go to the benchmark, e.g. hack/bench.sh -qps 20 -burst 30
# or hack/bench.sh -backends kubernetes,pods. A run with the default settings (no arguments)
# writes its results table into the README's bench block; a run with arguments only prints it.
# BENCH_TEST names another benchmark of the package to run instead (make bench-fairness).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CLUSTER_NAME=lockwarden-bench
trap 'hack/local-cluster.sh down' EXIT
KUBECONFIG=$(hack/local-cluster.sh up)
export KUBECONFIG
hack/local-cluster.sh crds
args=("$@")
[[ $# -gt 0 ]] || args=(-readme="$PWD/README.md")
ETCD_BINARY="$(hack/k8s-binaries.sh bin-dir)/etcd" \
  go test -tags bench -count=1 -timeout 60m -run "^${BENCH_TEST:-TestBench}\$" ./test/bench -v -args "${args[@]}"
