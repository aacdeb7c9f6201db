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
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// pluginPath returns a PATH whose first directory holds lockctl installed as the kubectl plugin
// kubectl-lock (a symlink, as `make kubectl-plugin` or krew would install it: only the name
// differs) and kubectl's completion hook for it.
func pluginPath() string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	Expect(os.Symlink(lockctlBin, filepath.Join(dir, "kubectl-lock"))).To(Succeed())
	hook := "#!/bin/sh\nexec kubectl-lock __complete \"$@\"\n"
	Expect(os.WriteFile(filepath.Join(dir, "kubectl_complete-lock"), []byte(hook), 0o755)).To(Succeed())
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// kubectl runs the kubectl of the envtest assets with path and env to completion and returns its
// exit code, stdout and stderr.
func kubectl(path string, env []string, args ...string) (int, string, string) {
	GinkgoHelper()
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	Expect(bin).To(BeAnExistingFile(), "kubectl is one of the envtest assets (KUBEBUILDER_ASSETS)")
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + GinkgoT().TempDir(), "KUBECONFIG=" + kubeconfig}, env...)
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	Eventually(session, 60*time.Second).Should(gexec.Exit())
	return session.ExitCode(), string(session.Out.Contents()), string(session.Err.Contents())
}

var _ = Describe("kubectl lock", func() {
	It("is lockctl as a kubectl plugin: the same commands and exit codes, its own name in help and errors", func() {
		ns := newNamespace()
		newLock(ns, "db-migrate")
		p := newPod(ns, "web-1")
		path := pluginPath()

		code, stdout, stderr := kubectl(path, nil, "lock", "--help")
		Expect(code).To(Equal(0), stderr)
		Expect(stdout).To(ContainSubstring("kubectl lock [command]"))

		code, stdout, stderr = kubectl(path, podEnv(p), "lock", "acquire", "--lock", "db-migrate")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(HavePrefix(`acquired lock "db-migrate" in namespace "` + ns + `": holder=web-1 token=`))

		code, stdout, stderr = kubectl(path, nil, "lock", "status", "db-migrate", "-n", ns)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(MatchRegexp(`(?m)^  1\. pod web-1 \(claim `))

		// run waits for the lock; with --timeout it gives up with exit code 124, and says how to
		// look, in kubectl's words.
		code, _, stderr = kubectl(path, nil, "lock", "run", "--lock", "db-migrate", "-n", ns, "--timeout", "1s", "--", "true")
		Expect(code).To(Equal(runTimedOut))
		Expect(oneLine(stderr)).To(And(HavePrefix(`kubectl lock: timed out waiting for lock "db-migrate"`),
			HaveSuffix("; raise --timeout, or see who holds the lock: kubectl lock status db-migrate -n "+ns)))

		code, _, stderr = kubectl(path, nil, "lock", "acquire")
		Expect(code).To(Equal(exitUsage))
		Expect(oneLine(stderr)).To(Equal("kubectl lock: --lock is required; see kubectl lock acquire -h"))

		code, stdout, stderr = kubectl(path, podEnv(p), "lock", "release", "--lock", "db-migrate")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(HavePrefix(`released claim "`))
		code, _, stderr = kubectl(path, nil, "lock", "run", "--lock", "db-migrate", "-n", ns, "--", "sh", "-c", "exit 7")
		Expect(code).To(Equal(7), stderr)
	})

	It("completes lock and claim names, for kubectl through kubectl_complete-lock", func() {
		ns := newNamespace()
		newLock(ns, "db-migrate")
		newLock(ns, "report")
		Expect(k8sClient.Create(ctx(), &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "maintenance-window"},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "report"}})).To(Succeed())

		code, stdout, stderr := run(nil, "__complete", "status", "-n", ns, "")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(Equal("db-migrate\nreport\n:4\n"))
		code, stdout, stderr = run(nil, "__complete", "run", "-n", ns, "--lock", "d")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(Equal("db-migrate\n:4\n"))
		code, stdout, stderr = run(nil, "__complete", "wait", "-n", ns, "")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(Equal("maintenance-window\n:4\n"))

		code, stdout, stderr = kubectl(pluginPath(), nil, "__complete", "lock", "release", "-n", ns, "m")
		Expect(code).To(Equal(0), stderr)
		Expect(stdout).To(HavePrefix("maintenance-window\n"))
	})
})

var _ = Describe("The connection flags", func() {
	// A kubeconfig whose current context points at a closed port: only the flags can make a
	// command reach the API server.
	brokenKubeconfig := func(ns string) string {
		GinkgoHelper()
		kc, err := clientcmd.LoadFromFile(kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		good := kc.Clusters["envtest"]
		kc.Clusters["closed"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthorityData: good.CertificateAuthorityData}
		kc.Contexts["closed"] = &clientcmdapi.Context{Cluster: "closed", AuthInfo: "admin"}
		kc.Contexts["team"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: ns}
		kc.CurrentContext = "closed"
		path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
		return path
	}

	It("honour --kubeconfig, --context and its namespace, -n/--namespace over it, and --server", func() {
		ns := newNamespace()
		newLock(ns, "db-migrate")
		kc := brokenKubeconfig(ns)
		host := strings.TrimSuffix(controlPlane.Config.Host, "/")

		// The current context cannot be reached.
		code, _, stderr := run(nil, "status", "--kubeconfig", kc)
		Expect(code).To(Equal(exitError))
		Expect(oneLine(stderr)).To(ContainSubstring("127.0.0.1:1"))

		// --context: another server, and the context's namespace.
		code, stdout, stderr := run(nil, "status", "--kubeconfig", kc, "--context", "team")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(MatchRegexp(`(?m)^db-migrate\s+0/1\s+<none>\s`))
		code, stdout, stderr = run([]string{"KUBECONFIG=" + kc}, "status", "db-migrate", "--context=team", "-o", "json")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(ContainSubstring(`"namespace": "` + ns + `"`))

		// -n and --namespace win over the context's namespace (and POD_NAMESPACE).
		other := newNamespace()
		code, stdout, stderr = run(nil, "status", "--kubeconfig", kc, "--context", "team", "-n", other)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(Equal("No DistributedLocks in namespace " + other + ".\n"))
		code, stdout, stderr = run([]string{"POD_NAMESPACE=" + ns}, "status", "--kubeconfig", kc, "--context", "team", "--namespace", other)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(Equal("No DistributedLocks in namespace " + other + ".\n"))

		// --server: the current context's credentials, another address.
		code, stdout, stderr = run(nil, "status", "--kubeconfig", kc, "--server", host, "-n", ns)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(MatchRegexp(`(?m)^db-migrate\s`))

		// Single-dash long flags, as lockctl's Go flags took them.
		code, stdout, stderr = run(nil, "status", "-kubeconfig", kc, "-context=team")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(MatchRegexp(`(?m)^db-migrate\s`))
	})

	It("say what is missing without a kubeconfig outside a pod", func() {
		cmd := exec.Command(lockctlBin, "status")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + GinkgoT().TempDir()}
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session, 30*time.Second).Should(gexec.Exit(exitError))
		Expect(oneLine(string(session.Err.Contents()))).To(HavePrefix("lockctl: no Kubernetes config (run in a pod, or set --kubeconfig or KUBECONFIG)"))
	})
})
