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

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/internal/testutil/syncbuf"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
)

// helmCLI runs the helm binary on PATH (make test-e2e puts the one built into the cache there)
// against the cluster under test, with its caches and config in a directory of its own.
type helmCLI struct {
	home string
}

func newHelm() *helmCLI {
	GinkgoHelper()
	_, err := exec.LookPath("helm")
	Expect(err).NotTo(HaveOccurred(), "helm must be on PATH; make test-e2e puts the one hack/k8s-binaries.sh builds there")
	return &helmCLI{home: GinkgoT().TempDir()}
}

// run returns helm's standard output, or an error carrying everything it printed.
func (h *helmCLI) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "helm", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+h.home, "HELM_CONFIG_HOME="+h.home, "HELM_DATA_HOME="+h.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func (h *helmCLI) mustRun(args ...string) string {
	GinkgoHelper()
	out, err := h.run(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// impersonatingKubeconfig writes a copy of the suite's kubeconfig whose user acts as the given
// service account: the API server authorizes every request as that account, so a process using it
// has exactly the permissions RBAC gives the account. (The admin user may impersonate.)
func impersonatingKubeconfig(namespace, serviceAccount string) string {
	GinkgoHelper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	for _, user := range cfg.AuthInfos {
		user.Impersonate = fmt.Sprintf("system:serviceaccount:%s:%s", namespace, serviceAccount)
	}
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig-as-"+serviceAccount)
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// managerProcess is a manager binary running against the cluster under test.
type managerProcess struct {
	cmd *exec.Cmd
	// metricsAddr serves metrics as the chart's pods do: HTTPS, for tokens allowed to get /metrics.
	metricsAddr string
	probeAddr   string
	// output holds what the manager logged, to look for authorization failures.
	output *syncbuf.Buffer
}

// startManagerAs runs the manager binary as a separate process with the given kubeconfig, with
// the flags the chart passes (leader election and Secrets in the release namespace, metrics over
// HTTPS with a self-signed certificate), until stop.
// Only one manager may run against the cluster at a time, or two leaders would grant the same
// locks: every spec or container that starts one stops it when it ends, and Ginkgo runs specs one
// after the other.
func startManagerAs(kubeconfigPath, namespace string) *managerProcess {
	GinkgoHelper()
	m := &managerProcess{metricsAddr: freeAddr(), probeAddr: freeAddr(), output: &syncbuf.Buffer{}}
	m.cmd = exec.Command(filepath.Join(binDir, "manager"), "--kubeconfig", kubeconfigPath,
		"--metrics-bind-address", m.metricsAddr, "--health-probe-bind-address", m.probeAddr,
		"--leader-elect", "--leader-election-namespace", namespace, "--secret-namespace", namespace)
	m.cmd.Stdout = io.MultiWriter(GinkgoWriter, m.output)
	m.cmd.Stderr = m.cmd.Stdout
	Expect(m.cmd.Start()).To(Succeed())
	Eventually(httpGet).WithArguments("http://" + m.probeAddr + "/readyz").
		WithTimeout(30 * time.Second).Should(Equal("ok"))
	return m
}

// stop kills the manager and waits for it to exit.
func (m *managerProcess) stop() {
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
}
