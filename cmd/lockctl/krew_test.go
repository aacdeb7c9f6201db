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
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestKrewManifestTemplate checks hack/krew/lock.yaml, which hack/krew/release.sh fills in: a
// krew Plugin named lock whose every platform installs kubectl-lock from its own placeholders.
func TestKrewManifestTemplate(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "hack", "krew", "lock.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Fill the placeholders as release.sh does, with values that say where they came from.
	placeholder := regexp.MustCompile(`\$\{([A-Z0-9_]+)\}`)
	filled := placeholder.ReplaceAllStringFunc(string(b), func(p string) string {
		return "filled-" + strings.ToLower(placeholder.FindStringSubmatch(p)[1])
	})
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Caveats          string `json:"caveats"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
				Files  []struct {
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"files"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict([]byte(filled), &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "lock" ||
		m.Spec.Version != "filled-version" || m.Spec.ShortDescription == "" {
		t.Fatalf("not the krew Plugin lock with a VERSION placeholder: %+v", m)
	}
	// release.sh builds every platform listed here (make release); docs/lockctl.md names them.
	var offered []string
	for _, p := range m.Spec.Platforms {
		offered = append(offered, p.Selector.MatchLabels["os"]+"/"+p.Selector.MatchLabels["arch"])
	}
	if want := []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}; !slices.Equal(offered, want) {
		t.Fatalf("platforms %v, want %v", offered, want)
	}
	for _, p := range m.Spec.Platforms {
		key := p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"]
		if p.URI != "filled-uri_"+key || p.SHA256 != "filled-sha256_"+key || p.Bin != "kubectl-lock" ||
			len(p.Files) != 1 || p.Files[0].From != "kubectl-lock" {
			t.Errorf("platform %s: %+v", key, p)
		}
	}
}
