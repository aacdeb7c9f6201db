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
	"fmt"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The annotation alone is enough: the MutatingAdmissionPolicy of config/admission (and of the
// chart, whose spec is generated from it) adds the scheduling gate to pods created with the lock
// annotation, so a pod template that carries only the annotation is scheduled one pod at a time.
var _ = Describe("Pods that ask for a lock by annotation alone, gated by the admission policy", Ordered, func() {
	admission := filepath.Join(repoRoot, "config", "admission")

	BeforeAll(func() {
		startManager()
		By("installing config/admission, as make deploy does")
		kubectl("apply", "--server-side", "-k", admission)
		DeferCleanup(func() { _, _ = tryKubectl("delete", "--ignore-not-found", "-k", admission) })
	})

	It("never has two of a Deployment's pods on nodes at once, and hands the lock on as pods are deleted", func() {
		ns := newNamespace()
		Eventually(dryRunGates).WithArguments(ns).WithTimeout(30*time.Second).
			Should(ConsistOf(HaveField("Name", locksv1alpha1.PodSchedulingGate)), "the API server has loaded the policy")

		_, err := kubectlStdin(`
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
metadata: {name: writer}
spec: {leaseDurationSeconds: 30}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: writer}
spec:
  replicas: 3
  strategy: {type: Recreate}
  selector: {matchLabels: {app: writer}}
  template:
    metadata:
      labels: {app: writer}
      annotations: {locks.lockwarden.io/lock: writer}
    spec:
      containers: [{name: app, image: busybox:1.37, command: [sleep, "3600"]}]
`, "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		selector := client.MatchingLabels{"app": "writer"}
		tmpl := kubectl("get", "-n", ns, "deployment/writer", "-o", "jsonpath={.spec.template.spec.schedulingGates}")
		Expect(tmpl).To(BeEmpty(), "no gate written by hand")

		// Two pods of the Deployment on nodes at once, terminating ones included (their
		// containers may still run), is what the lock is there to prevent.
		watch := watchPods(ns, func(pods []corev1.Pod) string {
			var bound []string
			for _, p := range pods {
				if p.Labels["app"] == "writer" && p.Spec.NodeName != "" {
					bound = append(bound, p.Name+" on "+p.Spec.NodeName)
				}
			}
			if len(bound) > 1 {
				return "two pods were bound to nodes at once: " + strings.Join(bound, ", ")
			}
			return ""
		})
		DeferCleanup(watch.halt)

		var last int64
		var previous []string
		for round := range 3 {
			By(fmt.Sprintf("round %d: one pod holds the lock and runs, the others wait gated and unscheduled", round))
			holder := lockHolder(ns, selector, previous...)
			Expect(tokenOf(holder)).To(BeNumerically(">", last))
			last = tokenOf(holder)
			// Every other pod is gated, which it can only have been from its creation (a gate can
			// be set at creation only), and the controller lifted the holder's gate.
			Eventually(func(g Gomega) {
				pods := podsOf(g, ns, selector)
				g.Expect(pods).To(HaveLen(3))
				for _, p := range pods {
					if p.Name != holder.Name {
						g.Expect(p.Spec.SchedulingGates).To(ConsistOf(HaveField("Name", locksv1alpha1.PodSchedulingGate)), "pod %s", p.Name)
						g.Expect(p.Spec.NodeName).To(BeEmpty(), "pod %s", p.Name)
					}
				}
			}).WithTimeout(30 * time.Second).Should(Succeed())
			Eventually(watch.sawOnNode).WithArguments(holder.Name).Should(BeTrue(), "the watch looked while pod %s held the lock", holder.Name)
			Eventually(eventNotes).WithArguments(ns, holder.Name, "LockAcquired").
				Should(ContainElement(ContainSubstring("scheduling gate lifted")), "pod %s was gated", holder.Name)

			kubectl("delete", "pod", "-n", ns, holder.Name, "--wait=false")
			Eventually(func(g Gomega) {
				for _, p := range podsOf(g, ns, selector) {
					g.Expect(p.Name).NotTo(Equal(holder.Name))
				}
			}).WithTimeout(60 * time.Second).Should(Succeed())
			previous = append(previous, holder.Name)
		}
		watch.stop()
	})

	It("leaves pods alone in namespaces that admissionPolicy.namespaceSelector leaves out", func() {
		By("replacing config/admission with the chart's policy, limited to namespaces not labelled e2e.lockwarden.io/gate=off")
		kubectl("delete", "-k", admission)
		rendered := newHelm().mustRun("template", "lockwarden", filepath.Join(repoRoot, "charts", "lockwarden"),
			"--show-only", "templates/admissionpolicy.yaml", "--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
			"--set", "admissionPolicy.namespaceSelector.matchExpressions[0].key=e2e.lockwarden.io/gate",
			"--set", "admissionPolicy.namespaceSelector.matchExpressions[0].operator=NotIn",
			"--set", "admissionPolicy.namespaceSelector.matchExpressions[0].values[0]=off")
		Expect(rendered).To(ContainSubstring("kind: MutatingAdmissionPolicyBinding"))
		_, err := kubectlStdin(rendered, "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _, _ = kubectlStdin(rendered, "delete", "--ignore-not-found", "-f", "-") })

		gatedNS, freeNS := newNamespace(), newNamespace()
		kubectl("label", "namespace", freeNS, "e2e.lockwarden.io/gate=off")
		Eventually(dryRunGates).WithArguments(gatedNS).WithTimeout(30*time.Second).
			Should(ConsistOf(HaveField("Name", locksv1alpha1.PodSchedulingGate)), "the API server has loaded the chart's policy")
		// The binding of config/admission, which gated every namespace, may take as long to go.
		Eventually(dryRunGates).WithArguments(freeNS).WithTimeout(30 * time.Second).Should(BeEmpty())

		By("an annotated pod in the excluded namespace is created ungated: it runs at once, and still gets its claim and token")
		_, err = kubectlStdin(`
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
metadata: {name: db}
---
apiVersion: v1
kind: Pod
metadata:
  name: free
  annotations: {locks.lockwarden.io/lock: db}
spec:
  containers: [{name: app, image: busybox:1.37, command: [sleep, "3600"]}]
`, "apply", "-n", freeNS, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		free := &corev1.Pod{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: freeNS, Name: "free"}, free)).To(Succeed())
		Expect(free.Spec.SchedulingGates).To(BeEmpty())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(free), free)).To(Succeed())
			g.Expect(free.Spec.NodeName).NotTo(BeEmpty())
			g.Expect(free.Annotations).To(HaveKey(locksv1alpha1.PodFencingTokenAnnotation))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		By("the same pod in a namespace the selector matches is gated")
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: gatedNS, Name: "gated", Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "db"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.37"}}},
		}
		Expect(k8sClient.Create(ctx(), p)).To(Succeed())
		Expect(gated(p)).To(BeTrue(), "gates: %v", p.Spec.SchedulingGates)
	})
})

// dryRunGates creates, as a server-side dry run, a pod in ns that asks for a lock by annotation
// alone, and returns the scheduling gates it came back with: admission ran, nothing was stored.
func dryRunGates(ns string) ([]corev1.PodSchedulingGate, error) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dry-run", Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "any"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.37"}}},
	}
	if err := k8sClient.Create(ctx(), p, client.DryRunAll); err != nil {
		return nil, err
	}
	return p.Spec.SchedulingGates, nil
}

// eventNotes returns the notes of the events with the given reason about the named pod.
func eventNotes(ns, pod, reason string) ([]string, error) {
	list := &eventsv1.EventList{}
	if err := k8sClient.List(ctx(), list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Pod" && e.Regarding.Name == pod && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes, nil
}
