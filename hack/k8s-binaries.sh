#!/usr/bin/env bash
# Builds the real Kubernetes control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl), etcd, kwok/kwokctl, helm and golangci-lint from the Go module proxy into a cache outside
# the repository, keyed by version. Idempotent (a finished build is never redone) and safe to run
# concurrently (one flock per component; binaries are moved into place only when complete).
#
# Usage: hack/k8s-binaries.sh [all|k8s|etcd|kwok|helm|helm-bin|golangci-lint|golangci-lint-bin|envtest-dir|bin-dir|clocked-apiserver|apiserver-dir]
#   all (default)      build whatever is missing (not golangci-lint, which no cluster needs)
#   helm-bin           build only helm and print its path (for helm lint, which needs no cluster)
#   golangci-lint-bin  build only golangci-lint and print its path (for make lint; a few minutes cold)
#   envtest-dir        build what envtest needs and print the KUBEBUILDER_ASSETS directory
#   bin-dir            build everything and print the directory holding all binaries
#   clocked-apiserver  build the test-only kube-apiserver whose object timestamps a test can step
#                      (hack/apiserver-clock; about 15 minutes cold) and print its path
#   apiserver-dir      build kube-apiserver alone at K8S_VERSION, and etcd, and print a directory
#                      usable as KUBEBUILDER_ASSETS (make test-compat: K8S_VERSION=<oldest supported>)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
GOLANGCI_LINT_VERSION="${GOLANGCI_LINT_VERSION:-v2.15.0}"
CACHE="${LOCKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockwarden}"

k8s_dir="$CACHE/kubernetes-$K8S_VERSION"
etcd_dir="$CACHE/etcd-$ETCD_VERSION"
kwok_dir="$CACHE/kwok-$KWOK_VERSION"
# "-caps": built with the Kubernetes release that helm template assumes (see build_helm).
helm_dir="$CACHE/helm-$HELM_VERSION-caps"
# "-go1.26.8": golangci-lint must be built by a Go at least as new as the code it checks.
golangci_lint_dir="$CACHE/golangci-lint-$GOLANGCI_LINT_VERSION-$(go env GOVERSION)"
apiserver_dir="$CACHE/kube-apiserver-$K8S_VERSION"
apiserver_assets_dir="$CACHE/assets-kube-apiserver-$K8S_VERSION-etcd-$ETCD_VERSION"
clocked_dir="$CACHE/kube-apiserver-clocked-$K8S_VERSION-$(sha256sum "$(dirname "${BASH_SOURCE[0]}")/apiserver-clock/clock_offset.go.txt" | cut -c1-12)"
bin_dir="$CACHE/bin-k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-helm-$HELM_VERSION-caps"

log() { echo "k8s-binaries: $*" >&2; }

# with_lock DIR CMD...: runs CMD while holding DIR's lock, unless DIR/.done already exists.
with_lock() {
  local dir=$1; shift
  [[ -f "$dir/.done" ]] && return 0
  mkdir -p "$CACHE"
  exec {lockfd}>"$dir.lock"
  flock "$lockfd"
  if [[ ! -f "$dir/.done" ]]; then
    "$@"
  fi
  flock -u "$lockfd"
  exec {lockfd}>&-
}

# scratch_module DIR: an empty throwaway module in which `go build` of another module's
# commands is allowed to honour our replace directives.
scratch_module() {
  local dir=$1
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && go mod init lockwarden.local/buildtools >/dev/null 2>&1)
}

# k8s_module DIR PKG...: a scratch module in DIR requiring the Kubernetes commands PKG... at
# K8S_VERSION. k8s.io/kubernetes replaces every staging module with a local path; a module that
# requires it must point those at the published staging versions instead.
k8s_module() {
  local dir=$1; shift
  scratch_module "$dir/src"
  local staging_version="v0.${K8S_VERSION#v1.}" mod staging m
  mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging=$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$mod")
  (
    cd "$dir/src"
    for m in $staging; do
      go mod edit -replace "$m=$m@$staging_version"
    done
    go get "${@/%/@$K8S_VERSION}" 2>"$dir/go-get.log" || { cat "$dir/go-get.log" >&2; exit 1; }
  )
}

