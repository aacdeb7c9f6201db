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
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
)

// The oldest supported Kubernetes release is stated in four places: the Makefile's
// COMPAT_K8S_VERSION (the release make test-compat proves), the chart's kubeVersion, the README
// and docs/install.md. They must name the same minor release, and helm must refuse the release
// before it.
func TestOldestKubernetesAgrees(t *testing.T) {
	g := NewWithT(t)
	read := func(path string) string {
		b, err := os.ReadFile(filepath.Join("..", path))
		g.Expect(err).NotTo(HaveOccurred())
		return string(b)
	}
	find := func(path, pattern string) string {
		m := regexp.MustCompile(pattern).FindStringSubmatch(read(path))
		g.Expect(m).NotTo(BeNil(), "%s has no line matching %s", path, pattern)
		return m[1]
	}

	minor := find("Makefile", `(?m)^COMPAT_K8S_VERSION \?= v1\.(\d+)\.\d+$`)
	g.Expect(find("charts/lockwarden/Chart.yaml", `(?m)^kubeVersion: ">=1\.(\d+)\.0-0"$`)).To(Equal(minor), "the chart's kubeVersion")
	g.Expect(find("README.md", `runs on \*\*Kubernetes 1\.(\d+) to`)).To(Equal(minor), "the README's range")
	g.Expect(find("docs/install.md", `needs Kubernetes 1\.(\d+) or later`)).To(Equal(minor), "docs/install.md")

	var n int
	_, err := fmt.Sscan(minor, &n)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := run(t, "helm", "template", "lw", chart, "--kube-version", fmt.Sprintf("1.%d.0", n-1))
	g.Expect(err).To(HaveOccurred(), "helm installed the chart on 1.%d:\n%s", n-1, out)
	g.Expect(out).To(ContainSubstring("incompatible with Kubernetes"))
	for _, v := range []string{fmt.Sprintf("1.%d.0", n), fmt.Sprintf("1.%d.5-eks-1234", n)} {
		out, err = run(t, "helm", "template", "lw", chart, "--kube-version", v)
		g.Expect(err).NotTo(HaveOccurred(), "helm refused the chart on %s:\n%s", v, out)
	}
}
