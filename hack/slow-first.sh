#!/usr/bin/env bash
# Prints the module's packages (go list ./...) for go test, the given directories first, in the
# order given, then the rest in go list's order. make test-unit uses it to start its slowest
# packages first. A directory that is not a package of the module is an error, so that a renamed
# package cannot drop out of the list unnoticed.
#
# Usage: hack/slow-first.sh [DIR...]   (directories relative to the repository root)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

module=$(go list -m)
mapfile -t all < <(go list ./...)
declare -A first=()
order=()
for dir in "$@"; do
  pkg="$module/${dir%/}"
  if [[ " ${all[*]} " != *" $pkg "* ]]; then
    echo "slow-first: $dir is not a package of $module (go list ./...)" >&2
    exit 1
  fi
  first[$pkg]=1
  order+=("$pkg")
done
for pkg in "${all[@]}"; do
  [[ -n ${first[$pkg]:-} ]] || order+=("$pkg")
done
printf '%s\n' "${order[@]}"
