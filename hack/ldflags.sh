#!/usr/bin/env bash
# Prints the go build -ldflags that stamp a build with its version (internal/version): the one
# place that knows the -X names. make build and run, the Dockerfile and the hack scripts use it:
#
#   go build -ldflags "$(hack/ldflags.sh)" ./cmd/manager
#
# Each value comes from the environment when set there, else:
#   VERSION     the VERSION file at the repository root: the release, which the chart's appVersion
#               matches (hack/verify-version.sh checks)
#   GIT_COMMIT  git rev-parse HEAD, with -dirty when the tree has uncommitted changes; nothing
#               without git (a Docker build: the binary then reports what Go recorded, or unknown)
#   BUILD_DATE  now, or SOURCE_DATE_EPOCH when set (reproducible builds), UTC, RFC 3339
#
# With --build-args it prints the same values as docker build --build-arg flags instead, for a
# build whose context has no git history.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

version=${VERSION:-$(<"$root/VERSION")}
commit=${GIT_COMMIT:-}
if [[ -z "$commit" ]] && commit=$(git -C "$root" rev-parse HEAD 2>/dev/null); then
  if [[ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]]; then commit+=-dirty; fi
fi
date=${BUILD_DATE:-$(date -u ${SOURCE_DATE_EPOCH:+-d "@$SOURCE_DATE_EPOCH"} +%Y-%m-%dT%H:%M:%SZ)}

for value in "$version" "$commit" "$date"; do
  if [[ "$value" =~ [[:space:]\'\"] ]]; then
    echo "hack/ldflags.sh: $value: a stamped value may not contain spaces or quotes" >&2
    exit 1
  fi
done

if [[ "${1:-}" == --build-args ]]; then
  echo "--build-arg VERSION=$version --build-arg GIT_COMMIT=$commit --build-arg BUILD_DATE=$date"
  exit 0
fi
pkg=github.com/lockwarden/lockwarden/internal/version
flags="-X $pkg.version=$version"
if [[ -n "$commit" ]]; then flags+=" -X $pkg.commit=$commit"; fi
echo "$flags -X $pkg.date=$date"
