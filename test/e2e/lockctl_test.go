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
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// lockctl as an init container would run it: the real binary with its pod's downward-API
// environment, against the local cluster, with real pods scheduled onto kwok nodes.
var _ = Describe("lockctl on the local cluster", Ordered, func() {
	var lockctlBin string
	BeforeAll(func() {
		startManager()
		lockctlBin = filepath.Join(GinkgoT().TempDir(), "lockctl")
		build := exec.Command("go", "build", "-o", lockctlBin, "./cmd/lockctl")
		build.Dir = repoRoot
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "go build ./cmd/lockctl: %s", out)
	})

	// lockctl starts lockctl for pod (nil: no pod environment) with args.
	lockctl := func(pod *corev1.Pod, args ...string) *exec.Cmd {
		cmd := exec.Command(lockctlBin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		if pod != nil {
			cmd.Env = append(cmd.Env, "POD_NAME="+pod.Name, "POD_NAMESPACE="+pod.Namespace, "POD_UID="+string(pod.UID))
		}
		return cmd
	}
	// exitCode runs cmd and returns its exit code and standard error.
	exitCode := func(cmd *exec.Cmd) (int, string) {
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), stderr.String()
		}
		Expect(err).NotTo(HaveOccurred())
		return 0, stderr.String()
	}
	// runningPod creates a pod and waits until kwok runs it on a node.
	runningPod := func(ns, name string) *corev1.Pod {
		GinkgoHelper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		Expect(k8sClient.Create(ctx(), p)).To(Succeed())
		Eventually(func(g Gomega) corev1.PodPhase {
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(p), p)).To(Succeed())
			return p.Status.Phase
		}).WithTimeout(60 * time.Second).Should(Equal(corev1.PodRunning))
		return p
	}
	newLock := func(ns, name string) {
		GinkgoHelper()
		Expect(k8sClient.Create(ctx(), &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	}

	It("acquires in order for three pods with rising tokens, re-attaches after a restart, and times out with code 3", func() {
		ns := newNamespace()
		newLock(ns, "migrate")
		dir := GinkgoT().TempDir()
		pods := []*corev1.Pod{runningPod(ns, "web-0"), runningPod(ns, "web-1"), runningPod(ns, "web-2")}
		var waiters []*exec.Cmd
		for i, p := range pods {
			cmd := lockctl(p, "acquire", "--lock", "migrate", "--token-file", filepath.Join(dir, p.Name))
			cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
			Expect(cmd.Start()).To(Succeed())
			waiters = append(waiters, cmd)
			if i == 0 {
				Expect(cmd.Wait()).To(Succeed(), "the first pod gets the free lock")
			}
			time.Sleep(200 * time.Millisecond) // queue in this order
		}

		By("re-attaching when the holder's init container runs again")
		out, err := lockctl(pods[0], "acquire", "--lock", "migrate", "--token-file", filepath.Join(dir, "web-0-again")).Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("reattached=true"))
		Expect(os.ReadFile(filepath.Join(dir, "web-0-again"))).To(Equal(must(os.ReadFile(filepath.Join(dir, "web-0")))))

		By("timing out with code 3 while the lock is held")
		late := runningPod(ns, "late")
		code, stderr := exitCode(lockctl(late, "acquire", "--lock", "migrate", "--timeout", "2s"))
		Expect(code).To(Equal(3), stderr)

		By("handing the lock on as each holder pod is deleted")
		last := int64(0)
		for i, p := range pods {
			if i > 0 {
				Expect(waiters[i].Wait()).To(Succeed())
			}
			token, err := strconv.ParseInt(string(must(os.ReadFile(filepath.Join(dir, p.Name)))), 10, 64)
			Expect(err).NotTo(HaveOccurred())
			Expect(token).To(BeNumerically(">", last))
			last = token
			kubectl("delete", "pod", "-n", ns, p.Name, "--grace-period=0", "--force", "--wait=false")
		}
	})

	It("fails with code 4 and one line for a missing lock, a missing pod and a forbidden service account", func() {
		ns := newNamespace()
		p := runningPod(ns, "web-0")
		code, stderr := exitCode(lockctl(p, "acquire", "--lock", "nope"))
		Expect(code).To(Equal(4))
		Expect(strings.Count(strings.TrimSpace(stderr), "\n")).To(BeZero(), "one line: %s", stderr)
		Expect(stderr).To(ContainSubstring(`"nope"`))

		newLock(ns, "migrate")
		ghost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost", UID: "00000000-0000-0000-0000-000000000000"}}
		code, stderr = exitCode(lockctl(ghost, "acquire", "--lock", "migrate"))
		Expect(code).To(Equal(4), stderr)
		Expect(stderr).To(ContainSubstring("ghost"))

		code, stderr = exitCode(lockctl(p, "acquire", "--lock", "migrate", "--as", "system:serviceaccount:"+ns+":default"))
		Expect(code).To(Equal(4), stderr)
		Expect(stderr).To(ContainSubstring("forbidden"))
	})

	It("runs a command under the lock, returns its exit code and releases", func() {
		ns := newNamespace()
		newLock(ns, "report")
		code, stderr := exitCode(lockctl(nil, "run", "--lock", "report", "--namespace", ns, "--",
			"sh", "-c", `test -n "$LOCKWARDEN_FENCING_TOKEN" && exit 7`))
		Expect(code).To(Equal(7), stderr)
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "report"}, l)).To(Succeed())
			g.Expect(l.Status.Holders).To(BeEmpty())
			list := &locksv1alpha1.LockClaimList{}
			g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}).Should(Succeed())
	})
})

func must[T any](v T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return v
}
