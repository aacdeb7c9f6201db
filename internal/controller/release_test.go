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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// recordOf reads lock's record (status.holders), for Eventually.
func recordOf(ns, lock string) func(g Gomega) []locksv1alpha1.LockHolder {
	return func(g Gomega) []locksv1alpha1.LockHolder {
		l := &locksv1alpha1.DistributedLock{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: lock}, l)).To(Succeed())
		return l.Status.Holders
	}
}

// ownedByPod makes pod a claim's holder and its controller, as lockctl and the pod controller do.
func ownedByPod(pod *corev1.Pod) func(*locksv1alpha1.LockClaim) {
	return func(c *locksv1alpha1.LockClaim) {
		c.Spec.Holder = &locksv1alpha1.ClaimHolder{PodName: pod.Name}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	}
}

var _ = Describe("Release without a finalizer on claims", func() {
	It("records each hold's claim UID and holder, and releases a deleted claim in the pass that grants the next", func() {
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LockDelaySeconds = 60 })
		pod := newPod(ns, "web-0")
		a := newClaim(ns, "a", "db", "", ownedByPod(pod))
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		Expect(claimOf(ns, "a")(Default).Finalizers).To(BeEmpty())
		Expect(recordOf(ns, "db")(Default)).To(ConsistOf(And(
			HaveField("Claim", "a"), HaveField("ClaimUID", a.UID),
			HaveField("Holder", &locksv1alpha1.RecordedHolder{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: pod.UID}))))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		deleteNow(claimOf(ns, "a")(Default))
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "a"}, &locksv1alpha1.LockClaim{})).
			To(MatchError(ContainSubstring("not found")), "the delete is the whole release: nothing holds the claim back")
		Eventually(phaseOf(ns, "b")).Should(Equal(held), "a release: no lock delay")
		Expect(recordOf(ns, "db")(Default)).To(ConsistOf(HaveField("Claim", "b")))
	})

	It("takes the release finalizer of an earlier lockwarden off claims, once their record names them by UID", func() {
		ns := newNamespace()
		newLock(ns, "db")
		finalized := func(c *locksv1alpha1.LockClaim) { c.Finalizers = []string{locksv1alpha1.Finalizer} }
		a := newClaim(ns, "a", "db", "", finalized) // as an earlier lockctl made them
		newClaim(ns, "b", "db", "", finalized)
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		Eventually(func(g Gomega) []string { return claimOf(ns, "b")(g).Finalizers }).Should(BeEmpty(), "a waiting claim loses it")
		Eventually(func(g Gomega) []string { return claimOf(ns, "a")(g).Finalizers }).Should(BeEmpty(), "a holding claim loses it")

		// The state an earlier lockwarden leaves: the finalizer on the holder's claim, a record
		// entry without the claim's UID. The running controller brings both up to date.
		Eventually(func(g Gomega) {
			c := claimOf(ns, "a")(g)
			c.Finalizers = []string{locksv1alpha1.Finalizer}
			g.Expect(k8sClient.Update(ctx(), c)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "db"}, l)).To(Succeed())
			l.Status.Holders[0].ClaimUID = ""
			g.Expect(k8sClient.Status().Update(ctx(), l)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(recordOf(ns, "db")(g)).To(ConsistOf(HaveField("ClaimUID", a.UID)))
			g.Expect(claimOf(ns, "a")(g).Finalizers).To(BeEmpty())
		}).Should(Succeed())
		Expect(phaseOf(ns, "a")()).To(Equal(held))

		deleteNow(claimOf(ns, "a")(Default))
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
	})

	It("keeps the hold of a pod deleted in the foreground until the pod is gone, though its claim went first", func() {
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LockDelaySeconds = 2 })
		pod := newPod(ns, "web-0")
		newClaim(ns, "a", "db", "", ownedByPod(pod))
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		// kubectl delete --cascade=foreground, with the garbage collector played here: the pod
		// stays, terminating, with the foregroundDeletion finalizer; its claim is deleted.
		Expect(k8sClient.Delete(ctx(), pod, client.PropagationPolicy(metav1.DeletePropagationForeground), client.GracePeriodSeconds(0))).To(Succeed())
		deleteNow(claimOf(ns, "a")(Default))
		Consistently(recordOf(ns, "db")).WithTimeout(2*time.Second).Should(ConsistOf(HaveField("Claim", "a")),
			"the terminating pod's containers may still run")
		Expect(phaseOf(ns, "b")()).To(Equal(locksv1alpha1.ClaimPending))

		// The pod goes: no claim names it any more, so its event reaches the lock through the
		// lock's record, and the hold ends without a release.
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			pod.Finalizers = nil
			g.Expect(k8sClient.Update(ctx(), pod)).To(Succeed())
		}).Should(Succeed())
		Eventually(acquired(ns, "b")).Should(Equal("False/LockDelay"))
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
	})
})
