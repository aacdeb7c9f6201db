#!/usr/bin/env bash
# Builds the files of a lockwarden release into OUT (make release: dist/), to upload to the
# release's download URL (the GitHub release vVERSION):
#   install.yaml                          all that `kubectl apply -f` needs on a fresh cluster: the
#                                         Namespace, the CRDs, RBAC, the manager Deployment, its
#                                         Service and PodDisruptionBudget; image IMG_REPO:VERSION
#   lockwarden-CHARTVERSION.tgz           the Helm chart (helm package), appVersion VERSION
#   kubectl-lock_vVERSION_OS_ARCH.tar.gz  the kubectl plugin's krew archives, and lock.yaml, its
#                                         filled-in krew manifest (hack/krew/release.sh)
#   SHA256SUMS                            the sums of all the above (check: sha256sum -c SHA256SUMS)
# It builds no image: make release runs make docker-buildx for that when RELEASE_IMAGE=1.
#
# Usage: hack/release.sh OUT
#   OUT is written only when everything was built, and replaces a previous run's output; a
#   directory that holds anything else is refused.
# Environment (make release passes its variables):
#   VERSION        the release, a semantic version without a leading v (default: the VERSION file)
#   IMG_REPO       the image repository (default ghcr.io/lockwarden/lockwarden); the chart's
#                  image.repository must be the same, so that the chart and install.yaml deploy
#                  the same image (checked)
#   URL_BASE       where the files are downloaded from, for lock.yaml (default
#                  https://github.com/lockwarden/lockwarden/releases/download/vVERSION)
#   KUBECTL, HELM  the tools (default: those hack/k8s-binaries.sh builds into the cache)
#   KREW_PLATFORMS for tests: the krew platforms to build (hack/krew/release.sh); make release
#                  clears it, so that a release has the archives of every platform
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if [[ $# -ne 1 || -z $1 ]]; then
  echo "usage: $0 OUT (make release writes dist/)" >&2
  exit 2
fi
out=$(realpath -m "$1")
version=${VERSION:-$(<VERSION)}
if [[ ! $version =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]]; then
  echo "release: VERSION \"$version\" is not a semantic version such as 0.1.0 (no leading v)" >&2
  exit 2
fi
repo=${IMG_REPO:-ghcr.io/lockwarden/lockwarden}
image=$repo:$version
url_base=${URL_BASE:-https://github.com/lockwarden/lockwarden/releases/download/v$version}
if [[ -d $out && -n "$(ls -A "$out")" && ! -f $out/SHA256SUMS ]]; then
  echo "release: $out holds files that no release build wrote (no SHA256SUMS); give an empty or new directory" >&2
  exit 2
fi
if [[ -n "$(git status --porcelain 2>/dev/null)" ]]; then
  echo "release: warning: the tree has uncommitted changes, so the binaries are stamped with a -dirty commit; release from a clean checkout of the tag" >&2
fi
kubectl=${KUBECTL:-$(hack/k8s-binaries.sh bin-dir)/kubectl}
helm=${HELM:-$(hack/k8s-binaries.sh helm-bin)}

staging=$(mktemp -d) && chmod 755 "$staging" # mktemp makes it private; the release is not
trap 'rm -rf "$staging"' EXIT

# images FILE: the distinct container images the manifests in FILE run.
images() { sed -n -E 's/^[[:space:]-]*image:[[:space:]]*"?([^"[:space:]]+)"?[[:space:]]*$/\1/p' "$1" | sort -u; }

# install.yaml is config/default built by kustomize, not the chart rendered by `helm template`:
# helm template renders no Namespace (Helm creates the release's) and labels every object as
# managed by a Helm release that does not exist, while config/default is what make deploy applies
# and what the kubebuilder scaffold's build-installer uses, and kustomize orders its output for
# kubectl apply: the Namespace, then the CRDs, then RBAC and the workload. charts/chart_test.go
# keeps the two equivalent. An overlay outside the tree pins the image, as kustomize edit would
# (kustomize takes relative paths only).
mkdir "$staging/overlay"
cat >"$staging/overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$staging/overlay" config/default)
images:
- name: ghcr.io/lockwarden/lockwarden
  newName: $repo
  newTag: "$version"
EOF
{
  echo "# lockwarden $version: the CRDs, RBAC and controller (hack/release.sh, from config/default)."
  echo "# kubectl apply -f install.yaml"
  "$kubectl" kustomize "$staging/overlay"
} >"$staging/install.yaml"
rm -rf "$staging/overlay"
if [[ "$(images "$staging/install.yaml")" != "$image" ]]; then
  echo "release: install.yaml runs $(images "$staging/install.yaml" | paste -sd' '), not only $image: the overlay no longer matches config/manager's image name" >&2
  exit 1
fi
echo "release: install.yaml (image $image)" >&2

# --app-version makes the chart deploy this release's image when VERSION is overridden (a
# pre-release); otherwise it is the appVersion already in Chart.yaml (make verify checks).
"$helm" package charts/lockwarden --app-version "$version" --destination "$staging" >/dev/null
chart=$(cd "$staging" && echo lockwarden-*.tgz)
"$helm" template lockwarden "$staging/$chart" --namespace lockwarden-system >"$staging/chart.yaml"
chart_images=$(images "$staging/chart.yaml")
rm "$staging/chart.yaml"
if [[ "$chart_images" != "$image" ]]; then
  echo "release: the chart runs $chart_images by default, install.yaml $image: set IMG_REPO to the chart's image.repository, or change both" >&2
  exit 1
fi
echo "release: $chart (chart $(sed -n 's/^version: *//p' charts/lockwarden/Chart.yaml), appVersion $version)" >&2

hack/krew/release.sh "v$version" "$url_base" "$staging/krew"
mv "$staging"/krew/* "$staging"/ && rmdir "$staging/krew"

sums=$(cd "$staging" && sha256sum -- *)
printf '%s\n' "$sums" >"$staging/SHA256SUMS"

rm -rf "$out" && mkdir -p "$(dirname "$out")" && mv "$staging" "$out"
trap - EXIT
echo "release: wrote $out for $url_base:" >&2
(cd "$out" && ls -l) >&2
