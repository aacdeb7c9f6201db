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
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
)

// The lockctl suite builds lockctl and runs it as a real process against a real API server
// (envtest) with the real controller running in this process, as an init container would run it:
// with the downward-API environment of a pod (here, Pod objects created by hand: envtest has no
// kubelet) and a kubeconfig.

const controllerNamespace = "lockwarden-system"

var (
	controlPlane *lockenv.ControlPlane
	manager      *lockenv.Manager
	k8sClient    client.Client
	lockctlBin   string
	kubeconfig   string
)

func TestLockctlProcesses(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "lockctl suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	dir := GinkgoT().TempDir()
	lockctlBin = filepath.Join(dir, "lockctl")
	build := exec.Command("go", "build", "-o", lockctlBin, ".")
	build.Stdout, build.Stderr = GinkgoWriter, GinkgoWriter
	Expect(build.Run()).To(Succeed(), "building lockctl")

	var err error
	controlPlane, err = lockenv.StartControlPlane(filepath.Join("..", ".."), controllerNamespace)
	Expect(err).NotTo(HaveOccurred())
	k8sClient = controlPlane.Client
	kubeconfig = writeKubeconfig(controlPlane.Config, filepath.Join(dir, "kubeconfig"))
	manager, err = lockenv.StartManager(controlPlane.Config, lockenv.ManagerOptions{Namespace: controllerNamespace, ProbeInterval: time.Second})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	gexec.KillAndWait()
	if manager != nil {
		Expect(manager.Stop()).To(Succeed())
	}
	if controlPlane != nil {
		Expect(controlPlane.Stop()).To(Succeed())
	}
})

// writeKubeconfig writes a kubeconfig for the envtest API server's admin user.
func writeKubeconfig(cfg *rest.Config, path string) string {
	GinkgoHelper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	return path
}

func ctx() context.Context { return context.Background() }

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lockctl-"}}
	Expect(k8sClient.Create(ctx(), ns)).To(Succeed())
	return ns.Name
}

func newLock(ns, name string) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx(), &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: 6}})).To(Succeed())
}

// newPod creates a Pod bound to a fictitious node and marks it Running.
func newPod(ns, name string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	Expect(k8sClient.Create(ctx(), p)).To(Succeed())
	p.Status.Phase = corev1.PodRunning
	Expect(k8sClient.Status().Update(ctx(), p)).To(Succeed())
	return p
}

// podEnv is the downward-API environment of a pod's container.
func podEnv(p *corev1.Pod) []string {
	return []string{"POD_NAME=" + p.Name, "POD_NAMESPACE=" + p.Namespace, "POD_UID=" + string(p.UID)}
}

// lockctl returns a lockctl command with a clean environment: the kubeconfig, PATH and env.
func lockctl(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(lockctlBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + GinkgoT().TempDir(), "KUBECONFIG=" + kubeconfig}, env...)
	return cmd
}

// process is a lockctl process running in the background.
type process struct{ *gexec.Session }

func start(env []string, args ...string) *process {
	GinkgoHelper()
	session, err := gexec.Start(lockctl(env, args...), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	return &process{session}
}

// wait waits for the process to exit and returns its exit code.
func (p *process) wait(timeout time.Duration) int {
	GinkgoHelper()
	Eventually(p.Session, timeout).Should(gexec.Exit(), "lockctl did not exit; stderr: %s", p.Err.Contents())
	return p.ExitCode()
}

func (p *process) stdout() string { return string(p.Out.Contents()) }
func (p *process) stderr() string { return string(p.Err.Contents()) }

// run runs lockctl to completion and returns its exit code, stdout and stderr.
func run(env []string, args ...string) (int, string, string) {
	GinkgoHelper()
	p := start(env, args...)
	code := p.wait(60 * time.Second)
	return code, p.stdout(), p.stderr()
}

// readToken reads a token file.
func readToken(path string) int64 {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	token, err := strconv.ParseInt(string(b), 10, 64)
	Expect(err).NotTo(HaveOccurred(), "token file holds %q", b)
	return token
}

// claims lists the claims of a namespace.
func claims(ns string) []locksv1alpha1.LockClaim {
	GinkgoHelper()
	list := &locksv1alpha1.LockClaimList{}
	Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// oneLine asserts that s is exactly one line and returns it without the newline.
func oneLine(s string) string {
	GinkgoHelper()
	Expect(strings.Count(s, "\n")).To(Equal(1), "want one line on stderr, got %q", s)
	return strings.TrimSuffix(s, "\n")
}
