#!/usr/bin/env bash
# The main job on the local containerless cluster: start it, install the CRDs, run the manager,
# then let a Deployment's pods take turns holding one lock (hack/demo). Stops everything it started.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin=$(hack/k8s-binaries.sh bin-dir)
export PATH="$bin:$PATH" CLUSTER_NAME=lockwarden-demo
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "Starting a local cluster: real kube-apiserver, scheduler and controller-manager; kwok fake nodes"
KUBECONFIG=$(hack/local-cluster.sh up)
export KUBECONFIG
manager_pid=""
workdir=$(mktemp -d -t lockwarden-demo.XXXXXX)
cleanup() {
  if [[ -n "$manager_pid" ]]; then kill "$manager_pid" 2>/dev/null && wait "$manager_pid" 2>/dev/null || true; fi
  hack/local-cluster.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT
kubectl get nodes

say "Installing the lockwarden CRDs and starting the manager (log: $workdir/manager.log)"
hack/local-cluster.sh crds
go build -ldflags "$(hack/ldflags.sh)" -o "$workdir/manager" ./cmd/manager
go build -o "$workdir/demo" ./hack/demo
"$workdir/manager" --kubeconfig "$KUBECONFIG" --secret-namespace lockwarden-system \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 >"$workdir/manager.log" 2>&1 &
manager_pid=$!
sleep 1
kill -0 "$manager_pid" || { cat "$workdir/manager.log"; exit 1; }

"$workdir/demo"

say "Done; stopping the manager and the cluster"
