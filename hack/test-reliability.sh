#!/usr/bin/env bash
# Runs the reliability harness (test/reliability, issue #9): a real kube-apiserver and etcd
# (envtest), the manager as separate processes behind TCP fault proxies, a real redis-server and a
# real etcd (each behind a fault proxy), claimants writing to a fenced resource under faults, a
# sampler comparing Held claims with the backends, and the checkers.
#
# Usage: hack/test-reliability.sh [smoke|full|mutants|soak] [test binary flags...]
#   smoke (default)  a handful of short scenarios and two mutants (a few minutes on 2 cores), for
#                    make test
#   full             every fault on every backend, and writes the results table into
#                    docs/reliability.md
#   mutants          every deliberate bug of internal/mutant, each in the short run that must
#                    catch it; fails unless each is caught by its checker, and writes the
#                    mutant → checker → seed table into docs/reliability.md
#   soak             the full matrix again and again, each time with a new seed, until SEEDS runs
#                    (default 20) have passed or SOAK_FOR (e.g. 8h; default none) has gone by;
#                    stops at the first failing scenario and prints the command that replays it.
#                    Writes no doc; one full matrix takes about 100 minutes on 2 cores.
# Environment: SEED replays a run (the seed is printed at the start and in the table);
#              SCENARIO runs only the scenarios matching a regexp, e.g. 'redis/leader-kill'.
#              Extra arguments go to the test binary: `full -doc=` runs without rewriting the doc.
set -euo pipefail
cd "$(dirname "$0")/.."

set_name=${1:-smoke}
shift || true
case "$set_name" in
  soak)
    seeds=${SEEDS:-20}
    budget=0
    if [[ -n ${SOAK_FOR:-} ]]; then
      budget=$(go run ./hack/duration "$SOAK_FOR") || exit 2
    fi
    start=$SECONDS
    for ((i = 1; i <= seeds; i++)); do
      seed=$(( (RANDOM * 32768 + RANDOM) % 999999 + 1 ))
      echo "soak: run $i of $seeds, seed $seed, $(( (SECONDS - start) / 60 )) min so far"
      if ! SEED=$seed "$0" full -doc= -stop-on-failure "$@"; then
        echo "soak: seed $seed failed after $((i - 1)) clean runs; replay the matrix with: SEED=$seed make test-reliability" \
          "(or one scenario: SEED=$seed SCENARIO='<backend/name from the failure above>' hack/test-reliability.sh full -doc=)" >&2
        exit 1
      fi
      if (( budget > 0 && SECONDS - start >= budget )); then
        echo "soak: SOAK_FOR=$SOAK_FOR reached after $i clean runs"
        exit 0
      fi
    done
    echo "soak: $seeds clean runs in $(( (SECONDS - start) / 60 )) min"
    exit 0 ;;
  smoke) timeout=15m; doc=() ;;
  mutants) timeout=25m; doc=(-doc "$PWD/docs/reliability.md") ;;
  full) timeout=150m; doc=(-doc "$PWD/docs/reliability.md") ;;
  *) echo "usage: $0 [smoke|full|mutants|soak]" >&2; exit 2 ;;
esac

KUBEBUILDER_ASSETS="$(hack/k8s-binaries.sh envtest-dir)"
export KUBEBUILDER_ASSETS

# The smoke set runs in SMOKE_SHARDS processes at once (default 2), each with its own control
# plane, managers and backend servers: its scenarios mostly wait out workloads and faults, so two
# at a time fit the two cores CI has and halve the wall time. They share one seed, from which each
# scenario's own derives by its place in the whole set, so a failure replays as usual (SEED=...
# SCENARIO=... hack/test-reliability.sh smoke, in one process).
shards=${SMOKE_SHARDS:-2}
if [[ $set_name == smoke && $shards -gt 1 && -z ${SCENARIO:-} ]]; then
  seed=${SEED:-$(( (RANDOM * 32768 + RANDOM) % 999999 + 1 ))}
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  go test -c -tags reliability -o "$dir/reliability.test" ./test/reliability/
  echo "smoke: $shards shards at once, seed $seed (replay one scenario with SEED=$seed SCENARIO='<backend/name>' $0 smoke)"
  pids=()
  for ((i = 0; i < shards; i++)); do
    (cd test/reliability && exec "$dir/reliability.test" -test.count=1 -test.timeout "$timeout" -test.v -test.run TestReliability \
      -set smoke -seed "$seed" -shard "$i/$shards" "$@") >"$dir/shard-$i.log" 2>&1 &
    pids+=($!)
  done
  failed=0
  for ((i = 0; i < shards; i++)); do
    status=ok
    wait "${pids[$i]}" || { status=FAIL; failed=1; }
    echo "=== smoke shard $i of $shards: $status"
    cat "$dir/shard-$i.log"
  done
  exit $failed
fi

exec go test -tags reliability -count=1 -timeout "$timeout" -v -run TestReliability ./test/reliability/ \
  -args -set "$set_name" -seed "${SEED:-0}" -scenario "${SCENARIO:-}" "${doc[@]}" "$@"
