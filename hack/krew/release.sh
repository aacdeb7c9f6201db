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
# Environment:
#   KREW_PLATFORMS  builds only these platforms of hack/krew/lock.yaml (space-separated os/arch,
#                   e.g. linux/amd64), and the manifest then lists only those. For tests
#                   (test/release builds the host's alone: each platform is a full link of
#                   lockctl); make release clears it, so a release always has every platform.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if [[ $# -lt 2 || $# -gt 3 || ! $1 =~ ^v[0-9]+\.[0-9]+\.[0-9]+ || -z $2 ]]; then
  echo "usage: $0 VERSION URL_BASE [OUT] (e.g. $0 v0.3.0 https://example.com/releases/v0.3.0)" >&2
  exit 2
fi
version=$1 url_base=${2%/}
out=${3:-bin/krew}
# The platforms are the template's, so that a release builds every platform the manifest offers.
mapfile -t offered < <(awk '$1 == "os:" { os = $2 } $1 == "arch:" { print os "/" $2 }' hack/krew/lock.yaml)
platforms=("${offered[@]}")
if [[ -n ${KREW_PLATFORMS:-} ]]; then
  read -r -a platforms <<<"$KREW_PLATFORMS"
  for platform in "${platforms[@]}"; do
    if [[ " ${offered[*]} " != *" $platform "* ]]; then
      echo "krew: KREW_PLATFORMS: $platform is not a platform of hack/krew/lock.yaml (${offered[*]})" >&2
      exit 2
    fi
  done
  echo "krew: building only ${platforms[*]} (KREW_PLATFORMS); the manifest lists only those" >&2
fi

rm -rf "$out" && mkdir -p "$out"
# The template without its comment, and without the entries of platforms not built: an entry is
# a "  - selector:" item of spec.platforms and the more indented lines under it.
manifest=$(sed '/^#/d' hack/krew/lock.yaml | awk -v keep="${platforms[*]}" '
  function flush() { if (entry != "" && want[os "/" arch]) printf "%s", entry; entry = "" }
  BEGIN { n = split(keep, k, " "); for (i = 1; i <= n; i++) want[k[i]] = 1 }
  /^  - selector:/ { flush(); os = arch = ""; entry = $0 "\n"; next }
  entry != "" && /^ {0,3}[^ ]/ { flush() }
  entry != "" { entry = entry $0 "\n"; if ($1 == "os:") os = $2; if ($1 == "arch:") arch = $2; next }
  { print }
  END { flush() }')
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
