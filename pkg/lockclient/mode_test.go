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

package lockclient_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// newSharedLock creates a DistributedLock of places places on the built-in backend.
func newSharedLock(ns, name string, places int32) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx(), &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: 6, MaxHolders: places}})).To(Succeed())
}

// claimMode reads the spec.mode of a claim.
func claimMode(ns, name string) locksv1alpha1.LockMode {
	GinkgoHelper()
	c := &locksv1alpha1.LockClaim{}
	Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
	return c.Spec.Mode
}

var _ = Describe("Request.Mode", func() {
	It("holds a lock of several places Shared beside others, or Exclusive alone, and Status shows each holder", func() {
		ns := newNamespace()
		newSharedLock(ns, "reports", 3)
		a, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "reports", Mode: locksv1alpha1.LockModeShared})
		Expect(err).NotTo(HaveOccurred())
		b, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "reports"}) // the default: Shared
		Expect(err).NotTo(HaveOccurred())
		Expect([]locksv1alpha1.LockMode{a.Mode, b.Mode}).To(Equal([]locksv1alpha1.LockMode{"Shared", "Shared"}))
		Expect(claimMode(ns, a.Claim)).To(Equal(locksv1alpha1.LockModeShared))
		Expect(b.FencingToken).To(BeNumerically(">", a.FencingToken))

		writer := acquireAsync(ctx(), lockclient.Request{Namespace: ns, Lock: "reports", Mode: locksv1alpha1.LockModeExclusive})
		Consistently(writer, 500*time.Millisecond).ShouldNot(Receive(), "the writer waits for the readers")
		Eventually(func(g Gomega) {
			st, err := locks.Status(ctx(), ns, "reports")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.MaxHolders).To(Equal(int32(3)))
			g.Expect(st.Holding).To(Equal(2))
			g.Expect(st.Holders).To(HaveExactElements(
				And(HaveField("Claim", a.Claim), HaveField("Mode", locksv1alpha1.LockModeShared), HaveField("FencingToken", a.FencingToken)),
				And(HaveField("Claim", b.Claim), HaveField("Mode", locksv1alpha1.LockModeShared), HaveField("FencingToken", b.FencingToken))))
			g.Expect(st.Holder.Claim).To(Equal(a.Claim))
			g.Expect(st.Waiting).To(Equal(1))
			g.Expect(st.Queue).To(ConsistOf(HaveField("Mode", locksv1alpha1.LockModeExclusive)))
		}).Should(Succeed())

		// A reader behind the waiting writer is busy, although a place is free. (Claims made in
		// one second are queued by name: the reader's must be made in a later second.)
		st, err := locks.Status(ctx(), ns, "reports")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool { return time.Now().After(st.Queue[0].Created.Add(time.Second)) }).Should(BeTrue())
		_, err = locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "reports"})
		Expect(err).To(MatchError(lockclient.ErrLockBusy))

		Expect(a.Release(ctx())).To(Succeed())
		Expect(b.Release(ctx())).To(Succeed())
		var w acquisition
		Eventually(writer).Should(Receive(&w))
		Expect(w.err).NotTo(HaveOccurred())
		Expect(w.res.Mode).To(Equal(locksv1alpha1.LockModeExclusive))
		Expect(claimMode(ns, w.res.Claim)).To(Equal(locksv1alpha1.LockModeExclusive))
		Expect(w.res.FencingToken).To(BeNumerically(">", b.FencingToken))
		_, err = locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "reports"})
		Expect(err).To(MatchError(lockclient.ErrLockBusy), "nothing beside a writer")
		Expect(w.res.Release(ctx())).To(Succeed())

		// With a place free and nobody waiting, TryAcquire takes one.
		r, err := locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "reports", Mode: locksv1alpha1.LockModeShared})
		Expect(err).NotTo(HaveOccurred())
		r2, err := locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "reports", Mode: locksv1alpha1.LockModeShared})
		Expect(err).NotTo(HaveOccurred())
		_, err = locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "reports", Mode: locksv1alpha1.LockModeExclusive})
		Expect(err).To(MatchError(lockclient.ErrLockBusy), "a writer beside readers")
		Expect(r.Release(ctx())).To(Succeed())
		Expect(r2.Release(ctx())).To(Succeed())
	})

	It("refuses a mode that is not one, and another mode than the one of a pod's existing claim", func() {
		ns := newNamespace()
		newSharedLock(ns, "db", 2)
		_, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Mode: "exclusive"})
		Expect(err).To(MatchError(`lockclient: Request.Mode must be Shared or Exclusive, not "exclusive"`))
		Expect(claimsOf(ns)(Default)).To(BeEmpty())

		p := newPod(ns, "migrate")
		held, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p), Mode: locksv1alpha1.LockModeExclusive})
		Expect(err).NotTo(HaveOccurred())
		_, err = locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p), Mode: locksv1alpha1.LockModeShared})
		Expect(err).To(MatchError(lockclient.ErrModeConflict))
		Expect(err.Error()).To(Equal(`pod migrate already has LockClaim ` + held.Claim + ` for lock "db" in mode Exclusive, not Shared, and a claim's mode cannot change`))
		for _, mode := range []locksv1alpha1.LockMode{"", locksv1alpha1.LockModeExclusive} {
			again, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p), Mode: mode})
			Expect(err).NotTo(HaveOccurred(), "mode %q", mode)
			Expect(again.Reattached).To(BeTrue())
			Expect(again.Mode).To(Equal(locksv1alpha1.LockModeExclusive))
			Expect(again.FencingToken).To(Equal(held.FencingToken))
		}
		Expect(claimsOf(ns)(Default)).To(HaveLen(1))
	})

	It("asks for a priority, and refuses another one than that of a pod's existing claim", func() {
		ns := newNamespace()
		newSharedLock(ns, "db", 1)
		p := newPod(ns, "hotfix")
		held, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p), Priority: 10})
		Expect(err).NotTo(HaveOccurred())
		claim := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: held.Claim}, claim)).To(Succeed())
		Expect(claim.Spec.Priority).To(Equal(int32(10)))
		_, err = locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p), Priority: 3})
		Expect(err).To(MatchError(lockclient.ErrPriorityConflict))
		Expect(err.Error()).To(Equal(`pod hotfix already has LockClaim ` + held.Claim + ` for lock "db" at priority 10, not 3, and a claim's priority cannot change`))
		again, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p)})
		Expect(err).NotTo(HaveOccurred(), "0 takes the claim as it is")
		Expect(again.Reattached).To(BeTrue())
	})
})
