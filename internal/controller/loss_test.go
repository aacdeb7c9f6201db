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
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Specs of what follows a hold that ends badly: lockDelaySeconds and lossPolicy Evict.

// lockDelayUntil reads a lock's status.lockDelayUntil (zero when absent).
func lockDelayUntil(ns, name string) func(g Gomega) time.Time {
	return func(g Gomega) time.Time {
		l := &locksv1alpha1.DistributedLock{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
		if l.Status.LockDelayUntil == nil {
			return time.Time{}
		}
		return l.Status.LockDelayUntil.Time
	}
}

var _ = Describe("lockDelaySeconds", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("holds the next grant back for the delay after a holder pod dies, and says until when", func() {
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LockDelaySeconds = 4 })
		pod := newPod(ns, "p1")
		newClaim(ns, "a", "db", "p1")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		deleteNow(pod)
		Eventually(phaseOf(ns, "a")).Should(Equal(locksv1alpha1.ClaimReleased))
		released := claimOf(ns, "a")(Default).Status.ReleaseTime.Time
		var until time.Time
		Eventually(func(g Gomega) {
			until = lockDelayUntil(ns, "db")(g)
			g.Expect(until).NotTo(BeZero())
		}).Should(Succeed())
		Expect(until).To(BeTemporally("~", released.Add(4*time.Second), time.Second))
		Eventually(acquired(ns, "b")).Should(Equal("False/LockDelay"))
		cond := meta.FindStatusCondition(claimOf(ns, "b")(Default).Status.Conditions, locksv1alpha1.ConditionAcquired)
		Expect(cond.Message).To(Equal("The last hold ended without a release; no grant before " +
			until.UTC().Format(time.RFC3339) + " (lockDelaySeconds=4)"))

		Eventually(phaseOf(ns, "b")).Should(Equal(held))
		Expect(claimOf(ns, "b")(Default).Status.AcquireTime.Time).NotTo(BeTemporally("<", until))
		Expect(lockDelayUntil(ns, "db")(Default)).To(BeZero(), "the grant clears the delay it served")
	})

	It("grants at once after a release or a holder that ran to completion", func() {
		// A minute's delay that the specs' 30 s timeout could not wait out.
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LockDelaySeconds = 60 })
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "p2")
		pod := newPod(ns, "p2")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		Expect(k8sClient.Delete(ctx(), claimOf(ns, "a")(Default))).To(Succeed())
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
		Expect(lockDelayUntil(ns, "db")(Default)).To(BeZero())

		newClaim(ns, "c", "db", "")
		Eventually(acquired(ns, "c")).Should(Equal("False/Queued"))
		setPodPhase(pod, corev1.PodSucceeded)
		Eventually(phaseOf(ns, "b")).Should(Equal(locksv1alpha1.ClaimReleased))
		Eventually(phaseOf(ns, "c")).Should(Equal(held))
		Expect(lockDelayUntil(ns, "db")(Default)).To(BeZero())
	})
})

var _ = Describe("lossPolicy", func() {
	var ns, backendName string
	BeforeEach(func() {
		faultyStore.SetUnavailable(nil)
		ns = newNamespace()
		backendName = newFaultyBackend()
	})

	// lose makes claim a, held for pod p1 on lock db, lose its hold: someone outside lockwarden
	// takes the key.
	lose := func() {
		GinkgoHelper()
		faultyStore.Steal("lockwarden/"+ns+"/db", "intruder")
		Eventually(phaseOf(ns, "a")).WithTimeout(15 * time.Second).Should(Equal(locksv1alpha1.ClaimLost))
	}
	evicted := func(g Gomega) string {
		c := claimOf(ns, "a")(g)
		cond := meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionEvicted)
		if cond == nil {
			return ""
		}
		return string(cond.Status) + "/" + cond.Reason
	}
	podDeleting := func(g Gomega) bool {
		p := &corev1.Pod{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "p1"}, p)).To(Succeed())
		return !p.DeletionTimestamp.IsZero()
	}

	It("Evict evicts the holder pod of a lost hold, and the loss starts the lock delay", func() {
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = backendName
			l.Spec.LossPolicy = locksv1alpha1.LossPolicyEvict
			l.Spec.LockDelaySeconds = 30
		})
		newPod(ns, "p1")
		newClaim(ns, "a", "db", "p1")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))

		lose()
		Eventually(podDeleting).Should(BeTrue(), "the holder pod is evicted")
		Eventually(evicted).Should(Equal("True/HolderEvicted"))
		Eventually(lockDelayUntil(ns, "db")).ShouldNot(BeZero(), "a lost hold ended without a release (the ended hold is written before the lock record)")
	})

	It("Evict reports a PodDisruptionBudget that refuses, retries, and never forces", func() {
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = backendName
			l.Spec.LossPolicy = locksv1alpha1.LossPolicyEvict
		})
		pod := newPod(ns, "p1")
		pod.Labels = map[string]string{"app": "web"}
		Expect(k8sClient.Update(ctx(), pod)).To(Succeed())
		// No disruption controller runs here: the budget allows nothing until the spec says so.
		one := intstr.FromInt32(1)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		Expect(k8sClient.Create(ctx(), pdb)).To(Succeed())
		newClaim(ns, "a", "db", "p1")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))

		lose()
		Eventually(evicted).Should(Equal("False/EvictionBlocked"))
		cond := meta.FindStatusCondition(claimOf(ns, "a")(Default).Status.Conditions, locksv1alpha1.ConditionEvicted)
		Expect(cond.Message).To(HavePrefix("Eviction of pod p1 refused: "))
		Expect(cond.Message).To(HaveSuffix("; retried every 10s, never forced"))
		Expect(podDeleting(Default)).To(BeFalse())

		// The budget allows one disruption now, as the disruption controller would say.
		Expect(k8sClient.Get(ctx(), key(pdb), pdb)).To(Succeed())
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 1,
			CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
		Expect(k8sClient.Status().Update(ctx(), pdb)).To(Succeed())
		Eventually(podDeleting).WithTimeout(30 * time.Second).Should(BeTrue())
		Eventually(evicted).Should(Equal("True/HolderEvicted"))
	})

	It("Evict evicts the holder pod of a lost claim of several locks when one of them asks for it", func() {
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = backendName })
		newLock(ns, "cache", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = backendName
			l.Spec.LossPolicy = locksv1alpha1.LossPolicyEvict
		})
		newPod(ns, "p1")
		newClaim(ns, "a", "", "p1", func(c *locksv1alpha1.LockClaim) { c.Spec.LockNames = []string{"db", "cache"} })
		Eventually(phaseOf(ns, "a")).Should(Equal(held))

		faultyStore.Steal("lockwarden/"+ns+"/db", "intruder") // the lock under Notify: the claim is lost whole
		Eventually(phaseOf(ns, "a")).WithTimeout(15 * time.Second).Should(Equal(locksv1alpha1.ClaimLost))
		Eventually(podDeleting).Should(BeTrue(), "the holder pod is evicted: lock cache asks for it")
		Eventually(evicted).Should(Equal("True/HolderEvicted"))
	})

	It("Notify, the default, leaves the pod running", func() {
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = backendName })
		newPod(ns, "p1")
		newClaim(ns, "a", "db", "p1")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		lose()
		Consistently(podDeleting).WithTimeout(2 * time.Second).Should(BeFalse())
		Expect(evicted(Default)).To(BeEmpty())
	})
})
