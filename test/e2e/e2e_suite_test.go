//go:build e2e

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

// Package e2e runs lockwarden against a real cluster named by KUBECONFIG: the local containerless
// cluster (make test-e2e starts it), or kind for users with Docker. It is built only with the e2e
// tag, so that `go test ./...` never runs it without a cluster.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

var (
	// repoRoot is the repository's top directory; the suite runs from test/e2e.
	repoRoot = filepath.Join("..", "..")
	// kubeconfig is the cluster under test.
	kubeconfig string
	// k8sClient talks to that cluster as its admin.
	k8sClient client.WithWatch
	// binDir holds binaries the suite builds (the manager) for this run.
	binDir string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "lockwarden e2e suite")
}

var _ = BeforeSuite(func() {
	kubeconfig = os.Getenv("KUBECONFIG")
	Expect(kubeconfig).NotTo(BeEmpty(), "KUBECONFIG must name the cluster under test; run make test-e2e")
	_, err := exec.LookPath("kubectl")
	Expect(err).NotTo(HaveOccurred(), "kubectl must be on PATH; make test-e2e puts the built one there")

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(locksv1alpha1.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed()) // the workload kinds' CRDs (workloads_test.go)
	k8sClient, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	By("installing the CRDs")
	kubectl("apply", "--server-side", "-k", filepath.Join(repoRoot, "config", "crd"))
	kubectl("wait", "--for=condition=Established", "--timeout=60s",
		"crd/lockbackends.locks.lockwarden.io", "crd/distributedlocks.locks.lockwarden.io", "crd/lockclaims.locks.lockwarden.io")

	By("building the manager")
	binDir = GinkgoT().TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(binDir, "manager"), "./cmd/manager")
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/manager: %s", out)
})

// kubectl runs kubectl against the cluster under test and returns its standard output; a
// non-zero exit fails the test with what kubectl printed.
func kubectl(args ...string) string {
	GinkgoHelper()
	out, err := tryKubectl(args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %s", strings.Join(args, " "))
	return out
}

// tryKubectl runs kubectl and returns its standard output, or an error carrying its standard
// error.
func tryKubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}
