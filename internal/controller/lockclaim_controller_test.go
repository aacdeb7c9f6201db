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
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

const (
	held     = locksv1alpha1.ClaimHeld
	pending  = locksv1alpha1.ClaimPending
	released = locksv1alpha1.ClaimReleased
)

var _ = Describe("Granting in FIFO order", func() {
	It("grants 10 claims one at a time in creation order with strictly increasing tokens", func() {
		ns := newNamespace()
		lock := newLock(ns, "db")
		const n = 10
		names := make([]string, n)
		for i := range n {
			// Creation times have one-second precision; equal times fall back to the name, so the
			// names are chosen to sort in creation order.
			names[i] = fmt.Sprintf("claim-%02d", i)
			newClaim(ns, names[i], lock.Name, "")
		}

		var lastToken int64
		for i, name := range names {
			Eventually(phaseOf(ns, name)).Should(Equal(held), "claim %d should be granted next", i)
			c := claimOf(ns, name)(Default)
			Expect(c.Status.FencingToken).To(BeNumerically(">", lastToken))
			Expect(c.Status.ExpireTime.Time).To(BeTemporally(">", time.Now()))
			Expect(c.Status.AcquireTime).NotTo(BeNil())
			lastToken = c.Status.FencingToken

			// Everyone behind waits in order. A waiter's place is exact when it is first queued
			// (j + 1 here) and then moves in bands, at most once a minute, so that a handoff costs
			// the waiters no write: it shows its true place or one it had before, never a better one.
			for j := i + 1; j < n; j++ {
				Eventually(func(g Gomega) {
					w := claimOf(ns, names[j])(g)
					g.Expect(w.Status.Phase).To(Equal(pending))
					g.Expect(w.Status.QueuePosition).To(And(BeNumerically(">=", j-i), BeNumerically("<=", j+1)))
				}).Should(Succeed())
			}
			Eventually(func(g Gomega) {
				l := &locksv1alpha1.DistributedLock{}
				g.Expect(k8sClient.Get(ctx(), key(lock), l)).To(Succeed())
				g.Expect(l.Status.Holders).To(HaveLen(1))
				g.Expect(l.Status.Holders[0].Claim).To(Equal(name))
				g.Expect(l.Status.FencingToken).To(Equal(lastToken))
				g.Expect(l.Status.Waiting).To(Equal(int32(n - 1 - i)))
			}).Should(Succeed())

			deleteNow(c)
		}
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), key(lock), l)).To(Succeed())
			g.Expect(l.Status.Holders).To(BeEmpty())
		}).Should(Succeed())
	})

	It("grants claims made within one second in the order they arrived, not by name", func() {
		ns := newNamespace()
		lock := newLock(ns, "db")
		newClaim(ns, "holder", lock.Name, "")
		Eventually(phaseOf(ns, "holder")).Should(Equal(held))
		// Named against their order, created within a second: the name would put them backwards.
		names := []string{"w-3", "w-2", "w-1"}
		for _, name := range names {
			newClaim(ns, name, lock.Name, "")
		}
		var lastArrival int64
		for _, name := range names {
			Eventually(func(g Gomega) int64 { return claimOf(ns, name)(g).Status.Arrival }).ShouldNot(BeZero(), "arrival recorded at the first status write")
			arrival := claimOf(ns, name)(Default).Status.Arrival
			Expect(arrival).To(BeNumerically(">", lastArrival), "%s arrived after the claims created before it", name)
			lastArrival = arrival
		}
		deleteNow(claimOf(ns, "holder")(Default))
		for _, name := range names {
			Eventually(phaseOf(ns, name)).Should(Equal(held), "%s is next", name)
			for _, later := range names[slices.Index(names, name)+1:] {
				Expect(phaseOf(ns, later)()).To(Equal(pending))
			}
			deleteNow(claimOf(ns, name)(Default))
		}
	})

	It("grants a claim of a higher priority before those that waited longer, and never ends a hold for it", func() {
		ns := newNamespace()
		lock := newLock(ns, "db")
		newClaim(ns, "deploy-1", lock.Name, "")
		Eventually(phaseOf(ns, "deploy-1")).Should(Equal(held))
		newClaim(ns, "deploy-2", lock.Name, "")
		newClaim(ns, "cleanup", lock.Name, "", func(c *locksv1alpha1.LockClaim) { c.Spec.Priority = -1 })
		Eventually(phaseOf(ns, "deploy-2")).Should(Equal(pending))
		newClaim(ns, "hotfix", lock.Name, "", func(c *locksv1alpha1.LockClaim) { c.Spec.Priority = 100 })
		Eventually(func(g Gomega) int32 { return claimOf(ns, "hotfix")(g).Status.QueuePosition }).Should(Equal(int32(1)),
			"first in line as soon as it is queued")
		Consistently(phaseOf(ns, "deploy-1"), "1s").Should(Equal(held), "no preemption")

		for _, next := range []string{"hotfix", "deploy-2", "cleanup"} {
			current := claimOf(ns, map[string]string{"hotfix": "deploy-1", "deploy-2": "hotfix", "cleanup": "deploy-2"}[next])(Default)
			deleteNow(current)
			Eventually(phaseOf(ns, next)).Should(Equal(held), "%s is next", next)
		}
	})

	It("reports the lock's backend as ready on the lock", func() {
		ns := newNamespace()
		lock := newLock(ns, "db")
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), key(lock), l)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(l.Status.Conditions, locksv1alpha1.ConditionBackendReady)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(l.Status.Conditions, locksv1alpha1.ConditionReady)).To(BeTrue())
			g.Expect(l.Finalizers).To(ContainElement(locksv1alpha1.Finalizer))
		}).Should(Succeed())
	})
})

