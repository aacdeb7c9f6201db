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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Shared locks (spec.maxHolders, LockClaim spec.mode) on the built-in backend, whose lock record
// is the hold, and on a store that holds places itself (the in-memory one, through the Sharer
// interface). The safety monitor checks every spec: never more holders than places, nothing
// beside an Exclusive holder, tokens always new.

// lockOf fetches a lock's current state.
func lockOf(ns, name string) func(g Gomega) *locksv1alpha1.DistributedLock {
	return func(g Gomega) *locksv1alpha1.DistributedLock {
		l := &locksv1alpha1.DistributedLock{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
		return l
	}
}

// heldClaims lists the lock's claims that are Held, by name.
func heldClaims(ns, lock string) func(g Gomega) []string {
	return func(g Gomega) []string {
		list := &locksv1alpha1.LockClaimList{}
		g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
		var names []string
		for _, c := range list.Items {
			if c.Spec.LockName == lock && c.Status.Phase == held && c.DeletionTimestamp == nil {
				names = append(names, c.Name)
			}
		}
		slices.Sort(names)
		return names
	}
}

func exclusive(c *locksv1alpha1.LockClaim) { c.Spec.Mode = locksv1alpha1.LockModeExclusive }

func withPlaces(n int32) func(*locksv1alpha1.DistributedLock) {
	return func(l *locksv1alpha1.DistributedLock) { l.Spec.MaxHolders = n }
}

// setPlaces changes a lock's maxHolders.
func setPlaces(ns, name string, n int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		l := lockOf(ns, name)(g)
		l.Spec.MaxHolders = n
		g.Expect(k8sClient.Update(ctx(), l)).To(Succeed())
	}).Should(Succeed())
}

