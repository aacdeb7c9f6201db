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
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
)

// The commands in NOTES.txt are meant to be pasted into a shell. The tests render the notes with
// the real helm, check every snippet with `bash -n`, then run them all with a kubectl that only
// records what it is asked, and check what it was asked: that the names the commands use are those
// of the objects the chart renders, and that the objects they apply decode as lockwarden's and
// pass a real API server's validation (kubectl apply --dry-run=server).

var (
	apiOnce       sync.Once
	apiPlane      *lockenv.ControlPlane
	apiKubeconfig string
	apiErr        error
)

// TestMain stops the API server that apiServer started, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if apiPlane != nil {
		if err := apiPlane.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		}
	}
	os.Exit(code)
}

// apiServer starts, once for the package, a real kube-apiserver and etcd on loopback (envtest,
// from the binaries in the cache) with lockwarden's CRDs and stand-ins for the Prometheus
// Operator's, and returns a kubeconfig for it. `helm install --dry-run` renders the notes, which
// `helm template` does not, but first insists on reaching a cluster that knows every kind the chart
// renders; it writes nothing there.
func apiServer(t *testing.T) string {
	t.Helper()
	apiOnce.Do(func() {
		if os.Getenv("KUBEBUILDER_ASSETS") == "" {
			// The cache's binary directory holds kube-apiserver and etcd too.
			os.Setenv("KUBEBUILDER_ASSETS", filepath.Dir(tool(t, "kube-apiserver")))
		}
		if apiPlane, apiErr = lockenv.StartControlPlane(".."); apiErr != nil {
			return
		}
		var kubeconfig []byte
		if kubeconfig, apiErr = apiPlane.Kubeconfig(); apiErr != nil {
			return
		}
		dir, err := os.MkdirTemp("", "lockwarden-charts-")
		if err != nil {
			apiErr = err
			return
		}
		apiKubeconfig = filepath.Join(dir, "kubeconfig")
		if apiErr = os.WriteFile(apiKubeconfig, kubeconfig, 0o600); apiErr != nil {
			return
		}
		for _, args := range [][]string{
			{"apply", "-f", filepath.Join("testdata", "monitoring-crds.yaml")},
			{"wait", "--for=condition=Established", "--timeout=60s",
				"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"},
		} {
			if out, err := run(t, "kubectl", append([]string{"--kubeconfig", apiKubeconfig}, args...)...); err != nil {
				apiErr = fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
				return
			}
		}
	})
	if apiErr != nil {
		t.Fatalf("starting a kube-apiserver: %v", apiErr)
	}
	return apiKubeconfig
}

