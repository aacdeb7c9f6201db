#!/usr/bin/env bash
# Starts the local containerless cluster, installs the CRDs and runs the manager against it in the
# foreground. Stop it with Ctrl-C; the cluster keeps running until `make cluster-down`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin=$(hack/k8s-binaries.sh bin-dir)
kubeconfig=$(hack/local-cluster.sh up)
export KUBECONFIG="$kubeconfig"
hack/local-cluster.sh crds

cat <<MSG

The local cluster is up and the lockwarden CRDs are installed. In another shell:

  export KUBECONFIG=$kubeconfig PATH=$bin:\$PATH
  kubectl apply -f config/samples/
  kubectl get locks -A
  curl -s http://127.0.0.1:8080/metrics | grep ^lockwarden_

Metrics are served over plain HTTP on loopback here (--metrics-secure=false); in a cluster they
are HTTPS for tokens bound to the metrics-reader ClusterRole (docs/metrics.md).

Starting the manager (Ctrl-C stops it; make cluster-down stops the cluster).

MSG
exec go run -ldflags "$(hack/ldflags.sh)" ./cmd/manager --kubeconfig "$kubeconfig" --secret-namespace lockwarden-system \
  --metrics-bind-address 127.0.0.1:8080 --metrics-secure=false --health-probe-bind-address 127.0.0.1:8081
