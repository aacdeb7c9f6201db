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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// newSeveralClaim creates a detached claim that holds locks together (spec.lockNames).
func newSeveralClaim(ns, name string, locks ...string) *locksv1alpha1.LockClaim {
	GinkgoHelper()
	return newClaim(ns, name, "", "", func(c *locksv1alpha1.LockClaim) { c.Spec.LockNames = locks })
}

// claimVersion is a claim's resourceVersion, for Consistently: a claim that waits is not written
// again and again (two passes that disagree about its status would).
func claimVersion(ns, name string) func(g Gomega) string {
	return func(g Gomega) string { return claimOf(ns, name)(g).ResourceVersion }
}

// holderClaimsOf are the claims lock's record names.
func holderClaimsOf(ns, lock string) func(g Gomega) []string {
	return func(g Gomega) []string {
		l := &locksv1alpha1.DistributedLock{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: lock}, l)).To(Succeed())
		var names []string
		for _, h := range l.Status.CurrentHolders() {
			names = append(names, h.Claim)
		}
		return names
	}
}

// recordTokenOf is lock's record's token for claim; 0 when the record does not name it.
func recordTokenOf(ns, lock, claim string) int64 {
	GinkgoHelper()
	l := &locksv1alpha1.DistributedLock{}
	Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: lock}, l)).To(Succeed())
	for _, h := range l.Status.CurrentHolders() {
		if h.Claim == claim {
			return h.FencingToken
		}
	}
	return 0
}

