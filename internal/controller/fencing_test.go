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
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/fencing"
)

var _ = Describe("Fencing tokens", func() {
	// deleteClaim deletes a claim and waits until it is gone (released and let go).
	deleteClaim := func(ns, name string) {
		GinkgoHelper()
		c := claimOf(ns, name)(Default)
		Expect(k8sClient.Delete(ctx(), c)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx(), key(c), &locksv1alpha1.LockClaim{}))
		}).Should(BeTrue())
	}

	It("keep increasing with the controller's clock stepped back and a lock re-created at once, its finalizer removed by hand", func() {
		ns := newNamespace()
		lock := newLock(ns, "db")
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		tokenA := claimOf(ns, "a")(Default).Status.FencingToken
		Expect(tokenA).To(BeNumerically(">", fencing.Offset))
		deleteClaim(ns, "a")

		controllerClock.Set(-time.Hour)
		DeferCleanup(func() { controllerClock.Set(0) })
		newClaim(ns, "b", "db", "")
		// b's grant is what counts, not how long it lasts: a hold granted an hour back on the
		// controller's clock may be judged lapsed at its first renewal, rightly, when the built-in
		// backend's session history has a gap of a lease in the hour before (another spec's
		// manager restart leaves one), and b then ends Lost, its token kept.
		var tokenB int64
		Eventually(func() int64 {
			tokenB = claimOf(ns, "b")(Default).Status.FencingToken
			return tokenB
		}).ShouldNot(BeZero(), "b is granted")
		Expect(tokenB).To(BeNumerically(">", tokenA), "the controller's clock stepped back an hour")
		deleteClaim(ns, "b")
		controllerClock.Set(0)

		// Delete the lock and take its finalizer off by hand, so that nothing waits, then
		// create it again at once.
		Expect(k8sClient.Delete(ctx(), lock)).To(Succeed())
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			err := k8sClient.Get(ctx(), key(lock), l)
			if apierrors.IsNotFound(err) {
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			l.Finalizers = nil
			g.Expect(k8sClient.Update(ctx(), l)).To(Succeed())
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx(), key(lock), l))).To(BeTrue())
		}).Should(Succeed())
		newLock(ns, "db")
		newClaim(ns, "c", "db", "")
		Eventually(phaseOf(ns, "c")).Should(Equal(held))
		Expect(claimOf(ns, "c")(Default).Status.FencingToken).To(BeNumerically(">", tokenB), "the lock re-created at once")
	})

	It("start above the tokens of the first, clock-seeded scheme after an upgrade", func() {
		ns := newNamespace()
		lock := newLock(ns, "legacy")
		// A token of lockwarden's first scheme (the lock's creation second × 10⁶ plus a count),
		// from an API server whose clock ran an hour fast when the lock was created.
		old := time.Now().Add(time.Hour).Unix()*1_000_000 + 5
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), key(lock), l)).To(Succeed())
			l.Status.FencingToken = old
			g.Expect(k8sClient.Status().Update(ctx(), l)).To(Succeed())
		}).Should(Succeed())
		newClaim(ns, "a", "legacy", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		Expect(claimOf(ns, "a")(Default).Status.FencingToken).To(BeNumerically(">", old))
	})
})
