/*
Copyright 2026 The lockwarden Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository root, seen from this package's directory (where go test runs).
const repoRoot = "../.."

// outdated generates every file in memory and returns the paths under root whose content differs
// from it (or that are missing, or stale CRD copies).
func outdated(t *testing.T, root string) []string {
	t.Helper()
	outs, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, o := range outs {
		if disk, err := os.ReadFile(filepath.Join(root, o.path)); err != nil || !bytes.Equal(disk, o.content) {
			paths = append(paths, o.path)
		}
	}
	stale, err := staleCRDs(root, outs)
	if err != nil {
		t.Fatal(err)
	}
	return append(paths, stale...)
}

// TestGeneratedFilesUpToDate fails when a generated file was edited by hand or its sources changed
// without `make manifests`.
func TestGeneratedFilesUpToDate(t *testing.T) {
	if paths := outdated(t, repoRoot); len(paths) > 0 {
		t.Errorf("out of date (run make manifests, or go run ./hack/chartgen, and review the diff):\n  %s", strings.Join(paths, "\n  "))
	}
}

// TestOutdatedCatchesEdits checks the check above on a copy of the sources: a hand edit of a
// generated file, and an edit of values.yaml that was not regenerated, are both reported.
func TestOutdatedCatchesEdits(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{crdSrcDir, rbacSrcDir, filepath.Join(chartDir, "Chart.yaml"), filepath.Join(chartDir, "values.yaml"), installDocPath, admissionSrc, jobSuspendSrc, claimHolderSrc, podEditsSrc} {
		copyTree(t, filepath.Join(repoRoot, p), filepath.Join(root, p))
	}
	if err := run(root); err != nil {
		t.Fatal(err)
	}
	if paths := outdated(t, root); len(paths) > 0 {
		t.Fatalf("just generated, yet out of date: %v", paths)
	}

	schema := filepath.Join(root, chartDir, "values.schema.json")
	edit(t, schema, `"maximum": 65535`, `"maximum": 65536`)
	if got, want := outdated(t, root), []string{filepath.Join(chartDir, "values.schema.json")}; !slices.Equal(got, want) {
		t.Errorf("after a hand edit of values.schema.json: out of date %v, want %v", got, want)
	}

	if err := run(root); err != nil {
		t.Fatal(err)
	}
	edit(t, filepath.Join(root, chartDir, "values.yaml"), "# Image repository.", "# The image repository.")
	want := []string{filepath.Join(chartDir, "values.schema.json"), installDocPath, filepath.Join(chartDir, "README.md")}
	if got := outdated(t, root); !slices.Equal(got, want) {
		t.Errorf("after an edit of values.yaml: out of date %v, want %v", got, want)
	}

	if err := run(root); err != nil {
		t.Fatal(err)
	}
	edit(t, filepath.Join(root, admissionSrc), "failurePolicy: Fail", "failurePolicy: Ignore")
	if got, want := outdated(t, root), []string{filepath.Join(chartDir, "templates", "_admission.tpl")}; !slices.Equal(got, want) {
		t.Errorf("after an edit of %s: out of date %v, want %v", admissionSrc, got, want)
	}
	edit(t, filepath.Join(root, admissionSrc), "failurePolicy: Ignore", "failurePolicys: Fail")
	if _, err := generate(root); err == nil || !strings.Contains(err.Error(), `unknown field "failurePolicys"`) {
		t.Errorf("a misspelt field of the admission policy: got %v, want an unknown field error", err)
	}
	edit(t, filepath.Join(root, admissionSrc), "failurePolicys: Fail", "failurePolicy: Fail")

	if err := os.WriteFile(filepath.Join(root, chartDir, "templates", "crds", "gone.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := outdated(t, root); !slices.Contains(got, filepath.Join(chartDir, "templates", "crds", "gone.yaml")) {
		t.Errorf("a CRD copy without a CRD is not reported: %v", got)
	}
}

// edit replaces old, which must occur in the file, with repl.
func edit(t *testing.T, path, old, repl string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(repl), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies a file, or a directory's files, from src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