var _ = Describe("Holder death hands the lock over", func() {
	var ns string
	var lock *locksv1alpha1.DistributedLock
	var podA, podB *corev1.Pod
	BeforeEach(func() {
		ns = newNamespace()
		lock = newLock(ns, "db")
		podA, podB = newPod(ns, "a"), newPod(ns, "b")
		newClaim(ns, "claim-a", lock.Name, podA.Name)
		Eventually(phaseOf(ns, "claim-a")).Should(Equal(held))
		newClaim(ns, "claim-b", lock.Name, podB.Name)
		Eventually(acquired(ns, "claim-b")).Should(Equal("False/Queued"))
	})
	expectHandoff := func(reason string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			a := claimOf(ns, "claim-a")(g)
			g.Expect(a.Status.Phase).To(Equal(released))
			g.Expect(meta.FindStatusCondition(a.Status.Conditions, locksv1alpha1.ConditionAcquired).Reason).To(Equal(reason))
			g.Expect(a.Status.ReleaseTime).NotTo(BeNil())
		}).Should(Succeed())
		Eventually(phaseOf(ns, "claim-b")).Should(Equal(held))
		a, b := claimOf(ns, "claim-a")(Default), claimOf(ns, "claim-b")(Default)
		Expect(b.Status.FencingToken).To(BeNumerically(">", a.Status.FencingToken))
		Expect(b.Status.HolderIdentity).To(Equal(string(podB.UID)))
	}

	It("when the holder pod is deleted", func() {
		deleteNow(podA)
		expectHandoff(locksv1alpha1.ReasonHolderTerminated)
	})
	It("when the holder pod fails", func() {
		setPodPhase(podA, corev1.PodFailed)
		expectHandoff(locksv1alpha1.ReasonHolderTerminated)
	})
	It("when the holder pod succeeds", func() {
		setPodPhase(podA, corev1.PodSucceeded)
		expectHandoff(locksv1alpha1.ReasonHolderTerminated)
	})
	It("when the holder pod is replaced by another of the same name", func() {
		deleteNow(podA)
		newPod(ns, "a")
		expectHandoff(locksv1alpha1.ReasonHolderTerminated)
	})
	It("when the holder's claim is deleted", func() {
		Expect(k8sClient.Delete(ctx(), &locksv1alpha1.LockClaim{ObjectMeta: claimOf(ns, "claim-a")(Default).ObjectMeta})).To(Succeed())
		Eventually(phaseOf(ns, "claim-b")).Should(Equal(held))
		Eventually(func() error {
			return k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "claim-a"}, &locksv1alpha1.LockClaim{})
		}).Should(MatchError(ContainSubstring("not found")))
	})
	It("but not while the holder pod is only terminating", func() {
		// A graceful deletion with no kubelet leaves the pod terminating: its containers may
		// still run, so it keeps the lock.
		Expect(k8sClient.Delete(ctx(), podA)).To(Succeed())
		Consistently(phaseOf(ns, "claim-a")).WithTimeout(2 * time.Second).Should(Equal(held))
		Expect(phaseOf(ns, "claim-b")()).To(Equal(pending))
	})
	It("and a waiter whose pod died gives up for good", func() {
		deleteNow(podB)
		Eventually(phaseOf(ns, "claim-b")).Should(Equal(locksv1alpha1.ClaimFailed))
		Expect(acquired(ns, "claim-b")()).To(Equal("False/HolderTerminated"))
		Expect(phaseOf(ns, "claim-a")()).To(Equal(held))
	})
})

