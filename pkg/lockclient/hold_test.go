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
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// ended says whether a context has ended, for Eventually and Consistently.
func ended(c context.Context) func() bool {
	return func() bool { return c.Err() != nil }
}

// claimPhase reads a claim's phase, for Eventually.
func claimPhase(ns, name string) func(g Gomega) locksv1alpha1.ClaimPhase {
	return func(g Gomega) locksv1alpha1.ClaimPhase {
		c := &locksv1alpha1.LockClaim{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		return c.Status.Phase
	}
}

var _ = Describe("Hold", func() {
	It("keeps its context while held, and Release ends it, deletes the claim and hands the lock on", func() {
		ns := newNamespace()
		newLock(ns, "db")
		hold, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		Expect(hold.FencingToken).To(BeNumerically(">", 0))
		Expect(hold.Lock).To(Equal("db"))
		Expect(hold.Namespace).To(Equal(ns))
		Expect(claimExists(ns, hold.Claim)()).To(BeTrue())

		held := hold.Context()
		Consistently(ended(held), time.Second).Should(BeFalse())
		Expect(hold.Err()).To(Succeed())

		next := acquireAsync(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Consistently(next, 300*time.Millisecond).ShouldNot(Receive())
		Expect(hold.Release(ctx())).To(Succeed())
		Expect(held.Err()).To(MatchError(context.Canceled))
		Expect(context.Cause(held)).To(MatchError(lockclient.ErrReleased))
		Expect(hold.Err()).To(MatchError(lockclient.ErrReleased))
		Expect(claimExists(ns, hold.Claim)()).To(BeFalse(), "Release returns once the claim is gone")
		var a acquisition
		Eventually(next).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
		Expect(a.res.FencingToken).To(BeNumerically(">", hold.FencingToken))

		// Releasing again is fine, and changes nothing.
		Expect(hold.Release(ctx())).To(Succeed())
		Expect(claimExists(ns, a.res.Claim)()).To(BeTrue())
	})

	It("outlives the deadline of the Acquire that returned it", func() {
		ns := newNamespace()
		newLock(ns, "db")
		c, cancel := context.WithTimeout(ctx(), 5*time.Second)
		hold, err := locks.Acquire(c, lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		held := hold.Context()
		cancel()
		Consistently(ended(held), 500*time.Millisecond).Should(BeFalse())
		Expect(hold.Release(ctx())).To(Succeed())
	})

	It("ends its context with ErrLost when someone deletes the claim", func() {
		ns := newNamespace()
		newLock(ns, "db")
		hold, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		held := hold.Context()

		Expect(k8sClient.Delete(ctx(), &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hold.Claim}})).To(Succeed())
		Eventually(ended(held)).Should(BeTrue())
		Expect(context.Cause(held)).To(MatchError(lockclient.ErrLost))
		Expect(hold.Err()).To(MatchError(ContainSubstring(`claim %q in namespace %q`, hold.Claim, ns)))
		// Release after a loss still succeeds (the claim is gone) and keeps the loss as the cause.
		Expect(hold.Release(ctx())).To(Succeed())
		Expect(hold.Err()).To(MatchError(lockclient.ErrLost))
	})

	It("ends its context when the lock is deleted", func() {
		ns := newNamespace()
		lock := newLock(ns, "db")
		hold, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		held := hold.Context()
		Expect(k8sClient.Delete(ctx(), lock)).To(Succeed())
		Eventually(ended(held)).Should(BeTrue())
		Expect(hold.Err()).To(MatchError(lockclient.ErrLost))
		var lost *lockclient.Error
		Expect(errors.As(hold.Err(), &lost)).To(BeTrue())
		Expect(lost.Lock).To(Equal("db"))
	})

	It("ends its context when the holder pod finishes, even if Context is first called after that", func() {
		ns := newNamespace()
		newLock(ns, "db")
		p := newPod(ns, "pod-1")
		hold, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p)})
		Expect(err).NotTo(HaveOccurred())
		setPodPhase(p, corev1.PodSucceeded)
		Eventually(claimPhase(ns, hold.Claim)).Should(Equal(locksv1alpha1.ClaimReleased))

		held := hold.Context()
		Eventually(ended(held)).Should(BeTrue())
		var lost *lockclient.Error
		Expect(errors.As(context.Cause(held), &lost)).To(BeTrue())
		Expect(lost.Phase).To(Equal(locksv1alpha1.ClaimReleased))
		Expect(lost.Reason).To(Equal(locksv1alpha1.ReasonHolderTerminated))
	})
})

