#!/usr/bin/env bash
# Regenerates every generated file and fails if that changed the tree, so that hand edits to
# generated files and forgotten `make manifests generate` runs never land: that includes what
# hack/chartgen writes, the Helm chart's copies of the CRDs and RBAC rules, and, from the comments in
# charts/lockwarden/values.yaml, the chart's values.schema.json and README.md and the values table in
# docs/install.md.
# Also checks gofmt, go.mod/go.sum tidiness, that the chart's appVersion is the release in
# VERSION (hack/verify-version.sh), and runs make lint (golangci-lint, .golangci.yml; built into the
# cache outside the repository the first time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

generated=(api config/crd config/rbac charts/lockwarden docs/install.md)
fingerprint() { find "${generated[@]}" -type f -print0 | sort -z | xargs -0 sha256sum; }

before=$(fingerprint)
make --no-print-directory manifests generate >/dev/null
after=$(fingerprint)
failed=0
if [[ "$before" != "$after" ]]; then
  echo "verify: generated files were out of date (now regenerated; review and commit them; the chart's" >&2
  echo "  values.schema.json and README.md and the docs/install.md table come from values.yaml's comments):" >&2
  diff <(echo "$before") <(echo "$after") | sed -n 's/^> [0-9a-f]*  /  /p' >&2
  failed=1
fi

unformatted=$(gofmt -l $(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "verify: gofmt would change (run make fmt):" >&2
  echo "$unformatted" | sed 's/^/  /' >&2
  failed=1
fi

if ! go mod tidy -diff >/dev/null 2>&1; then
  echo "verify: go.mod/go.sum are not tidy (run go mod tidy):" >&2
  go mod tidy -diff >&2 || true
  failed=1
fi

if ! hack/verify-version.sh; then
  failed=1
fi

if ! make --no-print-directory lint; then
  echo "verify: golangci-lint found problems (above; .golangci.yml; run make lint): fix them, or for a" >&2
  echo "  false positive add //nolint:<linter> // <why>" >&2
  failed=1
fi

if [[ $failed -eq 0 ]]; then echo "verify: generated files, formatting, go.mod and the chart's appVersion are up to date; lint is clean"; fi
exit $failed
