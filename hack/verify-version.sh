#!/usr/bin/env bash
# Fails unless the VERSION file (the release the binaries are stamped with, hack/ldflags.sh) is a
# semantic version without a leading v, and charts/lockwarden/Chart.yaml's appVersion (the image
# tag the chart deploys by default) equals it. hack/verify.sh runs it on this repository; an
# argument names another root (its test runs it on copies).
set -euo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
chart=charts/lockwarden/Chart.yaml

version=$(<"$root/VERSION")
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'
if [[ ! "$version" =~ $semver ]]; then
  echo "verify: VERSION holds \"$version\", not a semantic version such as 0.1.0 (no leading v, one line)" >&2
  exit 1
fi
app=$(sed -n -E 's/^appVersion:[[:space:]]*"?([^"[:space:]]*)"?[[:space:]]*$/\1/p' "$root/$chart")
if [[ "$app" != "$version" ]]; then
  echo "verify: $chart has appVersion \"$app\" but VERSION holds \"$version\": the chart would deploy another release's image than the binaries report; set both to the release being made" >&2
  exit 1
fi