// installDryRun renders the chart as `helm install --dry-run` does, NOTES.txt included, and
// returns the notes and the manifest. The API server already has lockwarden's CRDs, which the
// release would own: --take-ownership lets the dry run go on.
func installDryRun(t *testing.T, args ...string) (string, objects) {
	t.Helper()
	cmd := command(t, "helm", append([]string{"install", "lw", chart, "--namespace", "locks", "--dry-run=client",
		"--take-ownership", "--kubeconfig", apiServer(t), "--output", "json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm install --dry-run %v: %v\n%s", args, err, stderr.String())
	}
	var rel struct {
		Info struct {
			Notes string `json:"notes"`
		} `json:"info"`
		Manifest string `json:"manifest"`
	}
	if err := json.Unmarshal(out, &rel); err != nil {
		t.Fatalf("helm install --dry-run --output json: %v\n%s", err, out)
	}
	if rel.Info.Notes == "" {
		t.Fatalf("helm install --dry-run rendered no notes")
	}
	return rel.Info.Notes, parse(t, rel.Manifest)
}

// commandBlocks returns the shell snippets of the notes: the paragraphs whose first line is
// indented (prose starts at the margin; a here-document's body may too).
func commandBlocks(notes string) []string {
	var blocks []string
	for _, p := range regexp.MustCompile(`\n[ \t]*\n`).Split(strings.Trim(notes, "\n"), -1) {
		if strings.HasPrefix(p, "  ") {
			blocks = append(blocks, p+"\n")
		}
	}
	return blocks
}

// kubectlCall is one invocation of the recording kubectl: its arguments and, for `-f -`, what it
// read from stdin.
type kubectlCall struct {
	args  []string
	stdin string
}

// recordingKubectl is a kubectl that writes its arguments, and its stdin when given `-f -`, to
// numbered files in $KUBECTL_CALLS.
const recordingKubectl = `#!/usr/bin/env bash
set -eu
n=$(( $(ls "$KUBECTL_CALLS" | grep -c '\.args$' || true) + 1 ))
printf '%s\n' "$@" > "$KUBECTL_CALLS/$n.args"
prev=
for a in "$@"; do
  if [[ $prev == -f && $a == - ]]; then cat > "$KUBECTL_CALLS/$n.stdin"; fi
  prev=$a
done
`

// runPasted runs the snippets, one after the other as if pasted into one shell, with the
// recording kubectl first on PATH, and returns its calls.
func runPasted(t *testing.T, blocks []string) []kubectlCall {
	t.Helper()
	bin, calls := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(recordingKubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(bin, "pasted.sh")
	if err := os.WriteFile(script, []byte(strings.Join(blocks, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECTL_CALLS="+calls)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("the notes' commands, pasted into bash: %v\n%s", err, out)
	}
	var recorded []kubectlCall
	for n := 1; ; n++ {
		args, err := os.ReadFile(filepath.Join(calls, strconv.Itoa(n)+".args"))
		if os.IsNotExist(err) {
			return recorded
		}
		if err != nil {
			t.Fatal(err)
		}
		c := kubectlCall{args: strings.Split(strings.TrimSuffix(string(args), "\n"), "\n")}
		if stdin, err := os.ReadFile(filepath.Join(calls, strconv.Itoa(n)+".stdin")); err == nil {
			c.stdin = string(stdin)
		}
		recorded = append(recorded, c)
	}
}

func TestNotesPasteIntoAShell(t *testing.T) {
	for name, args := range map[string][]string{
		"defaults":               {},
		"plain HTTP metrics":     {"--set", "metrics.secure=false"},
		"no metrics":             {"--set", "metrics.enabled=false"},
		"no RBAC":                {"--set", "rbac.create=false"},
		"no CRDs":                {"--set", "crds.enabled=false"},
		"CRDs not kept":          {"--set", "crds.keep=false"},
		"alerts and dashboard":   {"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.grafanaDashboard.enabled=true"},
		"every option":           {"--values", filepath.Join("testdata", "all-options.yaml")},
		"a name of one's own":    {"--set", "fullnameOverride=locks-controller"},
		"a single replica":       {"--set", "replicaCount=1"},
		"ServiceMonitor and TLS": {"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.tls.secretName=metrics-tls"},
		"secrets somewhere else": {"--set", "secretNamespace=vault"},
	} {
		t.Run(name, func(t *testing.T) {
			notes, _ := installDryRun(t, args...)
			blocks := commandBlocks(notes)
			if len(blocks) == 0 {
				t.Fatalf("no commands in the notes:\n%s", notes)
			}
			for _, b := range blocks {
				// bash -n only warns about a here-document without its terminator: any output fails.
				out, err := exec.Command("bash", "-n", "-c", b).CombinedOutput()
				if err != nil || len(out) > 0 {
					t.Errorf("bash -n: %v\n%s\nin:\n%s", err, out, b)
				}
			}
			runPasted(t, blocks)
		})
	}
}

func TestNotesCommandsNameTheChartsObjects(t *testing.T) {
	g := NewWithT(t)
	notes, objs := installDryRun(t)
	calls := runPasted(t, commandBlocks(notes))
	var args [][]string
	for _, c := range calls {
		args = append(args, c.args)
	}
	g.Expect(args).To(Equal([][]string{
		{"-n", "locks", "rollout", "status", "deployment/lw-lockwarden"},
		{"create", "namespace", "lock-demo"},
		{"-n", "lock-demo", "apply", "-f", "-"},
		{"-n", "lock-demo", "wait", "--for=condition=Acquired", "lclaim/by-hand", "--timeout=60s"},
		{"get", "locks", "-n", "lock-demo"},
		{"create", "clusterrolebinding", "lw-lockwarden-metrics-prometheus",
			"--clusterrole=lw-lockwarden-metrics-reader", "--serviceaccount=monitoring:prometheus-k8s"},
	}))
	g.Expect(objs).To(HaveKey("Deployment/lw-lockwarden"), "rollout status names the chart's Deployment")
	g.Expect(objs).To(HaveKey("ClusterRole/lw-lockwarden-metrics-reader"), "the binding names the chart's ClusterRole")

	// What was applied decodes as lockwarden objects, with no unknown field.
	scheme := runtime.NewScheme()
	g.Expect(locksv1alpha1.AddToScheme(scheme)).To(Succeed())
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	locks, claims := map[string]*locksv1alpha1.DistributedLock{}, map[string]*locksv1alpha1.LockClaim{}
	var applied string
	for _, c := range calls {
		applied += c.stdin
	}
	g.Expect(applied).NotTo(BeEmpty(), "the notes apply objects from a here-document")
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(applied, -1) {
		obj, _, err := decoder.Decode([]byte(doc), nil, nil)
		g.Expect(err).NotTo(HaveOccurred(), "applied:\n%s", doc)
		switch o := obj.(type) {
		case *locksv1alpha1.DistributedLock:
			g.Expect(o.Namespace).To(BeEmpty(), "kubectl -n places it")
			locks[o.Name] = o
		case *locksv1alpha1.LockClaim:
			g.Expect(o.Namespace).To(BeEmpty(), "kubectl -n places it")
			claims[o.Name] = o
		default:
			t.Errorf("applied a %T", obj)
		}
	}
	g.Expect(claims).To(HaveKey("by-hand"), "the claim kubectl waits for is the one applied")
	if c := claims["by-hand"]; c != nil {
		g.Expect(locks).To(HaveKey(c.Spec.LockName), "the claim asks for the lock applied with it")
	}

	// The API server accepts them: the CRDs' schemas and validation rules pass.
	kubeconfig := apiServer(t)
	if out, err := run(t, "kubectl", "--kubeconfig", kubeconfig, "create", "namespace", "lock-demo"); err != nil && !strings.Contains(out, "AlreadyExists") {
		t.Fatalf("kubectl create namespace: %v\n%s", err, out)
	}
	apply := command(t, "kubectl", "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-n", "lock-demo", "-f", "-")
	apply.Stdin = strings.NewReader(applied)
	out, err := apply.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl apply --dry-run=server:\n%s", out)
	g.Expect(string(out)).To(And(
		ContainSubstring("distributedlock.locks.lockwarden.io/demo created (server dry run)"),
		ContainSubstring("lockclaim.locks.lockwarden.io/by-hand created (server dry run)")))

	// The short name and the category the commands use are the CRDs'.
	var crd struct {
		Spec struct {
			Names struct {
				ShortNames []string `json:"shortNames"`
				Categories []string `json:"categories"`
			} `json:"names"`
		} `json:"spec"`
	}
	g.Expect(yaml.Unmarshal(objs["CustomResourceDefinition/lockclaims.locks.lockwarden.io"], &crd)).To(Succeed())
	g.Expect(crd.Spec.Names.ShortNames).To(ContainElement("lclaim"))
	g.Expect(crd.Spec.Names.Categories).To(ContainElement("locks"))
}

// TestNotesSayWhenTheAdmissionPoliciesAreMissing: where the chart installs without the policies
// that gate annotated pods and suspend annotated Jobs, the notes say that the annotation alone
// holds nothing back, and what to do instead; where it installs them, they say nothing of it.
func TestNotesSayWhenTheAdmissionPoliciesAreMissing(t *testing.T) {
	g := NewWithT(t)
	notes, objs := installDryRun(t)
	g.Expect(objs.ofKind("MutatingAdmissionPolicy")).NotTo(BeEmpty(), "the test's API server serves the policies' API")
	g.Expect(notes).NotTo(ContainSubstring("NOTE: the admission policies"))

	notes, objs = installDryRun(t, "--set", "admissionPolicy.enabled=false")
	g.Expect(objs.ofKind("MutatingAdmissionPolicy")).To(BeEmpty())
	g.Expect(notes).To(ContainSubstring("NOTE: the admission policies that gate annotated pods and suspend annotated Jobs are not installed\n(admissionPolicy.enabled is false)."))
	g.Expect(notes).To(ContainSubstring("give pod\ntemplates the scheduling gate locks.lockwarden.io/lock and create Jobs with spec.suspend: true"))
	g.Expect(notes).To(ContainSubstring("Warning\nevent NotGated"))
}
