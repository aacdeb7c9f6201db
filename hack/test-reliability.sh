#!/usr/bin/env bash
# Runs the reliability harness (test/reliability, issue #9): a real kube-apiserver and etcd
# (envtest), the manager as separate processes behind TCP fault proxies, a real redis-server and a
# real etcd (each behind a fault proxy), claimants writing to a fenced resource under faults, a
# sampler comparing Held claims with the backends, and the checkers.
#
# Usage: hack/test-reliability.sh [smoke|full|mutants] [test binary flags...]
#   smoke (default)  a handful of short scenarios and two mutants (a few minutes on 2 cores), for
#                    make test
#   full             every fault on every backend, and writes the results table into
#                    docs/reliability.md
#   mutants          every deliberate bug of internal/mutant, each in the short run that must
#                    catch it; fails unless each is caught by its checker, and writes the
#                    mutant → checker → seed table into docs/reliability.md
# Environment: SEED replays a run (the seed is printed at the start and in the table);
#              SCENARIO runs only the scenarios matching a regexp, e.g. 'redis/leader-kill'.
#              Extra arguments go to the test binary: `full -doc=` runs without rewriting the doc.
set -euo pipefail
cd "$(dirname "$0")/.."

set_name=${1:-smoke}
shift || true
case "$set_name" in
  smoke) timeout=15m; doc=() ;;
  mutants) timeout=25m; doc=(-doc "$PWD/docs/reliability.md") ;;
  full) timeout=100m; doc=(-doc "$PWD/docs/reliability.md") ;;
  *) echo "usage: $0 [smoke|full|mutants]" >&2; exit 2 ;;
esac

KUBEBUILDER_ASSETS="$(hack/k8s-binaries.sh envtest-dir)"
export KUBEBUILDER_ASSETS
exec go test -tags reliability -count=1 -timeout "$timeout" -v -run TestReliability ./test/reliability/ \
  -args -set "$set_name" -seed "${SEED:-0}" -scenario "${SCENARIO:-}" "${doc[@]}" "$@"