var _ = Describe("A claim of several locks", func() {
	It("holds none of its locks while one is held, then all of them, each with its own token", func() {
		ns := newNamespace()
		newLock(ns, "env-a")
		newLock(ns, "env-b")
		newClaim(ns, "on-b", "env-b", "")
		Eventually(phaseOf(ns, "on-b")).Should(Equal(held))

		newSeveralClaim(ns, "deploy", "env-b", "env-a")
		Eventually(acquired(ns, "deploy")).Should(Equal("False/WaitingForLocks"))
		Consistently(holderClaimsOf(ns, "env-a"), "1s").Should(BeEmpty(), "no hold while it waits for env-b")
		Consistently(claimVersion(ns, "deploy"), "2s").Should(Equal(claimOf(ns, "deploy")(Default).ResourceVersion), "written once while it waits")

		deleteNow(claimOf(ns, "on-b")(Default))
		Eventually(phaseOf(ns, "deploy")).Should(Equal(held))
		d := claimOf(ns, "deploy")(Default)
		Expect(d.Status.Locks).To(HaveLen(2))
		for _, part := range d.Status.Locks {
			Expect(part.FencingToken).To(Equal(recordTokenOf(ns, part.LockName, "deploy")), "%s's token is its record's", part.LockName)
			Expect(part.ExpireTime).NotTo(BeNil())
		}
		Expect(d.Status.FencingToken).To(BeZero(), "no token of its own: one per lock")
		Expect(d.Status.ExpireTime.Time).To(BeTemporally(">", time.Now()))

		// Held across two leases (6 s): each lock's pass moves its part's expiry, and the claim's
		// is the earliest of them.
		Consistently(func(g Gomega) {
			c := claimOf(ns, "deploy")(g)
			g.Expect(c.Status.Phase).To(Equal(held))
			g.Expect(c.Status.ExpireTime.Time).To(BeTemporally(">", time.Now()))
			for _, part := range c.Status.Locks {
				g.Expect(part.ExpireTime.Time).To(BeTemporally(">=", c.Status.ExpireTime.Time))
			}
		}, "13s", "250ms").Should(Succeed())
		d = claimOf(ns, "deploy")(Default)

		deleteNow(d)
		for _, lock := range []string{"env-a", "env-b"} {
			Eventually(holderClaimsOf(ns, lock)).Should(BeEmpty(), "deleting the claim releases %s", lock)
		}
	})

	It("lets single-lock claims behind it be granted while it waits, until its lease-long bound", func() {
		ns := newNamespace()
		newLock(ns, "env-a", func(l *locksv1alpha1.DistributedLock) { l.Spec.LeaseDurationSeconds = 5 })
		newLock(ns, "env-b", func(l *locksv1alpha1.DistributedLock) { l.Spec.LeaseDurationSeconds = 5 })
		newClaim(ns, "on-b", "env-b", "")
		Eventually(phaseOf(ns, "on-b")).Should(Equal(held))
		newSeveralClaim(ns, "deploy", "env-a", "env-b")
		Eventually(acquired(ns, "deploy")).Should(Equal("False/WaitingForLocks"))

		// Within the bound a claim behind it takes env-a, which deploy cannot use yet.
		newClaim(ns, "early", "env-a", "")
		Eventually(phaseOf(ns, "early")).Should(Equal(held))
		deleteNow(claimOf(ns, "early")(Default))

		// Past it (a lease, 5 s, since deploy was queued) env-a grants nothing behind deploy.
		queued := claimOf(ns, "deploy")(Default)
		time.Sleep(time.Until(queued.CreationTimestamp.Add(6 * time.Second)))
		newClaim(ns, "late", "env-a", "")
		Eventually(acquired(ns, "late")).Should(Equal("False/Queued"))
		Consistently(phaseOf(ns, "late"), "1s").Should(Equal(pending), "env-a is free, but deploy is ahead past its bound")

		deleteNow(claimOf(ns, "on-b")(Default))
		Eventually(phaseOf(ns, "deploy")).Should(Equal(held))
		Expect(phaseOf(ns, "late")()).To(Equal(pending))
		deleteNow(claimOf(ns, "deploy")(Default))
		Eventually(phaseOf(ns, "late")).Should(Equal(held))
	})

	It("grants crossing claims in turn, never two holders of one lock and no deadlock", func() {
		ns := newNamespace()
		for _, l := range []string{"x", "y", "z"} {
			newLock(ns, l)
		}
		// Each pair of claims shares one lock; together they cross as three claims around a
		// cycle, in every order of naming.
		newSeveralClaim(ns, "xy", "x", "y")
		newSeveralClaim(ns, "yz", "z", "y")
		newSeveralClaim(ns, "zx", "x", "z")
		done := map[string]bool{}
		for len(done) < 3 {
			var holding []string
			Eventually(func(g Gomega) []string {
				holding = nil
				for _, name := range []string{"xy", "yz", "zx"} {
					if !done[name] && claimOf(ns, name)(g).Status.Phase == held {
						holding = append(holding, name)
					}
				}
				return holding
			}).ShouldNot(BeEmpty())
			Expect(holding).To(HaveLen(1), "any two of them share a lock")
			for _, lock := range []string{"x", "y", "z"} {
				Expect(len(holderClaimsOf(ns, lock)(Default))).To(BeNumerically("<=", 1))
			}
			done[holding[0]] = true
			deleteNow(claimOf(ns, holding[0])(Default))
		}
	})

	It("says which of its locks does not exist", func() {
		ns := newNamespace()
		newLock(ns, "env-a")
		newSeveralClaim(ns, "deploy", "env-a", "env-missing")
		Eventually(acquired(ns, "deploy")).Should(Equal("False/LockNotFound"))
		Expect(holderClaimsOf(ns, "env-a")(Default)).To(BeEmpty())
		Consistently(claimVersion(ns, "deploy"), "2s").Should(Equal(claimOf(ns, "deploy")(Default).ResourceVersion), "written once while it waits")
		newLock(ns, "env-missing")
		Eventually(phaseOf(ns, "deploy")).Should(Equal(held))
	})
})