// deleteClaim deletes a claim by name.
func deleteClaim(ns, name string) {
	GinkgoHelper()
	deleteNow(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

var _ = DescribeTableSubtree("Shared locks", func(backend func() string) {
	var ns string
	newSharedLock := func(places int32) {
		GinkgoHelper()
		name := backend()
		newLock(ns, "db", withPlaces(places), func(l *locksv1alpha1.DistributedLock) {
			if name != "" {
				l.Spec.BackendRef.Name = name
			}
		})
	}
	BeforeEach(func() { ns = newNamespace() })

	It("grants as many Shared claims at once as the lock has places, each its own token, and the next as one leaves", func() {
		newSharedLock(3)
		for i := range 5 {
			newClaim(ns, fmt.Sprintf("c%d", i), "db", "")
		}
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"c0", "c1", "c2"}))
		Eventually(acquired(ns, "c3")).Should(Equal("False/Queued"))
		Eventually(func(g Gomega) {
			w := claimOf(ns, "c4")(g)
			// Exact when queued: 2 behind the three places, or 5 if the lock's first pass (which
			// takes the key in the ledger and grants nothing) queued all five; a waiter's place
			// then moves in bands, at most once a minute.
			g.Expect(w.Status.QueuePosition).To(BeElementOf(int32(2), int32(5)))
			cond := meta.FindStatusCondition(w.Status.Conditions, locksv1alpha1.ConditionAcquired)
			g.Expect(cond).NotTo(BeNil())
			// Its wording moves with its place: "while the lock is held", or, queued before the
			// grants, "for the claims ahead to be served".
			g.Expect(cond.Message).To(HavePrefix("Waiting in the queue"))
		}).Should(Succeed())
		tokens := map[int64]bool{}
		for _, name := range []string{"c0", "c1", "c2"} {
			tokens[claimOf(ns, name)(Default).Status.FencingToken] = true
		}
		Expect(tokens).To(HaveLen(3), "every grant has its own token")
		Eventually(func(g Gomega) {
			l := lockOf(ns, "db")(g)
			g.Expect(l.Status.Holders).To(HaveLen(3))
			g.Expect(l.Status.Holding).To(Equal(int32(3)))
			g.Expect(l.Status.Waiting).To(Equal(int32(2)))
			for _, h := range l.Status.Holders {
				g.Expect(h.Mode).To(Equal(locksv1alpha1.LockModeShared))
				g.Expect(tokens).To(HaveKey(h.FencingToken))
			}
		}).Should(Succeed())

		highest := claimOf(ns, "c2")(Default).Status.FencingToken
		for t := range tokens {
			highest = max(highest, t)
		}
		deleteClaim(ns, "c1")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"c0", "c2", "c3"}))
		Expect(claimOf(ns, "c3")(Default).Status.FencingToken).To(BeNumerically(">", highest))
		Consistently(phaseOf(ns, "c4"), "1s").Should(Equal(pending))
	})

	It("grants an Exclusive claim alone, and keeps the Shared claims behind a waiting writer waiting", func() {
		newSharedLock(5)
		newClaim(ns, "r0", "db", "")
		newClaim(ns, "r1", "db", "")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"r0", "r1"}))
		newClaim(ns, "w", "db", "", exclusive)
		Eventually(acquired(ns, "w")).Should(Equal("False/Queued"))
		// A reader that arrived after the writer (named to sort before it: the arrival decides, not
		// the name): it must not pass it.
		newClaim(ns, "a-reader", "db", "")
		Eventually(acquired(ns, "a-reader")).Should(Equal("False/Queued"))
		Consistently(heldClaims(ns, "db"), "2s").Should(Equal([]string{"r0", "r1"}))

		deleteClaim(ns, "r0")
		Consistently(phaseOf(ns, "w"), "1s").Should(Equal(pending), "the writer waits for every reader")
		deleteClaim(ns, "r1")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"w"}))
		Eventually(func(g Gomega) {
			l := lockOf(ns, "db")(g)
			g.Expect(l.Status.Holders).To(HaveLen(1))
			g.Expect(l.Status.Holders[0].Mode).To(Equal(locksv1alpha1.LockModeExclusive))
		}).Should(Succeed())
		Consistently(phaseOf(ns, "a-reader"), "1s").Should(Equal(pending))

		deleteClaim(ns, "w")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"a-reader"}))
	})

	It("lets a reader of a higher priority pass a waiting writer of a lower one, and no reader of the same", func() {
		newSharedLock(5)
		newClaim(ns, "r0", "db", "")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"r0"}))
		newClaim(ns, "w", "db", "", exclusive)
		Eventually(acquired(ns, "w")).Should(Equal("False/Queued"))
		newClaim(ns, "same", "db", "")
		newClaim(ns, "urgent", "db", "", func(c *locksv1alpha1.LockClaim) { c.Spec.Priority = 5 })
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"r0", "urgent"}), "the urgent reader takes a place beside r0")
		Consistently(phaseOf(ns, "same"), "1s").Should(Equal(pending), "a reader of the writer's priority waits behind it")
		deleteClaim(ns, "r0")
		deleteClaim(ns, "urgent")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"w"}))
		deleteClaim(ns, "w")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"same"}))
	})

	It("takes a lowered maxHolders into account as holders leave, never taking a place away", func() {
		newSharedLock(3)
		for i := range 4 {
			newClaim(ns, fmt.Sprintf("c%d", i), "db", "")
		}
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"c0", "c1", "c2"}))
		setPlaces(ns, "db", 1)
		Consistently(heldClaims(ns, "db"), "1s").Should(Equal([]string{"c0", "c1", "c2"}), "no hold is taken away")
		deleteClaim(ns, "c0")
		Consistently(phaseOf(ns, "c3"), "1s").Should(Equal(pending))
		deleteClaim(ns, "c1")
		Consistently(phaseOf(ns, "c3"), "1s").Should(Equal(pending), "one holder fills the one place")
		deleteClaim(ns, "c2")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"c3"}))
	})

	It("grants into raised places at once", func() {
		newSharedLock(2)
		for i := range 4 {
			newClaim(ns, fmt.Sprintf("c%d", i), "db", "")
		}
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"c0", "c1"}))
		Eventually(acquired(ns, "c2")).Should(Equal("False/Queued"))
		Consistently(phaseOf(ns, "c2"), "1s").Should(Equal(pending))
		setPlaces(ns, "db", 4)
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"c0", "c1", "c2", "c3"}))
	})

	It("lets claims of one identity share one place and its token", func() {
		newSharedLock(2)
		same := func(c *locksv1alpha1.LockClaim) { c.Spec.Holder = &locksv1alpha1.ClaimHolder{Identity: "worker-a"} }
		newClaim(ns, "a1", "db", "", same)
		newClaim(ns, "a2", "db", "", same)
		newClaim(ns, "b", "db", "")
		newClaim(ns, "c", "db", "")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"a1", "a2", "b"}))
		Expect(claimOf(ns, "a2")(Default).Status.FencingToken).To(Equal(claimOf(ns, "a1")(Default).Status.FencingToken))
		Eventually(acquired(ns, "c")).Should(Equal("False/Queued"))
		Consistently(phaseOf(ns, "c"), "1s").Should(Equal(pending))
		deleteClaim(ns, "a1")
		Consistently(phaseOf(ns, "c"), "1s").Should(Equal(pending), "a2 keeps worker-a's place")
		deleteClaim(ns, "a2")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"b", "c"}))
	})
},
	Entry("on the built-in backend", func() string { return "" }),
	Entry("on a store that holds places itself", func() string { return newFaultyBackend() }),
)

