#!/usr/bin/env bash
# Starts and stops the local containerless cluster: the real kube-apiserver, controller-manager,
# scheduler and etcd built by hack/k8s-binaries.sh, run as plain processes by kwokctl's binary
# runtime, with fake nodes on which kwok marks pods Running. No container ever runs.
#
# Usage: hack/local-cluster.sh up|down|kubeconfig|status
#   up          start the cluster (reusing it if it already runs) and print the kubeconfig path
#   down        stop the cluster and delete its state
#   kubeconfig  print the kubeconfig path
#   crds        install the lockwarden CRDs (and the controller's namespace) into the running cluster
#
# Environment: CLUSTER_NAME (default lockwarden), NODES (fake nodes, default 3; each takes 110 pods),
# KWOKCTL_CONFIG (optional: a KwokctlConfiguration file passed to kwokctl create cluster --config,
# e.g. componentsPatches that raise the controller-manager's and scheduler's client QPS).
#
# Every component listens on 127.0.0.1 alone (test/localcluster checks it).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE="${LOCKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockwarden}"
CLUSTER_NAME="${CLUSTER_NAME:-lockwarden}"
NODES="${NODES:-3}"
export KWOK_WORKDIR="${KWOK_WORKDIR:-$CACHE/kwok-workdir}"
kubeconfig="$KWOK_WORKDIR/clusters/$CLUSTER_NAME/kubeconfig.yaml"

log() { echo "local-cluster: $*" >&2; }

bin=$("$here/k8s-binaries.sh" bin-dir)
export PATH="$bin:$PATH"

running() {
  [[ -f "$kubeconfig" ]] && kubectl --kubeconfig "$kubeconfig" --request-timeout=3s get --raw /readyz >/dev/null 2>&1
}

up() {
  if running; then
    log "cluster $CLUSTER_NAME already running"
  else
    local started=$SECONDS
    # A cluster left over from a killed session has state but no processes: start afresh.
    kwokctl delete cluster --name "$CLUSTER_NAME" >/dev/null 2>&1 || true
    mkdir -p "$KWOK_WORKDIR"
    local log="$KWOK_WORKDIR/$CLUSTER_NAME-create.log"
    local config=()
    [[ -z "${KWOKCTL_CONFIG:-}" ]] || config=(--config "$KWOKCTL_CONFIG")
    # Bind every component to 127.0.0.1. kwokctl binds 0.0.0.0 by default, and its etcd serves
    # plain HTTP without credentials: anyone who could reach this machine while the cluster runs
    # could read and write the whole cluster through it, Secrets included. A demo, test or
    # benchmark cluster serves this machine alone. etcd's client and peer URLs and the other
    # components' bind addresses all follow bindAddress. kwokctl merges its --config files in
    # order, a later one winning: this one comes last so that KWOKCTL_CONFIG cannot undo it.
    local loopback="$KWOK_WORKDIR/$CLUSTER_NAME-loopback.yaml"
    cat >"$loopback" <<'YAML'
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
YAML
    config+=(--config "$loopback")
    # --kubeconfig points at a throwaway file so that the user's ~/.kube/config is never touched;
    # the cluster's own kubeconfig is the one we print.
    kwokctl create cluster --name "$CLUSTER_NAME" --runtime binary "${config[@]}" \
      --kubeconfig "$KWOK_WORKDIR/merged-kubeconfig.yaml" \
      --etcd-binary "$bin/etcd" \
      --kube-apiserver-binary "$bin/kube-apiserver" \
      --kube-controller-manager-binary "$bin/kube-controller-manager" \
      --kube-scheduler-binary "$bin/kube-scheduler" \
      --kwok-controller-binary "$bin/kwok" \
      --wait 2m >"$log" 2>&1 &&
      kwokctl scale node --name "$CLUSTER_NAME" --replicas "$NODES" >>"$log" 2>&1 ||
      { log "starting cluster $CLUSTER_NAME failed; kwokctl said:"; cat "$log" >&2; exit 1; }
    log "cluster $CLUSTER_NAME up with $NODES nodes in $((SECONDS - started)) s"
  fi
  echo "$kubeconfig"
}

down() {
  kwokctl delete cluster --name "$CLUSTER_NAME" >/dev/null 2>&1 || true
  log "cluster $CLUSTER_NAME stopped"
}

crds() {
  local root k
  root=$(cd "$here/.." && pwd)
  k=(kubectl --kubeconfig "$kubeconfig")
  "${k[@]}" apply --server-side -k "$root/config/crd" >/dev/null
  "${k[@]}" wait --for=condition=Established --timeout=60s \
    crd/lockbackends.locks.lockwarden.io crd/distributedlocks.locks.lockwarden.io crd/lockclaims.locks.lockwarden.io >/dev/null
  "${k[@]}" create namespace lockwarden-system --dry-run=client -o yaml | "${k[@]}" apply -f - >/dev/null
  log "lockwarden CRDs installed in cluster $CLUSTER_NAME"
}

case "${1:-}" in
  up) up ;;
  crds) crds ;;
  down) down ;;
  kubeconfig) echo "$kubeconfig" ;;
  status) if running; then echo running; else echo stopped; exit 1; fi ;;
  *) echo "usage: $0 up|down|kubeconfig|crds|status" >&2; exit 2 ;;
esac