var _ = Describe("TryAcquire", func() {
	It("takes a free lock at once", func() {
		ns := newNamespace()
		newLock(ns, "db")
		hold, err := locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		Expect(hold.FencingToken).To(BeNumerically(">", 0))
		st, err := locks.Status(ctx(), ns, "db")
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Holder.Claim).To(Equal(hold.Claim))
		// The claim is the controller's to end if its caller dies: it carries the bound.
		claim := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: hold.Claim}, claim)).To(Succeed())
		Expect(claim.Spec.WaitTimeoutSeconds).To(HaveValue(Equal(int32(lockclient.DefaultTryTimeout / time.Second))))
		Expect(hold.Release(ctx())).To(Succeed())
	})

	It("returns ErrLockBusy for a held lock and leaves no claim behind", func() {
		ns := newNamespace()
		newLock(ns, "db")
		holder, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())

		start := time.Now()
		_, err = locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).To(MatchError(lockclient.ErrLockBusy))
		Expect(err.Error()).To(Equal(`lock "db" in namespace "` + ns + `" is busy (held by claim ` + holder.Claim + `)`))
		Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
		Expect(claimsOf(ns)(Default)).To(HaveLen(1), "TryAcquire returns once its claim is gone")

		// Behind a waiting claim the answer is the same. (The queue is in order of creation
		// second, then name: "a-waiter" is ahead of the try's "db-..." claim.)
		waiter := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-waiter"},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "db"}}
		Expect(k8sClient.Create(ctx(), waiter)).To(Succeed())
		Eventually(claimPhase(ns, "a-waiter")).Should(Equal(locksv1alpha1.ClaimPending))
		_, err = locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).To(MatchError(lockclient.ErrLockBusy))
		Expect(err.Error()).To(HaveSuffix("is busy (held by claim " + holder.Claim + "; 1 claim(s) ahead in the queue)"))
		Expect(claimsOf(ns)(Default)).To(HaveLen(2))

		// The waiter, not a try, gets the lock next.
		Expect(holder.Release(ctx())).To(Succeed())
		Eventually(claimPhase(ns, "a-waiter")).Should(Equal(locksv1alpha1.ClaimHeld))
		st, err := locks.Status(ctx(), ns, "db")
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Holder.Claim).To(Equal("a-waiter"))
		Expect(st.Queue).To(BeEmpty())
	})

	It("returns the pod's own hold, and leaves the pod's waiting claim alone", func() {
		ns := newNamespace()
		newLock(ns, "db")
		p1, p2 := newPod(ns, "pod-1"), newPod(ns, "pod-2")
		first, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p1)})
		Expect(err).NotTo(HaveOccurred())

		again, err := locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p1)})
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Reattached).To(BeTrue())
		Expect(again.FencingToken).To(Equal(first.FencingToken))

		// Another process of pod-2 waits for the lock: a try of pod-2 must not withdraw its claim.
		waiting := acquireAsync(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p2)})
		name := lockclient.ClaimName("pod-2", p2.UID, "db")
		Eventually(claimExists(ns, name)).Should(BeTrue())
		_, err = locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p2)})
		Expect(err).To(MatchError(lockclient.ErrLockBusy))
		Consistently(claimExists(ns, name), 300*time.Millisecond).Should(BeTrue())
		Expect(waiting).NotTo(Receive())
		Expect(first.Release(ctx())).To(Succeed())
		var a acquisition
		Eventually(waiting).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
	})

	It("fails fast for a missing lock, leaving nothing", func() {
		ns := newNamespace()
		_, err := locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Lock: "nope"})
		Expect(err).To(MatchError(lockclient.ErrLockNotFound))
		Expect(err.Error()).To(Equal(`lock "nope" not found in namespace "` + ns + `"`))
		Expect(claimsOf(ns)(Default)).To(BeEmpty())
	})
})

