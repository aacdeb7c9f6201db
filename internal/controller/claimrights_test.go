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

package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/controller"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

// Who may make a pod hold a lock (docs/security.md, Inside a namespace): the annotation makes a
// claim only for a pod (or a workload's pods) whose service account may create LockClaims in the
// namespace, so that anyone who may create pods but not claims gets no lock through it.

// claimsIn lists the names of the claims in ns.
func claimsIn(ns string) func(g Gomega) []string {
	return func(g Gomega) []string {
		list := &locksv1alpha1.LockClaimList{}
		g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
		var names []string
		for _, c := range list.Items {
			names = append(names, c.Name)
		}
		return names
	}
}

// eventNotes lists "reason: note" of the events about the object of kind and name in ns.
func eventNotes(ns, kind, name string) func(g Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name {
				seen = append(seen, e.Reason+": "+e.Note)
			}
		}
		return seen
	}
}

var _ = Describe("The annotation asks for a lock only as far as the pod's service account may", func() {
	It("makes no claim for a pod whose account may not create claims, says why, and makes it once the account may", func() {
		ns := newBareNamespace()
		newLock(ns, "db")
		pod := newLockPod(ns, "web-0", "db", true)

		Eventually(eventNotes(ns, "Pod", "web-0")).Should(ContainElement(And(
			HavePrefix(controller.ReasonClaimNotAllowed+": "),
			ContainSubstring("Service account "+ns+"/default may not create LockClaims in namespace "+ns),
			ContainSubstring("no claim is made for lock db"),
			ContainSubstring("config/samples/pods/lockctl-rbac.yaml"))))
		Consistently(claimsIn(ns)).WithTimeout(2*time.Second).Should(BeEmpty(), "no claim for a pod whose account may not make one")
		Expect(k8sClient.Get(ctx(), key(pod), pod)).To(Succeed())
		Expect(pod.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: locksv1alpha1.PodSchedulingGate}), "still gated")
		Expect(pod.Labels).To(HaveKeyWithValue(locksv1alpha1.PodRoleLabel, locksv1alpha1.PodRoleStandby))

		By("granting the namespace's accounts the right: the pod's claim is made at the next look, and it holds")
		Expect(rbacenv.AllowClaims(ctx(), k8sClient, ns)).To(Succeed())
		Eventually(claimsIn(ns)).WithTimeout(30 * time.Second).Should(ConsistOf(locksv1alpha1.PodClaimName(pod.Name, pod.UID, "db")))
		Eventually(func(g Gomega) []corev1.PodSchedulingGate {
			g.Expect(k8sClient.Get(ctx(), key(pod), pod)).To(Succeed())
			return pod.Spec.SchedulingGates
		}).WithTimeout(30 * time.Second).Should(BeEmpty())
	})

	It("judges each pod by its own account", func() {
		ns := newBareNamespace()
		newLock(ns, "db")
		Expect(k8sClient.Create(ctx(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(Succeed())
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lockctl"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{locksv1alpha1.GroupVersion.Group}, Resources: []string{"lockclaims"}, Verbs: []string{"create"}}}}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-lockctl"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "lockctl"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "web"}}}
		Expect(k8sClient.Create(ctx(), role)).To(Succeed())
		Expect(k8sClient.Create(ctx(), binding)).To(Succeed())

		// The pod of another account is created first, so that its refusal is settled by the time
		// the allowed pod's claim exists.
		other := newLockPod(ns, "other-0", "db", true)
		Eventually(eventNotes(ns, "Pod", "other-0")).Should(ContainElement(HavePrefix(controller.ReasonClaimNotAllowed + ": ")))
		web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0",
			Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "db"}},
			Spec: corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app", Image: "app"}},
				SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}}}
		Expect(k8sClient.Create(ctx(), web)).To(Succeed())
		Eventually(claimsIn(ns)).WithTimeout(30 * time.Second).Should(ConsistOf(locksv1alpha1.PodClaimName(web.Name, web.UID, "db")))
		Consistently(claimsIn(ns)).WithTimeout(2 * time.Second).ShouldNot(ContainElement(locksv1alpha1.PodClaimName(other.Name, other.UID, "db")))
	})

	It("judges a Job by its pods' own account, which the cached Job keeps", func() {
		ns := newBareNamespace()
		newLock(ns, "db")
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lockctl"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{locksv1alpha1.GroupVersion.Group}, Resources: []string{"lockclaims"}, Verbs: []string{"create"}}}}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch-lockctl"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "lockctl"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "batch"}}}
		Expect(k8sClient.Create(ctx(), role)).To(Succeed())
		Expect(k8sClient.Create(ctx(), binding)).To(Succeed())

		// The Job of another account is created first, so that its refusal is settled by the time
		// the allowed Job's claim exists.
		other := newJobObject(ns, "other")
		other.Annotations = map[string]string{locksv1alpha1.PodLockAnnotation: "db"}
		other.Spec.Template.Spec.ServiceAccountName = "other"
		Expect(k8sClient.Create(ctx(), other)).To(Succeed())
		Eventually(eventNotes(ns, "Job", "other")).Should(ContainElement(And(
			HavePrefix(controller.ReasonClaimNotAllowed+": "),
			ContainSubstring("Service account "+ns+"/other may not create LockClaims"))))
		allowed := newJobObject(ns, "allowed")
		allowed.Annotations = map[string]string{locksv1alpha1.PodLockAnnotation: "db"}
		allowed.Spec.Template.Spec.ServiceAccountName = "batch"
		Expect(k8sClient.Create(ctx(), allowed)).To(Succeed())
		Eventually(jobState(ns, "allowed")).WithTimeout(30 * time.Second).Should(HavePrefix("running/"))
		Consistently(claimsIn(ns)).WithTimeout(2 * time.Second).Should(ConsistOf(locksv1alpha1.PodClaimName(allowed.Name, allowed.UID, "db")))
	})

	It("makes no claim for a Job whose pods' account may not create claims", func() {
		ns := newBareNamespace()
		newLock(ns, "db")
		newLockJob(ns, "nightly", "db", true)
		Eventually(eventNotes(ns, "Job", "nightly")).Should(ContainElement(And(
			HavePrefix(controller.ReasonClaimNotAllowed+": "),
			ContainSubstring("Service account "+ns+"/default may not create LockClaims"))))
		Consistently(claimsIn(ns)).WithTimeout(2 * time.Second).Should(BeEmpty())
		Expect(jobState(ns, "nightly")(Default)).To(Equal("suspended/"))

		Expect(rbacenv.AllowClaims(ctx(), k8sClient, ns)).To(Succeed())
		Eventually(jobState(ns, "nightly")).WithTimeout(30 * time.Second).Should(HavePrefix("running/"))
	})
})
