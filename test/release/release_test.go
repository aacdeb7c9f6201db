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

// Package release_test checks what make release builds (hack/release.sh) as a user meets it: it
// runs the script into a temporary directory, reads install.yaml, the chart package, the krew
// manifest and SHA256SUMS, and applies install.yaml with kubectl to a fresh kube-apiserver
// (envtest, without lockwarden's CRDs), as `kubectl apply -f install.yaml` does on a new cluster.
package release_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// root is the repository root, from this package's directory.
var root = filepath.Join("..", "..")

const namespace = "lockwarden-system"

var crds = []string{
	"lockbackends.locks.lockwarden.io",
	"distributedlocks.locks.lockwarden.io",
	"lockclaims.locks.lockwarden.io",
}

// TestRelease runs hack/release.sh once, with the defaults make release uses, and checks its files.
// It builds the krew archive of one platform, the host's: each platform is a full link of lockctl,
// the bulk of the script's time. make release builds every platform of hack/krew/lock.yaml (the
// script takes the list from it, and fails on a placeholder left unfilled); cmd/lockctl's
// TestKrewManifestTemplate checks which platforms that is, and make vet type-checks lockctl for
// darwin.
func TestRelease(t *testing.T) {
	version := readVersion(t)
	image := chartImageRepository(t) + ":" + version
	urlBase := "https://github.com/lockwarden/lockwarden/releases/download/v" + version
	dist := filepath.Join(t.TempDir(), "dist")
	platform := hostKrewPlatform()
	started := time.Now()
	cmd := release(t, dist)
	cmd.Env = append(cmd.Env, "KREW_PLATFORMS="+platform.String())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kubeconfig := freshCluster(t) // while the script runs
	if err := cmd.Wait(); err != nil {
		t.Fatalf("hack/release.sh: %v\n%s", err, out.String())
	}
	t.Logf("hack/release.sh took %s", time.Since(started).Round(100*time.Millisecond))

	t.Run("install.yaml is the Namespace, then the CRDs, then RBAC and the Deployment of this release's image", func(t *testing.T) {
		g := NewWithT(t)
		install := read(t, filepath.Join(dist, "install.yaml"))
		g.Expect(string(install)).NotTo(ContainSubstring(":latest"))
		docs := documents(t, install)
		g.Expect(len(docs)).To(BeNumerically(">", 4))

		g.Expect(docs[0].Kind).To(Equal("Namespace"), "kubectl apply creates objects in file order")
		var ns corev1.Namespace
		docs[0].decode(t, &ns)
		g.Expect(ns.Name).To(Equal(namespace))
		g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))

		var crdNames []string
		for _, d := range docs[1:4] {
			g.Expect(d.Kind).To(Equal("CustomResourceDefinition"), "the CRDs come right after the Namespace")
			crdNames = append(crdNames, d.Metadata.Name)
		}
		g.Expect(crdNames).To(ConsistOf(crds))

		clusterScoped := []string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
		byKind := map[string][]document{}
		for _, d := range docs {
			byKind[d.Kind] = append(byKind[d.Kind], d)
			if slices.Contains(clusterScoped, d.Kind) {
				g.Expect(d.Metadata.Namespace).To(BeEmpty(), "%s/%s", d.Kind, d.Metadata.Name)
			} else {
				g.Expect(d.Metadata.Namespace).To(Equal(namespace), "%s/%s", d.Kind, d.Metadata.Name)
			}
		}

		g.Expect(byKind["Deployment"]).To(HaveLen(1))
		var deploy appsv1.Deployment
		byKind["Deployment"][0].decode(t, &deploy)
		g.Expect(deploy.Name).To(Equal("lockwarden-controller-manager"))
		pod := deploy.Spec.Template.Spec
		g.Expect(pod.Containers).To(HaveLen(1))
		g.Expect(pod.Containers[0].Image).To(Equal(image))
		g.Expect(pod.InitContainers).To(BeEmpty())

		// The manager's ClusterRole, bound to the Deployment's ServiceAccount.
		var role rbacv1.ClusterRole
		find(t, byKind["ClusterRole"], "lockwarden-manager-role").decode(t, &role)
		g.Expect(role.Rules).NotTo(BeEmpty())
		var bound bool
		for _, d := range byKind["ClusterRoleBinding"] {
			var b rbacv1.ClusterRoleBinding
			d.decode(t, &b)
			sa := rbacv1.Subject{Kind: "ServiceAccount", Name: pod.ServiceAccountName, Namespace: namespace}
			if b.RoleRef.Name == role.Name && slices.Contains(b.Subjects, sa) {
				bound = true
			}
		}
		g.Expect(bound).To(BeTrue(), "no ClusterRoleBinding of %s to the ServiceAccount %s", role.Name, pod.ServiceAccountName)
		find(t, byKind["ServiceAccount"], pod.ServiceAccountName)
	})

	t.Run("the chart package is the chart of this release", func(t *testing.T) {
		g := NewWithT(t)
		var chart struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		}
		if err := yaml.Unmarshal(read(t, filepath.Join(root, "charts", "lockwarden", "Chart.yaml")), &chart); err != nil {
			t.Fatal(err)
		}
		pkg := filepath.Join(dist, "lockwarden-"+chart.Version+".tgz")
		var packaged struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		}
		if err := yaml.Unmarshal(fileInTarGz(t, pkg, "lockwarden/Chart.yaml"), &packaged); err != nil {
			t.Fatal(err)
		}
		g.Expect(packaged.Name).To(Equal("lockwarden"))
		g.Expect(packaged.Version).To(Equal(chart.Version))
		g.Expect(packaged.AppVersion).To(Equal(version))
		g.Expect(fileInTarGz(t, pkg, "lockwarden/values.schema.json")).NotTo(BeEmpty())
	})

	t.Run("the krew manifest points at this release's archives", func(t *testing.T) {
		g := NewWithT(t)
		var plugin krewPlugin
		if err := yaml.UnmarshalStrict(read(t, filepath.Join(dist, "lock.yaml")), &plugin); err != nil {
			t.Fatal(err)
		}
		g.Expect(plugin.Spec.Version).To(Equal("v" + version))
		// Only the platform built (KREW_PLATFORMS): the others' entries are left out, not left
		// with placeholders.
		g.Expect(plugin.Spec.Platforms).To(HaveLen(1))
		p := plugin.Spec.Platforms[0]
		g.Expect(p.Selector.MatchLabels).To(Equal(map[string]string{"os": platform.OS, "arch": platform.Arch}))
		name := "kubectl-lock_v" + version + "_" + platform.OS + "_" + platform.Arch + ".tar.gz"
		g.Expect(p.URI).To(Equal(urlBase + "/" + name))
		g.Expect(p.SHA256).To(Equal(sha256File(t, filepath.Join(dist, name))), name)
		g.Expect(p.Files).To(Equal([]krewFile{{From: "kubectl-lock", To: "."}}))
		g.Expect(p.Bin).To(Equal("kubectl-lock"))
		bin := fileInTarGz(t, filepath.Join(dist, name), "kubectl-lock")
		g.Expect(bin).NotTo(BeEmpty(), "the archive holds the binary krew installs")
		// The test builds of lockctl (the reliability harness's, with deliberate bugs) must never
		// be what a user installs: the build's own record of its tags says which it is.
		info, err := buildinfo.Read(bytes.NewReader(bin))
		g.Expect(err).NotTo(HaveOccurred(), "the released binary carries its build information")
		for _, setting := range info.Settings {
			if setting.Key == "-tags" {
				for _, tag := range []string{"mutants", "failpoints", "testclock"} {
					g.Expect(strings.Split(setting.Value, ",")).NotTo(ContainElement(tag), "the released lockctl was built with the test tag %q", tag)
				}
			}
		}
		g.Expect(info.Path).To(Equal("github.com/lockwarden/lockwarden/cmd/lockctl"))
	})

	t.Run("SHA256SUMS holds the sum of every other file", func(t *testing.T) {
		g := NewWithT(t)
		entries, err := os.ReadDir(dist)
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, e := range entries {
			if e.Name() != "SHA256SUMS" {
				files = append(files, e.Name())
			}
		}
		var listed []string
		for _, line := range strings.Split(strings.TrimSuffix(string(read(t, filepath.Join(dist, "SHA256SUMS"))), "\n"), "\n") {
			sum, name, ok := strings.Cut(line, "  ") // sha256sum's text-mode format, which sha256sum -c reads
			g.Expect(ok).To(BeTrue(), "line %q", line)
			g.Expect(sum).To(Equal(sha256File(t, filepath.Join(dist, name))), name)
			listed = append(listed, name)
		}
		g.Expect(listed).To(ConsistOf(files))
		g.Expect(files).To(ContainElements("install.yaml", "lock.yaml", MatchRegexp(`^lockwarden-.*\.tgz$`), MatchRegexp(`^kubectl-lock_.*\.tar\.gz$`)))
	})

	t.Run("kubectl apply -f install.yaml installs lockwarden on a fresh cluster", func(t *testing.T) {
		g := NewWithT(t)
		kubectl := func(args ...string) (string, error) {
			out, err := exec.Command(filepath.Join(assets(t), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
			return string(out), err
		}
		// A real apply, not --dry-run=server: a dry run creates nothing, so the namespaced objects
		// would be refused for want of the Namespace the same file creates.
		out, err := kubectl("apply", "-f", filepath.Join(dist, "install.yaml"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		// Warnings would be, for one, the Pod Security profile the Namespace enforces refusing the
		// manager's pods.
		g.Expect(out).NotTo(ContainSubstring("Warning"))
		out, err = kubectl(append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, prefixed("crd/", crds)...)...)
		g.Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl("get", "deployment", "lockwarden-controller-manager", "-n", namespace, "-o", "jsonpath={.spec.template.spec.containers[*].image}")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(Equal(image))
	})
}

// hack/release.sh builds nothing it would have to throw away, and replaces only its own output.
func TestReleaseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		prepare func(t *testing.T, dist string)
		want    string
	}{{
		name: "an image repository the chart does not deploy",
		env:  []string{"IMG_REPO=registry.example.com/lockwarden"},
		want: "the chart runs " + chartImageRepository(t) + ":",
	}, {
		name: "a version with a leading v",
		env:  []string{"VERSION=v" + readVersion(t)},
		want: "is not a semantic version",
	}, {
		name: "a directory that holds other files",
		prepare: func(t *testing.T, dist string) {
			if err := os.MkdirAll(dist, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dist, "notes.txt"), []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		want: "holds files that no release build wrote",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dist := filepath.Join(t.TempDir(), "dist")
			if tc.prepare != nil {
				tc.prepare(t, dist)
			}
			cmd := release(t, dist)
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			g.Expect(err).To(HaveOccurred(), string(out))
			g.Expect(string(out)).To(ContainSubstring(tc.want))
			entries, _ := os.ReadDir(dist)
			for _, e := range entries {
				g.Expect(e.Name()).To(Equal("notes.txt"), "hack/release.sh wrote into %s although it failed", dist)
			}
		})
	}
}

