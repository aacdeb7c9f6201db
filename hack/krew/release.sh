#!/usr/bin/env bash
# Builds the krew archives of kubectl-lock (lockctl as the kubectl plugin `kubectl lock`) for a
# release, one per platform of hack/krew/lock.yaml, and writes that manifest with the version, the
# archives' URIs and their sha256 sums filled in:
#   OUT/kubectl-lock_VERSION_OS_ARCH.tar.gz and OUT/lock.yaml
# The archives are reproducible (sorted, no timestamps or owners), so a rebuild of the same commit
# gives the same sums. Upload the archives to URL_BASE, then submit lock.yaml to a krew index (or
# install from it: kubectl krew install --manifest=bin/krew/lock.yaml). make krew runs it for the
# release in VERSION; make release (hack/release.sh) too, into dist/.
#
# Usage: hack/krew/release.sh VERSION URL_BASE [OUT]
#   VERSION   the release, a semantic version with a leading v (v0.3.0), as krew wants it; the
#             binaries are stamped without the v, as make build stamps them (lockctl version: 0.3.0)
#   URL_BASE  where the archives are downloaded from, e.g.
#             https://github.com/lockwarden/lockwarden/releases/download/v0.3.0
#   OUT       the directory to write, replaced if it exists; relative to the repository root
#             (default bin/krew)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if [[ $# -lt 2 || $# -gt 3 || ! $1 =~ ^v[0-9]+\.[0-9]+\.[0-9]+ || -z $2 ]]; then
  echo "usage: $0 VERSION URL_BASE [OUT] (e.g. $0 v0.3.0 https://example.com/releases/v0.3.0)" >&2
  exit 2
fi
version=$1 url_base=${2%/}
out=${3:-bin/krew}
platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)

rm -rf "$out" && mkdir -p "$out"
manifest=$(sed '/^#/d' hack/krew/lock.yaml) # without the template's comment
manifest=${manifest//'${VERSION}'/$version}
for platform in "${platforms[@]}"; do
  os=${platform%/*} arch=${platform#*/}
  key=$(tr '[:lower:]' '[:upper:]' <<<"${os}_${arch}")
  archive="kubectl-lock_${version}_${os}_${arch}.tar.gz"
  staging="$out/$os-$arch"
  mkdir -p "$staging"
  echo "krew: building $archive" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w $(VERSION="${version#v}" SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-0}" hack/ldflags.sh)" -o "$staging/kubectl-lock" ./cmd/lockctl
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$staging" -cf - kubectl-lock \
    | gzip -n >"$out/$archive"
  rm -rf "$staging"
  sum=$(sha256sum "$out/$archive" | cut -d' ' -f1)
  manifest=${manifest//"\${URI_$key}"/"$url_base/$archive"}
  manifest=${manifest//"\${SHA256_$key}"/$sum}
done

if grep -q '\${' <<<"$manifest"; then
  echo "krew: placeholders left in the manifest (a platform of hack/krew/lock.yaml is not built here):" >&2
  grep -n '\${' <<<"$manifest" >&2
  exit 1
fi
printf '%s\n' "$manifest" >"$out/lock.yaml"
echo "krew: wrote $out/lock.yaml and ${#platforms[@]} archives" >&2
