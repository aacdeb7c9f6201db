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

package charts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// releaseVersion is the VERSION file at the repository root: the release the binaries are
// stamped with (hack/ldflags.sh) and the chart's appVersion.
func releaseVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// hack/verify-version.sh, which make verify runs, accepts this repository and refuses a chart
// whose appVersion is not VERSION, and a VERSION that is not a plain semantic version.
func TestVerifyVersion(t *testing.T) {
	chartYAML, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// check runs the script on a copy of the two files it reads, with VERSION and the appVersion
	// line replaced.
	check := func(t *testing.T, version, appVersionLine string) (string, error) {
		t.Helper()
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "charts", chart), 0o755); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(chartYAML), "\n") {
			if strings.HasPrefix(l, "appVersion:") {
				l = appVersionLine
			}
			lines = append(lines, l)
		}
		if err := os.WriteFile(filepath.Join(root, "charts", chart, "Chart.yaml"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "VERSION"), []byte(version), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join("..", "hack", "verify-version.sh"), root).CombinedOutput()
		return string(out), err
	}

	t.Run("this repository", func(t *testing.T) {
		out, err := exec.Command(filepath.Join("..", "hack", "verify-version.sh")).CombinedOutput()
		if err != nil {
			t.Fatalf("hack/verify-version.sh: %v\n%s", err, out)
		}
		NewWithT(t).Expect(string(chartYAML)).To(MatchRegexp(`(?m)^appVersion: "` + strings.ReplaceAll(releaseVersion(t), ".", `\.`) + `"$`))
	})
	for _, tc := range []struct {
		name, version, appVersion, want string
	}{
		{"quoted, as the chart has it", "0.3.1\n", `appVersion: "0.3.1"`, ""},
		{"unquoted", "0.3.1\n", `appVersion: 0.3.1`, ""},
		{"a pre-release", "1.0.0-rc.1\n", `appVersion: "1.0.0-rc.1"`, ""},
		{"the chart behind VERSION", "0.3.1\n", `appVersion: "0.3.0"`,
			`verify: charts/lockwarden/Chart.yaml has appVersion "0.3.0" but VERSION holds "0.3.1"`},
		{"no appVersion", "0.3.1\n", `# appVersion removed`,
			`verify: charts/lockwarden/Chart.yaml has appVersion "" but VERSION holds "0.3.1"`},
		{"a leading v", "v0.3.1\n", `appVersion: "v0.3.1"`, `verify: VERSION holds "v0.3.1", not a semantic version`},
		{"two lines", "0.3.1\n0.3.2\n", `appVersion: "0.3.1"`, `verify: VERSION holds "0.3.1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := check(t, tc.version, tc.appVersion)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred(), out)
				return
			}
			g.Expect(err).To(HaveOccurred(), "the check passed: %s", out)
			g.Expect(out).To(HavePrefix(tc.want))
		})
	}
}