// hack/krew/release.sh builds only the platforms of hack/krew/lock.yaml: KREW_PLATFORMS naming
// another fails before anything is built.
func TestKrewPlatformsRefused(t *testing.T) {
	g := NewWithT(t)
	out := filepath.Join(t.TempDir(), "krew")
	cmd := exec.Command(filepath.Join(root, "hack", "krew", "release.sh"), "v0.1.0", "https://example.com/v0.1.0", out)
	cmd.Env = append(os.Environ(), "KREW_PLATFORMS=linux/amd64 windows/amd64")
	msg, err := cmd.CombinedOutput()
	g.Expect(err).To(HaveOccurred(), string(msg))
	g.Expect(string(msg)).To(Equal("krew: KREW_PLATFORMS: windows/amd64 is not a platform of hack/krew/lock.yaml (linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)\n"))
	g.Expect(out).NotTo(BeAnExistingFile())
}

// krewPlugin is the part of a krew manifest (hack/krew/lock.yaml) that the tests read; decoded
// strictly, so every field of a platform's entry is here.
type krewPlugin struct {
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
			URI    string     `json:"uri"`
			SHA256 string     `json:"sha256"`
			Files  []krewFile `json:"files"`
			Bin    string     `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// krewPlatform is an os/arch of the krew manifest.
type krewPlatform struct{ OS, Arch string }

func (p krewPlatform) String() string { return p.OS + "/" + p.Arch }

// hostKrewPlatform is the platform TestRelease builds: the host's, whose compiled packages the
// rest of make test-unit has already cached, or linux/amd64 on a host krew is not offered for.
func hostKrewPlatform() krewPlatform {
	if (runtime.GOOS == "linux" || runtime.GOOS == "darwin") && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		return krewPlatform{OS: runtime.GOOS, Arch: runtime.GOARCH}
	}
	return krewPlatform{OS: "linux", Arch: "amd64"}
}

// release prepares hack/release.sh OUT with make release's defaults: VERSION, IMG_REPO and
// URL_BASE (and KREW_PLATFORMS) from the caller's environment are dropped, and kubectl and helm
// are the cache's.
func release(t *testing.T, out string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "release.sh"), out)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains([]string{"VERSION", "IMG_REPO", "URL_BASE", "KUBECTL", "HELM", "KREW_PLATFORMS"}, name) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// helm keeps caches and config under these; keep them out of the user's home.
	home := t.TempDir()
	cmd.Env = append(cmd.Env, "KUBECTL="+filepath.Join(assets(t), "kubectl"), "HELM="+filepath.Join(assets(t), "helm"),
		"HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	return cmd
}

// assets is the directory of the cache's binaries (KUBEBUILDER_ASSETS under make test-unit): the
// kube-apiserver and etcd of envtest, kubectl and helm.
func assets(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	out, err := exec.Command(filepath.Join(root, "hack", "k8s-binaries.sh"), "bin-dir").Output()
	if err != nil {
		t.Fatalf("hack/k8s-binaries.sh bin-dir: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	return dir
}

// freshCluster starts a kube-apiserver and etcd with nothing installed, stopped when the test
// ends, and returns the path of an admin kubeconfig for it.
func freshCluster(t *testing.T) string {
	t.Helper()
	assets(t)
	env := &envtest.Environment{}
	if _, err := env.Start(); err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	user, err := env.AddUser(envtest.User{Name: "release-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// document is one YAML document of a multi-document file.
type document struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	raw []byte
}

// decode decodes the document strictly: a field the type does not have fails the test.
func (d document) decode(t *testing.T, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(d.raw, into); err != nil {
		t.Fatalf("%s/%s: %v", d.Kind, d.Metadata.Name, err)
	}
}

// documents splits a multi-document YAML file as kubectl does and decodes each document's kind
// and name; documents that hold only comments are left out.
func documents(t *testing.T, b []byte) []document {
	t.Helper()
	var docs []document
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		d := document{raw: raw}
		if err := yaml.Unmarshal(raw, &d); err != nil {
			t.Fatalf("a document does not decode: %v\n%s", err, raw)
		}
		if d.Kind == "" {
			var fields map[string]any
			if err := yaml.Unmarshal(raw, &fields); err != nil || len(fields) != 0 {
				t.Fatalf("a document without a kind:\n%s", raw)
			}
			continue
		}
		docs = append(docs, d)
	}
}

// find returns the document named name, failing the test if there is none.
func find(t *testing.T, docs []document, name string) document {
	t.Helper()
	for _, d := range docs {
		if d.Metadata.Name == name {
			return d
		}
	}
	t.Fatalf("no document named %s", name)
	return document{}
}

// fileInTarGz returns the contents of the file name in the gzipped tar archive path.
func fileInTarGz(t *testing.T, path, name string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s holds no %s", path, name)
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("%s: %s: %v", path, name, err)
			}
			return b
		}
	}
}

func readVersion(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(string(read(t, filepath.Join(root, "VERSION"))))
}

// chartImageRepository is the chart's image.repository, the image make release pins.
func chartImageRepository(t *testing.T) string {
	t.Helper()
	var values struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(read(t, filepath.Join(root, "charts", "lockwarden", "values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Repository == "" {
		t.Fatal("the chart's values.yaml has no image.repository")
	}
	return values.Image.Repository
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	sum := sha256.Sum256(read(t, path))
	return hex.EncodeToString(sum[:])
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}