var _ = Describe("A lock of one place", func() {
	It("holds a Shared claim exclusively, like a mutex", func() {
		ns := newNamespace()
		newLock(ns, "db")
		newClaim(ns, "a", "db", "")
		newClaim(ns, "b", "db", "")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"a"}))
		Eventually(func(g Gomega) {
			g.Expect(lockOf(ns, "db")(g).Status.Holders).To(ConsistOf(HaveField("Mode", locksv1alpha1.LockModeExclusive)))
		}).Should(Succeed())
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
		Consistently(phaseOf(ns, "b"), "1s").Should(Equal(pending))
	})

	It("moves a holder recorded by an older lockwarden (status.holder) into status.holders", func() {
		ns := newNamespace()
		newLock(ns, "db")
		newClaim(ns, "a", "db", "")
		newClaim(ns, "b", "db", "")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"a"}))
		token := claimOf(ns, "a")(Default).Status.FencingToken

		// What an older lockwarden wrote: the one holder in status.holder. The manager is
		// stopped for it (briefly: the hold's session must not lapse).
		stopManager()
		Eventually(func(g Gomega) {
			l := lockOf(ns, "db")(g)
			h := l.Status.Holders[0]
			h.Mode = ""
			// A status as a lockwarden from before shared locks wrote it.
			l.Status.Holder, l.Status.Holders, l.Status.Holding = &h, nil, 0 //nolint:staticcheck // SA1019: writes the deprecated field on purpose
			g.Expect(k8sClient.Status().Update(ctx(), l)).To(Succeed())
		}).Should(Succeed())
		startManager()

		Eventually(func(g Gomega) {
			l := lockOf(ns, "db")(g)
			g.Expect(l.Status.Holder).To(BeNil(), "the old field is cleared") //nolint:staticcheck // SA1019: checks the deprecated field on purpose
			g.Expect(l.Status.Holders).To(HaveLen(1))
			g.Expect(l.Status.Holders[0].Claim).To(Equal("a"))
			g.Expect(l.Status.Holders[0].FencingToken).To(Equal(token))
		}).Should(Succeed())
		Expect(phaseOf(ns, "a")()).To(Equal(held))
		deleteClaim(ns, "a")
		Eventually(heldClaims(ns, "db")).Should(Equal([]string{"b"}))
		Expect(claimOf(ns, "b")(Default).Status.FencingToken).To(BeNumerically(">", token))
	})
})