var _ = Describe("A pod annotated with several locks", func() {
	It("is ungated once it holds them all, with each lock's token in its annotation, and passes them on when it goes", func() {
		ns := newNamespace()
		newLock(ns, "env-a")
		newLock(ns, "env-b")
		newClaim(ns, "on-b", "env-b", "")
		Eventually(phaseOf(ns, "on-b")).Should(Equal(held))
		first := newLockPod(ns, "deploy-1", "env-b, env-a", true)
		name := locksv1alpha1.PodClaimNameOfLocks(first.Name, first.UID, []string{"env-a", "env-b"})
		Eventually(acquired(ns, name)).Should(Equal("False/WaitingForLocks"))
		// The second pod only now, so that its claim arrives after the first's: two pods made
		// together are reconciled side by side, and their claims arrive in either order.
		second := newLockPod(ns, "deploy-2", "env-a,env-b", true)
		Expect(claimOf(ns, name)(Default).Spec.LockNames).To(Equal([]string{"env-a", "env-b"}))
		Consistently(podState(ns, "deploy-1")).WithTimeout(time.Second).Should(Equal("gated/"))

		deleteNow(claimOf(ns, "on-b")(Default))
		Eventually(podState(ns, "deploy-1")).Should(MatchRegexp(`^ungated/env-a=\d+,env-b=\d+$`))
		c := claimOf(ns, name)(Default)
		Expect(podState(ns, "deploy-1")(Default)).To(Equal(fmt.Sprintf("ungated/env-a=%d,env-b=%d",
			c.Status.Locks[0].FencingToken, c.Status.Locks[1].FencingToken)))
		Expect(podState(ns, "deploy-2")(Default)).To(Equal("gated/"))

		deleteNow(first)
		Eventually(podState(ns, "deploy-2")).Should(MatchRegexp(`^ungated/env-a=\d+,env-b=\d+$`))
		Expect(phaseOf(ns, locksv1alpha1.PodClaimNameOfLocks(second.Name, second.UID, []string{"env-b", "env-a"}))()).To(Equal(held))
	})

	It("stays gated with a warning when the list names a lock twice, or too many", func() {
		ns := newNamespace()
		newLockPod(ns, "twice", "env-a,env-a", true)
		newLockPod(ns, "nine", "a,b,c,d,e,f,g,h,i", true)
		for _, pod := range []string{"twice", "nine"} {
			Eventually(podEventReasons(ns, pod)).Should(ContainElement("InvalidLockAnnotation"))
			Expect(podState(ns, pod)(Default)).To(Equal("gated/"))
		}
		Expect(claimsIn(ns)(Default)).To(BeEmpty())
	})
})

var _ = Describe("A Job annotated with several locks", func() {
	It("is resumed once it holds them all, with each lock's token, and the next such Job after it", func() {
		ns := newNamespace()
		newLock(ns, "env-a")
		newLock(ns, "env-b")
		newClaim(ns, "on-a", "env-a", "")
		Eventually(phaseOf(ns, "on-a")).Should(Equal(held))
		first := newLockJob(ns, "deploy-1", "env-b,env-a", true)
		name := locksv1alpha1.PodClaimNameOfLocks(first.Name, first.UID, []string{"env-a", "env-b"})
		// Queued on env-a, its home lock (the first by name), which on-a holds.
		Eventually(acquired(ns, name)).Should(Equal("False/Queued"))
		newLockJob(ns, "deploy-2", "env-a,env-b", true) // its claim arrives after the first's
		Consistently(jobState(ns, "deploy-1")).WithTimeout(time.Second).Should(Equal("suspended/"))

		deleteNow(claimOf(ns, "on-a")(Default))
		Eventually(jobState(ns, "deploy-1")).Should(MatchRegexp(`^running/env-a=\d+,env-b=\d+/env-a=\d+,env-b=\d+$`))
		Expect(jobState(ns, "deploy-2")(Default)).To(Equal("suspended/"))
		Eventually(jobEvents(ns, "deploy-1")).Should(ContainElement(MatchRegexp(`^LockAcquired: Locks env-a,env-b held together with fencing tokens env-a=\d+,env-b=\d+; resumed$`)))

		finishJob(first, batchv1.JobComplete)
		Eventually(jobState(ns, "deploy-2")).Should(MatchRegexp(`^running/env-a=\d+,env-b=\d+/`))
	})
})