var _ = Describe("Claims that cannot proceed say why", func() {
	It("waits for a missing lock, then takes it", func() {
		ns := newNamespace()
		newClaim(ns, "early", "not-yet", "")
		Eventually(func(g Gomega) {
			c := claimOf(ns, "early")(g)
			ready := meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(BeEquivalentTo("False"))
			g.Expect(ready.Reason).To(Equal(locksv1alpha1.ReasonLockNotFound))
			g.Expect(ready.Message).To(Equal("DistributedLock not-yet does not exist in namespace " + ns + "; create it or fix spec.lockName"))
		}).Should(Succeed())
		newLock(ns, "not-yet")
		Eventually(phaseOf(ns, "early")).Should(Equal(held))
	})

	It("waits for a missing pod, then grants it", func() {
		ns := newNamespace()
		newLock(ns, "db")
		newClaim(ns, "for-pod", "db", "later")
		Eventually(acquired(ns, "for-pod")).Should(Equal("False/PodNotFound"))
		Expect(phaseOf(ns, "for-pod")()).To(Equal(pending))
		pod := newPod(ns, "later")
		Eventually(phaseOf(ns, "for-pod")).Should(Equal(held))
		Expect(claimOf(ns, "for-pod")(Default).Status.PodUID).To(Equal(pod.UID))
	})

	It("emits events on grant and release", func() {
		ns := newNamespace()
		newLock(ns, "db")
		c := newClaim(ns, "c", "db", "")
		Eventually(phaseOf(ns, "c")).Should(Equal(held))
		deleteNow(c)
		Eventually(func(g Gomega) []string {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.Name == "c" {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).Should(ContainElements(locksv1alpha1.ReasonAcquired, locksv1alpha1.ReasonClaimDeleted))
	})

	It("counts acquisitions and observes waits, holds and backend calls in metrics", func() {
		acquiredBefore := testutil.ToFloat64(mgrMetric.Acquisitions.WithLabelValues("kubernetes", "acquired"))
		ns := newNamespace()
		newLock(ns, "db")
		c := newClaim(ns, "c", "db", "")
		Eventually(phaseOf(ns, "c")).Should(Equal(held))
		deleteNow(c)
		Eventually(func() error {
			return k8sClient.Get(ctx(), key(c), &locksv1alpha1.LockClaim{})
		}).Should(MatchError(ContainSubstring("not found")))
		Expect(testutil.ToFloat64(mgrMetric.Acquisitions.WithLabelValues("kubernetes", "acquired"))).To(BeNumerically(">", acquiredBefore))
		for name, count := range map[string]int{
			"lockwarden_claim_wait_seconds":            testutil.CollectAndCount(mgrMetric.WaitSeconds),
			"lockwarden_claim_hold_seconds":            testutil.CollectAndCount(mgrMetric.HoldSeconds),
			"lockwarden_backend_call_duration_seconds": testutil.CollectAndCount(mgrMetric.BackendCallSeconds),
		} {
			Expect(count).To(BeNumerically(">", 0), name)
		}
	})
})

var _ = Describe("waitTimeoutSeconds", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		newLock(ns, "db")
		newClaim(ns, "holder", "db", "")
		Eventually(phaseOf(ns, "holder")).Should(Equal(held))
	})
	It("0 tries once and times out at once when the lock is taken", func() {
		newClaim(ns, "once", "db", "", func(c *locksv1alpha1.LockClaim) { c.Spec.WaitTimeoutSeconds = ptr.To[int32](0) })
		Eventually(phaseOf(ns, "once")).Should(Equal(locksv1alpha1.ClaimTimedOut))
		Expect(acquired(ns, "once")()).To(Equal("False/WaitTimedOut"))
	})
	It("0 takes a free lock", func() {
		newLock(ns, "free")
		newClaim(ns, "once", "free", "", func(c *locksv1alpha1.LockClaim) { c.Spec.WaitTimeoutSeconds = ptr.To[int32](0) })
		Eventually(phaseOf(ns, "once")).Should(Equal(held))
	})
	It("N gives up after N seconds, and not before", func() {
		newClaim(ns, "patient", "db", "", func(c *locksv1alpha1.LockClaim) { c.Spec.WaitTimeoutSeconds = ptr.To[int32](3) })
		Eventually(acquired(ns, "patient")).Should(Equal("False/Queued"))
		Consistently(phaseOf(ns, "patient")).WithTimeout(time.Second).Should(Equal(pending))
		Eventually(phaseOf(ns, "patient")).WithTimeout(10 * time.Second).Should(Equal(locksv1alpha1.ClaimTimedOut))
	})
	It("a timed-out claim does not block the queue", func() {
		newClaim(ns, "once", "db", "", func(c *locksv1alpha1.LockClaim) { c.Spec.WaitTimeoutSeconds = ptr.To[int32](0) })
		Eventually(phaseOf(ns, "once")).Should(Equal(locksv1alpha1.ClaimTimedOut))
		newClaim(ns, "next", "db", "")
		deleteNow(claimOf(ns, "holder")(Default))
		Eventually(phaseOf(ns, "next")).Should(Equal(held))
	})
})

