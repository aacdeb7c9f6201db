#!/usr/bin/env bash
# Runs the scale benchmark (test/bench/scale, issue #17) on its own local cluster with NODES kwok
# nodes (default 100), and stops the cluster afterwards. The manager is built from this tree,
# stamped as make build stamps it, and run by the benchmark as two processes with leader
# election, so that the heap and RSS on their /metrics are the manager's own. Arguments go to the
# benchmark, e.g.:
#
#   hack/bench-scale.sh -locks 20 -pods-per-lock 5 -detached-rows 20x10 -detached-claims 1000
#   hack/bench-scale.sh -write-doc        # the full run; writes its table into docs/scale.md
#
# The kube-controller-manager and kube-scheduler get a client QPS of 1000 (kwokctl
# componentsPatches): at their defaults (20 and 50) they, not lockwarden, would set the pace at
# which Deployments make pods and gated pods get scheduled. The API server keeps its priority and
# fairness, which is what limits the manager (docs/design.md §3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CLUSTER_NAME="${CLUSTER_NAME:-lockwarden-scale}"
export NODES="${NODES:-100}"
work=$(mktemp -d "${TMPDIR:-/tmp}/lockwarden-bench-scale.XXXXXX")
# The benchmark stops the managers it starts by their PIDs (and the kernel kills them if it dies:
# they run with a parent-death signal); this stops the cluster and removes the built binaries,
# keeping the managers' logs.
trap 'hack/local-cluster.sh down; rm -f "$work/manager" "$work/bench-scale"; echo "bench-scale: logs in $work" >&2' EXIT

cat >"$work/kwokctl.yaml" <<'YAML'
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - key: kube-api-qps
    value: "1000"
  - key: kube-api-burst
    value: "2000"
- name: kube-scheduler
  extraArgs:
  - key: kube-api-qps
    value: "1000"
  - key: kube-api-burst
    value: "2000"
YAML
KUBECONFIG=$(KWOKCTL_CONFIG="$work/kwokctl.yaml" hack/local-cluster.sh up)
export KUBECONFIG
hack/local-cluster.sh crds

echo "bench-scale: building the manager and the benchmark into $work" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "$(hack/ldflags.sh)" -o "$work/manager" ./cmd/manager
go build -o "$work/bench-scale" ./test/bench/scale
"$work/bench-scale" -manager "$work/manager" -workdir "$work" -cluster-dir "$(dirname "$KUBECONFIG")" "$@"
