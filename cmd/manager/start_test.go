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
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The build the manager binary of these tests is stamped as, through hack/ldflags.sh as make
// build runs it.
const (
	stampVersion = "9.8.7-test.1"
	stampCommit  = "0123456789abcdef0123456789abcdef01234567"
	stampDate    = "2026-01-02T03:04:05Z"
)

var stamped struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// stampedManager builds ./cmd/manager once per test run with the -ldflags of hack/ldflags.sh,
// given the stamp values above through the environment as make build and the Dockerfile give
// theirs, and returns the binary's path.
func stampedManager(t *testing.T) string {
	t.Helper()
	stamped.once.Do(func() {
		cmd := exec.Command(filepath.Join("..", "..", "hack", "ldflags.sh"))
		cmd.Env = append(os.Environ(), "VERSION="+stampVersion, "GIT_COMMIT="+stampCommit, "BUILD_DATE="+stampDate)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		ldflags, err := cmd.Output()
		if err != nil {
			stamped.err = errors.New("hack/ldflags.sh: " + err.Error() + ": " + stderr.String())
			return
		}
		if stamped.dir, err = os.MkdirTemp("", "lockwarden-manager-test-"); err != nil {
			stamped.err = err
			return
		}
		stamped.path = filepath.Join(stamped.dir, "manager")
		build := exec.Command("go", "build", "-trimpath", "-ldflags", strings.TrimSpace(string(ldflags)), "-o", stamped.path, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			stamped.err = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if stamped.err != nil {
		t.Fatal(stamped.err)
	}
	return stamped.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if stamped.dir != "" {
		_ = os.RemoveAll(stamped.dir)
	}
	os.Exit(code)
}

// runManager runs the manager binary with args and a clean environment (no POD_NAMESPACE, no
// KUBECONFIG), and returns its exit code, stdout and stderr. It fails the test if the manager is
// still running after a minute.
func runManager(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, stampedManager(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("manager %s still ran after a minute; stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running the manager: %v", err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func TestVersionFlag(t *testing.T) {
	g := NewWithT(t)
	// --version answers whatever else the command line holds, even timings that would stop a start.
	o, err := parseFlags([]string{"--version", "--leader-election-retry-period=0s"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.printVersion).To(BeTrue())

	code, stdout, stderr := runManager(t, "--version")
	g.Expect(code).To(Equal(0), "stderr: %s", stderr)
	g.Expect(stdout).To(Equal("lockwarden manager " + stampVersion + " (commit " + stampCommit + ", built " + stampDate + ", " +
		runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"))
	g.Expect(stderr).To(BeEmpty())
}

// The manager run outside a cluster against an API server that lacks its namespace stops at
// once, naming the namespace and the flag that sets it, instead of starting and leaving every
// claim Pending.
func TestStartFailsWithoutItsNamespace(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set, so there is no kube-apiserver to test against. " +
			"Run: export KUBEBUILDER_ASSETS=$(hack/k8s-binaries.sh envtest-dir)   (or use make test-unit)")
	}
	env := &envtest.Environment{}
	adminCfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(adminCfg, client.Options{Scheme: newScheme()})
	if err != nil {
		t.Fatal(err)
	}
	const existing = "locks-here"
	if err := admin.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: existing}}); err != nil {
		t.Fatal(err)
	}
	// Only what the check needs: no metrics server, no probes.
	base := []string{"--kubeconfig", kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0"}

	t.Run("the default namespace", func(t *testing.T) {
		g := NewWithT(t)
		// lockwarden-system, unless these tests run in a pod.
		t.Setenv("POD_NAMESPACE", "")
		want := defaultNamespace()
		code, _, stderr := runManager(t, base...)
		g.Expect(code).To(Equal(1))
		// The error is a field of a JSON log line, its quotes escaped.
		g.Expect(stderr).To(ContainSubstring(`namespace \"` + want + `\" does not exist (--secret-namespace: `))
		g.Expect(stderr).To(ContainSubstring("create it with `kubectl create namespace " + want + "`, or name an existing namespace with --secret-namespace"))
		g.Expect(stderr).NotTo(ContainSubstring("Starting manager"))
	})
	t.Run("the leader election namespace", func(t *testing.T) {
		g := NewWithT(t)
		code, _, stderr := runManager(t, append(base, "--secret-namespace="+existing, "--leader-elect", "--leader-election-namespace=lockwarden-election")...)
		g.Expect(code).To(Equal(1))
		g.Expect(stderr).To(ContainSubstring(`namespace \"lockwarden-election\" does not exist (--leader-election-namespace: the leader election Lease)`))
	})

	// The check itself, in process: which namespaces it looks at, and what does not stop a start.
	nobodyCfg := rest.CopyConfig(adminCfg)
	nobodyCfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	nobody, err := client.New(nobodyCfg, client.Options{Scheme: newScheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		reader client.Reader
		args   []string
		want   string // empty: the check passes
	}{
		{"existing", admin, []string{"--secret-namespace=" + existing}, ""},
		{"both existing", admin, []string{"--secret-namespace=" + existing, "--leader-elect", "--leader-election-namespace=" + existing}, ""},
		{"missing", admin, []string{"--secret-namespace=nowhere"}, `namespace "nowhere" does not exist (--secret-namespace: `},
		{"a name that is a prefix of an existing one", admin, []string{"--secret-namespace=locks"}, `namespace "locks" does not exist`},
		{"election namespace unused without --leader-elect", admin,
			[]string{"--secret-namespace=" + existing, "--leader-election-namespace=nowhere"}, ""},
		{"election namespace missing", admin,
			[]string{"--secret-namespace=" + existing, "--leader-elect", "--leader-election-namespace=nowhere"}, `namespace "nowhere" does not exist (--leader-election-namespace: `},
		{"election namespace defaults to the secret namespace", admin,
			[]string{"--secret-namespace=nowhere", "--leader-elect"}, `namespace "nowhere" does not exist (--secret-namespace: `},
		{"a user who may not list namespaces starts anyway", nobody, []string{"--secret-namespace=nowhere"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := parseFlags(tc.args)
			g.Expect(err).NotTo(HaveOccurred())
			err = checkNamespaces(logr.NewContext(t.Context(), testr.New(t)), tc.reader, o)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(HavePrefix(tc.want)))
			}
		})
	}
}