var _ = Describe("WithLock", func() {
	It("runs the function under the lock and releases it after, returning its error", func() {
		ns := newNamespace()
		newLock(ns, "db")
		boom := errors.New("boom")
		var claim string
		err := lockclient.WithLock(ctx(), locks, lockclient.Request{Namespace: ns, Lock: "db"}, func(c context.Context, hold *lockclient.Hold) error {
			claim = hold.Claim
			Expect(hold.FencingToken).To(BeNumerically(">", 0))
			Eventually(claimPhase(ns, hold.Claim)).Should(Equal(locksv1alpha1.ClaimHeld), "the claim says Held one write after the lock record")
			Expect(c.Err()).To(Succeed())
			return boom
		})
		Expect(err).To(MatchError(boom))
		Expect(errors.Is(err, lockclient.ErrLost)).To(BeFalse())
		Expect(claimExists(ns, claim)()).To(BeFalse())
	})

	It("releases the lock when the function panics", func() {
		ns := newNamespace()
		newLock(ns, "db")
		var claim string
		Expect(func() {
			_ = lockclient.WithLock(ctx(), locks, lockclient.Request{Namespace: ns, Lock: "db"}, func(_ context.Context, hold *lockclient.Hold) error {
				claim = hold.Claim
				panic("in the middle of it")
			})
		}).To(PanicWith("in the middle of it"))
		Expect(claim).NotTo(BeEmpty())
		Expect(claimExists(ns, claim)()).To(BeFalse())
		// The claim is gone at once; the lock's record shows the release a pass later.
		Eventually(func(g Gomega) *lockclient.HolderStatus {
			st, err := locks.Status(ctx(), ns, "db")
			g.Expect(err).NotTo(HaveOccurred())
			return st.Holder
		}).Should(BeNil())
	})

	It("cancels the function's context when the lock is lost, and says so", func() {
		ns := newNamespace()
		newLock(ns, "db")
		err := lockclient.WithLock(ctx(), locks, lockclient.Request{Namespace: ns, Lock: "db"}, func(c context.Context, hold *lockclient.Hold) error {
			Expect(k8sClient.Delete(ctx(), &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hold.Claim}})).To(Succeed())
			select {
			case <-c.Done():
				Expect(context.Cause(c)).To(MatchError(lockclient.ErrLost))
				return c.Err()
			case <-time.After(30 * time.Second):
				return errors.New("the context was not cancelled")
			}
		})
		Expect(err).To(MatchError(context.Canceled))
		Expect(err).To(MatchError(lockclient.ErrLost))
		Expect(claimsOf(ns)(Default)).To(BeEmpty())
	})

	It("with Try does not wait for a busy lock and does not run the function", func() {
		ns := newNamespace()
		newLock(ns, "db")
		holder, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		ran := false
		err = lockclient.WithLock(ctx(), locks, lockclient.Request{Namespace: ns, Lock: "db"}, func(context.Context, *lockclient.Hold) error {
			ran = true
			return nil
		}, lockclient.Try())
		Expect(err).To(MatchError(lockclient.ErrLockBusy))
		Expect(ran).To(BeFalse())
		Expect(claimsOf(ns)(Default)).To(HaveLen(1))
		Expect(holder.Release(ctx())).To(Succeed())
	})
})