# k8s_ldflags: the version stamps of an upstream release build.
k8s_ldflags() {
  local minor=${K8S_VERSION#v1.} x="" pkg
  minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    x+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "-s -w$x"
}

build_k8s() {
  local started=$SECONDS work="$k8s_dir.tmp" c pkgs=()
  log "building Kubernetes $K8S_VERSION (about 15 minutes on 2 cores when cold)"
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  k8s_module "$work" "${pkgs[@]}"
  mkdir -p "$work/out"
  (cd "$work/src" && CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags)" -o "$work/out/" "${pkgs[@]}")
  rm -rf "$k8s_dir" && mv "$work/out" "$k8s_dir" && rm -rf "$work"
  touch "$k8s_dir/.done"
  log "Kubernetes $K8S_VERSION built in $((SECONDS - started)) s"
}

# build_clocked_apiserver: kube-apiserver with hack/apiserver-clock/clock_offset.go.txt added to
# k8s.io/apiserver/pkg/registry/rest. A build overlay cannot touch the module cache, so the build
# uses a scratch copy of that module (outside the repository, deleted afterwards) with the file
# added; nothing of upstream's is edited.
build_clocked_apiserver() {
  local started=$SECONDS work="$clocked_dir.tmp" here src
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  log "building the clocked kube-apiserver $K8S_VERSION (test only; about 2 minutes after the Kubernetes build, 15 when cold)"
  k8s_module "$work" k8s.io/kubernetes/cmd/kube-apiserver
  src=$(cd "$work/src" && go list -m -f '{{.Dir}}' k8s.io/apiserver)
  cp -r "$src" "$work/apiserver" && chmod -R u+w "$work/apiserver"
  cp "$here/apiserver-clock/clock_offset.go.txt" "$work/apiserver/pkg/registry/rest/zz_lockwarden_clock_offset.go"
  mkdir -p "$work/out"
  (
    cd "$work/src"
    go mod edit -replace "k8s.io/apiserver=../apiserver"
    CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags)" -o "$work/out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  )
  rm -rf "$clocked_dir" && mv "$work/out" "$clocked_dir" && rm -rf "$work"
  touch "$clocked_dir/.done"
  log "clocked kube-apiserver built in $((SECONDS - started)) s"
}

# build_apiserver: kube-apiserver alone, for the compatibility suites on an older release, which
# need neither the other control-plane commands nor kubectl.
build_apiserver() {
  local started=$SECONDS work="$apiserver_dir.tmp"
  log "building kube-apiserver $K8S_VERSION (about 10 minutes on 2 cores when cold)"
  k8s_module "$work" k8s.io/kubernetes/cmd/kube-apiserver
  mkdir -p "$work/out"
  (cd "$work/src" && CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags)" -o "$work/out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  rm -rf "$apiserver_dir" && mv "$work/out" "$apiserver_dir" && rm -rf "$work"
  touch "$apiserver_dir/.done"
  log "kube-apiserver $K8S_VERSION built in $((SECONDS - started)) s"
}

link_apiserver_assets() {
  mkdir -p "$apiserver_assets_dir.tmp"
  ln -sf "$apiserver_dir/kube-apiserver" "$apiserver_assets_dir.tmp/kube-apiserver"
  ln -sf "$etcd_dir/etcd" "$apiserver_assets_dir.tmp/etcd"
  rm -rf "$apiserver_assets_dir" && mv "$apiserver_assets_dir.tmp" "$apiserver_assets_dir"
  touch "$apiserver_assets_dir/.done"
}

build_etcd() {
  local started=$SECONDS work="$etcd_dir.tmp"
  log "building etcd $ETCD_VERSION"
  scratch_module "$work/src"
  (
    cd "$work/src"
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" 2>"$work/go-get.log" || { cat "$work/go-get.log" >&2; exit 1; }
    mkdir -p "$work/out"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" go.etcd.io/etcd/server/v3
  )
  rm -rf "$etcd_dir" && mv "$work/out" "$etcd_dir" && rm -rf "$work"
  touch "$etcd_dir/.done"
  log "etcd $ETCD_VERSION built in $((SECONDS - started)) s"
}

