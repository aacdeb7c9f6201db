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
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// startManager runs the manager binary against the cluster until the spec (or container) ends.
func startManager() {
	GinkgoHelper()
	ns := newNamespace()
	cmd := exec.Command(filepath.Join(binDir, "manager"), "--kubeconfig", kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", freeAddr(),
		"--leader-elect", "--leader-election-namespace", ns, "--secret-namespace", ns)
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// podsOf lists the pods of a namespace with the given label selector.
func podsOf(g Gomega, ns string, labels client.MatchingLabels) []corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns), labels)).To(Succeed())
	return list.Items
}

func gated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == locksv1alpha1.PodSchedulingGate
	})
}

var _ = Describe("Pods that ask for a lock by annotation and scheduling gate", Ordered, func() {
	BeforeAll(startManager)

	It("are scheduled one at a time, each after its predecessor is deleted, with rising tokens", func() {
		ns := newBareNamespace()
		By("applying the samples as a user does: the RBAC that lets the pods' account claim, then the Deployment")
		kubectl("apply", "-n", ns, "-f", filepath.Join(repoRoot, "config", "samples", "pods", "annotation-rbac.yaml"))
		kubectl("apply", "-n", ns, "-f", filepath.Join(repoRoot, "config", "samples", "pods", "gated-deployment.yaml"))
		selector := client.MatchingLabels{"app": "report-writer"}

		// holder waits until exactly one pod is ungated and running on a node, the rest of the
		// three replicas gated, and returns the running one.
		holder := func() corev1.Pod {
			GinkgoHelper()
			var running corev1.Pod
			Eventually(func(g Gomega) {
				pods := podsOf(g, ns, selector)
				var ungated []corev1.Pod
				for _, p := range pods {
					if p.DeletionTimestamp != nil {
						continue
					}
					if !gated(&p) {
						ungated = append(ungated, p)
					} else {
						g.Expect(p.Spec.NodeName).To(BeEmpty(), "a gated pod is not scheduled")
					}
				}
				g.Expect(ungated).To(HaveLen(1), "exactly one pod holds the lock")
				g.Expect(ungated[0].Spec.NodeName).NotTo(BeEmpty(), "the holder is scheduled")
				g.Expect(ungated[0].Status.Phase).To(Equal(corev1.PodRunning))
				running = ungated[0]
			}).WithTimeout(60 * time.Second).Should(Succeed())
			return running
		}

		var last int64
		for round := range 3 {
			p := holder()
			token, err := strconv.ParseInt(p.Annotations[locksv1alpha1.PodFencingTokenAnnotation], 10, 64)
			Expect(err).NotTo(HaveOccurred(), "pod %s carries its token", p.Name)
			Expect(token).To(BeNumerically(">", last), "round %d", round)
			Expect(p.Annotations[locksv1alpha1.PodHolderAnnotation]).To(Equal(string(p.UID)))
			last = token
			// Nobody else is ungated while the holder lives.
			Consistently(func(g Gomega) int {
				n := 0
				for _, q := range podsOf(g, ns, selector) {
					if !gated(&q) {
						n++
					}
				}
				return n
			}).WithTimeout(2 * time.Second).Should(Equal(1))
			kubectl("delete", "pod", "-n", ns, p.Name, "--grace-period=0", "--force", "--wait=false")
		}
	})

	It("let a gated Job's pod run, complete and hand the lock on", func() {
		ns := newNamespace()
		kubectl("apply", "-n", ns, "-f", filepath.Join(repoRoot, "config", "samples", "pods", "gated-job.yaml"))
		_, err := kubectlStdin(`
apiVersion: batch/v1
kind: Job
metadata: {name: reindex-again}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {locks.lockwarden.io/lock: search-index}
    spec:
      restartPolicy: Never
      schedulingGates: [{name: locks.lockwarden.io/lock}]
      containers: [{name: reindex, image: busybox:1.37}]
`, "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		kubectl("wait", "-n", ns, "--for=condition=Complete", "--timeout=90s", "job/reindex", "job/reindex-again")

		var tokens []int64
		for _, job := range []string{"reindex", "reindex-again"} {
			pods := podsOf(Default, ns, client.MatchingLabels{"job-name": job})
			Expect(pods).To(HaveLen(1))
			token, err := strconv.ParseInt(pods[0].Annotations[locksv1alpha1.PodFencingTokenAnnotation], 10, 64)
			Expect(err).NotTo(HaveOccurred(), "job %s's pod carries its token", job)
			tokens = append(tokens, token)
			claim := &locksv1alpha1.LockClaim{}
			Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: lockclient.ClaimName(pods[0].Name, pods[0].UID, "search-index")}, claim)).To(Succeed())
			Expect(claim.Status.Phase).To(Equal(locksv1alpha1.ClaimReleased), "a completed pod hands the lock on")
		}
		Expect(tokens[0]).NotTo(Equal(tokens[1]))
		// The last release and the lock's empty holder are writes to two objects.
		Eventually(tryKubectl).WithArguments("get", "-n", ns, "dlock/search-index", "-o", "jsonpath={.status.holders}").
			WithTimeout(30 * time.Second).Should(BeEmpty())
	})
})
