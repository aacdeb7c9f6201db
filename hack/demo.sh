#!/usr/bin/env bash
# A self-contained tour on the local containerless cluster: start it, install the CRDs, run the
# manager, apply the samples, show them and a refused object, then stop everything it started.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin=$(hack/k8s-binaries.sh bin-dir)
export PATH="$bin:$PATH" CLUSTER_NAME=lockwarden-demo
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

say "Starting a local cluster: real kube-apiserver, scheduler and controller-manager, kwok nodes"
KUBECONFIG=$(hack/local-cluster.sh up)
export KUBECONFIG
manager_pid=""
cleanup() {
  if [[ -n "$manager_pid" ]]; then kill "$manager_pid" 2>/dev/null && wait "$manager_pid" 2>/dev/null || true; fi
  hack/local-cluster.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT
run kubectl get nodes

say "Installing the lockwarden CRDs"
kubectl apply --server-side -k config/crd
kubectl wait --for=condition=Established --timeout=60s crd --all >/dev/null

say "Starting the manager"
log=$(mktemp -t lockwarden-demo-manager.XXXXXX.log)
go build -o "$(dirname "$log")/lockwarden-demo-manager" ./cmd/manager
"$(dirname "$log")/lockwarden-demo-manager" --kubeconfig "$KUBECONFIG" --secret-namespace default \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 >"$log" 2>&1 &
manager_pid=$!
sleep 2
kill -0 "$manager_pid" || { cat "$log"; exit 1; }
echo "manager running (pid $manager_pid, log $log)"

say "Applying the samples: a LockBackend, a DistributedLock and a LockClaim"
run kubectl apply -f config/samples/
run kubectl get locks -A

say "A Redlock backend with two nodes is refused by the API server"
printf '%s\n' 'apiVersion: locks.lockwarden.io/v1alpha1' 'kind: LockBackend' 'metadata: {name: bad}' \
  'spec: {type: Redlock, redlock: {addresses: ["r0:6379", "r1:6379"]}}' |
  { kubectl apply -f - 2>&1 || true; }

say "Done; stopping the manager and the cluster"