build_kwok() {
  local started=$SECONDS work="$kwok_dir.tmp"
  log "building kwok $KWOK_VERSION"
  rm -rf "$work" && mkdir -p "$work/out"
  CGO_ENABLED=0 GOBIN="$work/out" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
  rm -rf "$kwok_dir" && mv "$work/out" "$kwok_dir" && rm -rf "$work"
  touch "$kwok_dir/.done"
  log "kwok $KWOK_VERSION built in $((SECONDS - started)) s"
}

build_helm() {
  local started=$SECONDS work="$helm_dir.tmp"
  log "building helm $HELM_VERSION"
  rm -rf "$work" && mkdir -p "$work/out"
  # The versions are stamped as Helm's own release build does: its own, so that `helm version`
  # reports it, and the Kubernetes release of its client-go, which `helm template` and `helm lint`
  # assume when no cluster is asked (unstamped, they assume 1.20 and refuse any chart whose
  # kubeVersion is newer).
  local mod minor caps=""
  mod=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  minor=$(sed -n 's#^\s*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$mod")
  [[ -n "$minor" ]] || { log "cannot read the client-go release of helm $HELM_VERSION"; exit 1; }
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    caps+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
  done
  CGO_ENABLED=0 GOBIN="$work/out" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION$caps" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  rm -rf "$helm_dir" && mv "$work/out" "$helm_dir" && rm -rf "$work"
  touch "$helm_dir/.done"
  log "helm $HELM_VERSION built in $((SECONDS - started)) s"
}

build_golangci_lint() {
  local started=$SECONDS work="$golangci_lint_dir.tmp"
  log "building golangci-lint $GOLANGCI_LINT_VERSION (a few minutes on 2 cores when cold)"
  rm -rf "$work" && mkdir -p "$work/out"
  CGO_ENABLED=0 GOBIN="$work/out" go install -trimpath -ldflags "-s -w" \
    "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
  rm -rf "$golangci_lint_dir" && mv "$work/out" "$golangci_lint_dir" && rm -rf "$work"
  touch "$golangci_lint_dir/.done"
  log "golangci-lint $GOLANGCI_LINT_VERSION built in $((SECONDS - started)) s"
}

# link_bin_dir: one directory with every binary, usable as KUBEBUILDER_ASSETS and on PATH.
link_bin_dir() {
  mkdir -p "$bin_dir.tmp"
  local f
  for f in "$k8s_dir"/* "$etcd_dir"/* "$kwok_dir"/* "$helm_dir"/*; do
    ln -sf "$f" "$bin_dir.tmp/$(basename "$f")"
  done
  rm -rf "$bin_dir" && mv "$bin_dir.tmp" "$bin_dir"
  touch "$bin_dir/.done"
}

build_all() {
  with_lock "$etcd_dir" build_etcd
  with_lock "$kwok_dir" build_kwok
  with_lock "$k8s_dir" build_k8s
  with_lock "$helm_dir" build_helm
  with_lock "$bin_dir" link_bin_dir
}

case "${1:-all}" in
  all) build_all ;;
  k8s) with_lock "$k8s_dir" build_k8s ;;
  etcd) with_lock "$etcd_dir" build_etcd ;;
  kwok) with_lock "$kwok_dir" build_kwok ;;
  helm) with_lock "$helm_dir" build_helm ;;
  helm-bin) with_lock "$helm_dir" build_helm; echo "$helm_dir/helm" ;;
  golangci-lint) with_lock "$golangci_lint_dir" build_golangci_lint ;;
  golangci-lint-bin) with_lock "$golangci_lint_dir" build_golangci_lint; echo "$golangci_lint_dir/golangci-lint" ;;
  envtest-dir | bin-dir) build_all; echo "$bin_dir" ;;
  clocked-apiserver) with_lock "$clocked_dir" build_clocked_apiserver; echo "$clocked_dir/kube-apiserver" ;;
  apiserver-dir)
    with_lock "$etcd_dir" build_etcd
    with_lock "$apiserver_dir" build_apiserver
    with_lock "$apiserver_assets_dir" link_apiserver_assets
    echo "$apiserver_assets_dir"
    ;;
  *) echo "usage: $0 [all|k8s|etcd|kwok|helm|helm-bin|golangci-lint|golangci-lint-bin|envtest-dir|bin-dir|clocked-apiserver|apiserver-dir]" >&2; exit 2 ;;
esac