var _ = Describe("Reentrancy by holder identity", func() {
	It("shares one hold and token between claims of the same identity, and releases with the last", func() {
		ns := newNamespace()
		newLock(ns, "db")
		sameIdentity := func(c *locksv1alpha1.LockClaim) {
			c.Spec.Holder = &locksv1alpha1.ClaimHolder{Identity: "batch-runner"}
		}
		first := newClaim(ns, "first", "db", "", sameIdentity)
		Eventually(phaseOf(ns, "first")).Should(Equal(held))
		newClaim(ns, "other", "db", "")
		Eventually(acquired(ns, "other")).Should(Equal("False/Queued"))
		second := newClaim(ns, "second", "db", "", sameIdentity)
		Eventually(phaseOf(ns, "second")).Should(Equal(held))
		shared := claimOf(ns, "first")(Default).Status.FencingToken
		Expect(claimOf(ns, "second")(Default).Status.FencingToken).To(Equal(shared))

		deleteNow(first)
		Consistently(phaseOf(ns, "other")).WithTimeout(2 * time.Second).Should(Equal(pending))
		Expect(phaseOf(ns, "second")()).To(Equal(held))

		deleteNow(second)
		Eventually(phaseOf(ns, "other")).Should(Equal(held))
		Expect(claimOf(ns, "other")(Default).Status.FencingToken).To(BeNumerically(">", shared))
	})
})
