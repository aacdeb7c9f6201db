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
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

var _ = Describe("Acquire", func() {
	It("grants three pods in order with rising tokens, and release hands the lock to the next", func() {
		ns := newNamespace()
		newLock(ns, "db")
		p1, p2, p3 := newPod(ns, "pod-1"), newPod(ns, "pod-2"), newPod(ns, "pod-3")

		r1, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p1)})
		Expect(err).NotTo(HaveOccurred())
		Expect(r1.Pod).To(Equal("pod-1"))
		Expect(r1.Holder()).To(Equal("pod-1"))
		Expect(r1.Identity).To(Equal(string(p1.UID)))
		Expect(r1.FencingToken).To(BeNumerically(">", 0))
		Expect(r1.ExpireTime).To(BeTemporally(">", time.Now()))
		Expect(r1.Claim).To(Equal(lockclient.ClaimName("pod-1", p1.UID, "db")))

		// The claim is owned by its pod, so that it goes with the pod.
		claim := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: r1.Claim}, claim)).To(Succeed())
		Expect(claim.OwnerReferences).To(ConsistOf(HaveField("UID", p1.UID)))
		Expect(claim.Spec.Holder.PodName).To(Equal("pod-1"))

		second := acquireAsync(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p2)})
		Eventually(claimExists(ns, lockclient.ClaimName("pod-2", p2.UID, "db"))).Should(BeTrue())
		third := acquireAsync(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p3)})
		Eventually(claimExists(ns, lockclient.ClaimName("pod-3", p3.UID, "db"))).Should(BeTrue())

		// The queue, in order.
		Eventually(func(g Gomega) {
			st, err := locks.Status(ctx(), ns, "db")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Holder).NotTo(BeNil())
			g.Expect(st.Holder.Pod).To(Equal("pod-1"))
			g.Expect(st.Holder.FencingToken).To(Equal(r1.FencingToken))
			g.Expect(st.Holder.ExpireTime).NotTo(BeNil())
			g.Expect(st.Queue).To(HaveLen(2))
			g.Expect(st.Queue[0].Pod).To(Equal("pod-2"))
			g.Expect(st.Queue[0].Position).To(Equal(1))
			g.Expect(st.Queue[1].Pod).To(Equal("pod-3"))
		}).Should(Succeed())
		Consistently(second, 500*time.Millisecond).ShouldNot(Receive())

		// Releasing the first claim hands the lock to the second pod.
		Expect(locks.Release(ctx(), ns, r1.Claim)).To(Succeed())
		Expect(claimExists(ns, r1.Claim)()).To(BeFalse(), "Release returns once the claim is gone")
		var a2 acquisition
		Eventually(second).Should(Receive(&a2))
		Expect(a2.err).NotTo(HaveOccurred())
		Expect(a2.res.Pod).To(Equal("pod-2"))
		Expect(a2.res.FencingToken).To(BeNumerically(">", r1.FencingToken))
		Expect(a2.res.Waited).To(BeNumerically(">", 0))
		Consistently(third, 500*time.Millisecond).ShouldNot(Receive())

		// The second pod finishes: the controller releases its lock for the third.
		setPodPhase(p2, corev1.PodSucceeded)
		var a3 acquisition
		Eventually(third).Should(Receive(&a3))
		Expect(a3.err).NotTo(HaveOccurred())
		Expect(a3.res.Pod).To(Equal("pod-3"))
		Expect(a3.res.FencingToken).To(BeNumerically(">", a2.res.FencingToken))
	})

	It("re-attaches a pod to the claim it already has instead of queueing twice", func() {
		ns := newNamespace()
		newLock(ns, "db")
		p1, p2 := newPod(ns, "pod-1"), newPod(ns, "pod-2")

		first, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p1)})
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Reattached).To(BeFalse())
		again, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p1)})
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Reattached).To(BeTrue())
		Expect(again.Claim).To(Equal(first.Claim))
		Expect(again.FencingToken).To(Equal(first.FencingToken))

		// A process killed while it waited left its claim queued: the restarted one takes it over.
		claim, reattached, err := locks.Claim(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p2)})
		Expect(err).NotTo(HaveOccurred())
		Expect(reattached).To(BeFalse())
		waiting := acquireAsync(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: &lockclient.Pod{Name: "pod-2"}})
		Consistently(waiting, 500*time.Millisecond).ShouldNot(Receive())
		Expect(claimsOf(ns)(Default)).To(HaveLen(2))

		Expect(locks.Release(ctx(), ns, first.Claim)).To(Succeed())
		var a acquisition
		Eventually(waiting).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
		Expect(a.res.Reattached).To(BeTrue())
		Expect(a.res.Claim).To(Equal(claim.Name))
		Expect(a.res.FencingToken).To(BeNumerically(">", first.FencingToken))
	})

	It("refuses to attach to a claim of the pod's name with an identity of its own (a forged claim)", func() {
		ns := newNamespace()
		newLock(ns, "db")
		holder, victim := newPod(ns, "holder"), newPod(ns, "victim")
		_, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(holder)})
		Expect(err).NotTo(HaveOccurred())

		// Someone with the lockctl Role makes the claim victim's lockctl would make, owned by
		// victim, with the holder's identity (its pod's UID, shown in the lock's status).
		forged := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lockclient.ClaimName("victim", victim.UID, "db"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "victim", UID: victim.UID}}},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: "victim", Identity: string(holder.UID)}}}
		Expect(k8sClient.Create(ctx(), forged)).To(Succeed())

		// Bounded: a lockctl that attached would wait behind the holder.
		_, err = locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(victim), Timeout: 5 * time.Second})
		Expect(err).To(MatchError(ContainSubstring("exists but is not pod victim's claim for lock db")))
	})

	It("returns ErrLockBusy when the lock's queue is full (maxQueue), without leaving a claim waiting", func() {
		ns := newNamespace()
		l := newLock(ns, "db")
		l.Spec.MaxQueue = ptr.To[int32](1)
		Expect(k8sClient.Update(ctx(), l)).To(Succeed())
		holder, waiter, late := newPod(ns, "holder"), newPod(ns, "waiter"), newPod(ns, "late")
		_, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(holder)})
		Expect(err).NotTo(HaveOccurred())
		waiting, _, err := locks.Claim(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(waiter)})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) locksv1alpha1.ClaimPhase {
			c := &locksv1alpha1.LockClaim{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(waiting), c)).To(Succeed())
			return c.Status.Phase
		}).Should(Equal(locksv1alpha1.ClaimPending))

		_, err = locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(late), Timeout: 10 * time.Second})
		Expect(err).To(MatchError(lockclient.ErrLockBusy), queueOf(ns, "db"))
		Expect(err.Error()).To(ContainSubstring("queue is full (maxQueue 1)"))
	})

	It("replaces a claim of the pod that has ended", func() {
		ns := newNamespace()
		newLock(ns, "db")
		holder, p := newPod(ns, "holder"), newPod(ns, "pod-1")
		_, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(holder)})
		Expect(err).NotTo(HaveOccurred())

		// A claim of pod-1 that timed out in an earlier attempt.
		claim, _, err := locks.Claim(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p), Timeout: time.Second})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) locksv1alpha1.ClaimPhase {
			c := &locksv1alpha1.LockClaim{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(claim), c)).To(Succeed())
			return c.Status.Phase
		}).Should(Equal(locksv1alpha1.ClaimTimedOut))

		again, reattached, err := locks.Claim(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(reattached).To(BeFalse())
		Expect(again.Name).To(Equal(claim.Name))
		Expect(again.UID).NotTo(Equal(claim.UID))
	})

	It("returns ErrTimedOut when the lock is not granted in time, and leaves no claim behind", func() {
		ns := newNamespace()
		newLock(ns, "db")
		holder, p := newPod(ns, "holder"), newPod(ns, "pod-1")
		held, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(holder)})
		Expect(err).NotTo(HaveOccurred())

		start := time.Now()
		_, err = locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p), Timeout: 2 * time.Second})
		Expect(err).To(MatchError(lockclient.ErrTimedOut))
		Expect(err.Error()).To(ContainSubstring(`timed out waiting for lock "db"`))
		Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
		Eventually(claimExists(ns, lockclient.ClaimName("pod-1", p.UID, "db"))).Should(BeFalse())

		st, err := locks.Status(ctx(), ns, "db")
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Holder.Claim).To(Equal(held.Claim))
		Expect(st.Queue).To(BeEmpty())

		// A caller's own deadline counts as a timeout too, through Wait.
		claim, _, err := locks.Claim(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		c, cancel := context.WithTimeout(ctx(), time.Second)
		defer cancel()
		_, err = locks.Wait(c, ns, claim.Name)
		Expect(err).To(MatchError(lockclient.ErrTimedOut))
		Expect(err.Error()).To(ContainSubstring("queue position 1"))
	})

	It("returns ErrLockNotFound for a missing lock, and when the lock is deleted while waiting", func() {
		ns := newNamespace()
		p := newPod(ns, "pod-1")
		_, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "nope", Pod: podRef(p)})
		Expect(err).To(MatchError(lockclient.ErrLockNotFound))
		Expect(err.Error()).To(Equal(`lock "nope" not found in namespace "` + ns + `"`))
		Expect(claimsOf(ns)(Default)).To(BeEmpty())

		lock := newLock(ns, "db")
		_, err = locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		waiting := acquireAsync(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p)})
		Eventually(claimExists(ns, lockclient.ClaimName("pod-1", p.UID, "db"))).Should(BeTrue())
		Expect(k8sClient.Delete(ctx(), lock)).To(Succeed())
		var a acquisition
		Eventually(waiting).Should(Receive(&a))
		Expect(a.err).To(MatchError(lockclient.ErrLockNotFound))
	})

	It("returns ErrPodNotFound for a missing or replaced pod", func() {
		ns := newNamespace()
		newLock(ns, "db")
		_, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: &lockclient.Pod{Name: "ghost"}})
		Expect(err).To(MatchError(lockclient.ErrPodNotFound))
		Expect(err.Error()).To(Equal(`pod "ghost" not found in namespace "` + ns + `"`))

		p := newPod(ns, "pod-1")
		_, err = locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: &lockclient.Pod{Name: "pod-1", UID: "not-" + p.UID}})
		Expect(err).To(MatchError(lockclient.ErrPodNotFound))
		Expect(err.Error()).To(ContainSubstring("it was replaced"))
		Expect(claimsOf(ns)(Default)).To(BeEmpty())

		// A claim waiting for a pod that does not exist (made by hand) fails Wait fast.
		claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "for-ghost"},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: "ghost"}}}
		Expect(k8sClient.Create(ctx(), claim)).To(Succeed())
		c, cancel := context.WithTimeout(ctx(), 20*time.Second)
		defer cancel()
		_, err = locks.Wait(c, ns, "for-ghost")
		Expect(err).To(MatchError(lockclient.ErrPodNotFound))
	})

	It("returns ErrForbidden for a service account without RBAC", func() {
		ns := newNamespace()
		newLock(ns, "db")
		p := newPod(ns, "pod-1")
		impersonated := rest.CopyConfig(cfg)
		impersonated.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":nobody"}
		nobody, err := lockclient.New(impersonated)
		Expect(err).NotTo(HaveOccurred())

		_, err = nobody.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(p)})
		Expect(err).To(MatchError(lockclient.ErrForbidden))
		Expect(err.Error()).To(ContainSubstring(`cannot get resource "distributedlocks"`))
		_, err = nobody.Status(ctx(), ns, "db")
		Expect(err).To(MatchError(lockclient.ErrForbidden))
		Expect(nobody.Release(ctx(), ns, "any")).To(MatchError(lockclient.ErrForbidden))
	})
})

var _ = Describe("Detached claims", func() {
	It("hold the lock until released, then the next one gets it", func() {
		ns := newNamespace()
		newLock(ns, "report")
		first, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "report"})
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Pod).To(BeEmpty())
		Expect(first.Holder()).To(Equal(first.Claim))

		next := acquireAsync(ctx(), lockclient.Request{Namespace: ns, Lock: "report"})
		Consistently(next, 500*time.Millisecond).ShouldNot(Receive())
		Expect(locks.Release(ctx(), ns, first.Claim)).To(Succeed())
		var a acquisition
		Eventually(next).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
		Expect(a.res.FencingToken).To(BeNumerically(">", first.FencingToken))

		// Releasing twice is fine.
		Expect(locks.Release(ctx(), ns, first.Claim)).To(Succeed())
	})

	It("WaitLost reports a hold that ends", func() {
		ns := newNamespace()
		newLock(ns, "report")
		held, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "report"})
		Expect(err).NotTo(HaveOccurred())

		lost := make(chan error, 1)
		watchCtx, cancel := context.WithCancel(ctx())
		defer cancel()
		go func() { lost <- locks.WaitLost(watchCtx, ns, held.Claim) }()
		Consistently(lost, 500*time.Millisecond).ShouldNot(Receive())

		Expect(k8sClient.Delete(ctx(), &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: held.Claim}})).To(Succeed())
		var err2 error
		Eventually(lost).Should(Receive(&err2))
		Expect(err2).To(MatchError(lockclient.ErrLost))
	})

	It("WaitLost returns nil when its context ends", func() {
		ns := newNamespace()
		newLock(ns, "report")
		held, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "report"})
		Expect(err).NotTo(HaveOccurred())
		c, cancel := context.WithTimeout(ctx(), 300*time.Millisecond)
		defer cancel()
		Expect(locks.WaitLost(c, ns, held.Claim)).To(Succeed())
	})
})

var _ = Describe("Waiting", func() {
	It("outlives watches that the API server refuses or ends, as in a restart", func() {
		ns := newNamespace()
		newLock(ns, "report")
		first, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "report"})
		Expect(err).NotTo(HaveOccurred())

		flaky := &flakyWatches{refusals: 2, cutAfter: 300 * time.Millisecond}
		flakyCfg := rest.CopyConfig(cfg)
		flakyCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { flaky.next = rt; return flaky }
		c, err := lockclient.New(flakyCfg)
		Expect(err).NotTo(HaveOccurred())
		next := make(chan acquisition, 1)
		go func() {
			res, err := c.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "report"})
			next <- acquisition{res, err}
		}()
		Eventually(flaky.counts).Should(Equal([2]int{2, 2}), "two watches refused, then two cut")
		Expect(next).NotTo(Receive())

		Expect(locks.Release(ctx(), ns, first.Claim)).To(Succeed())
		var a acquisition
		Eventually(next).Should(Receive(&a))
		Expect(a.err).NotTo(HaveOccurred())
		Expect(a.res.FencingToken).To(BeNumerically(">", first.FencingToken))
	})
})

// flakyWatches refuses the first refusals watch requests (503) and cuts each watch it lets
// through after cutAfter, as an API server that restarts or a proxy with an idle timeout would.
// It counts up to refusals+2 watches, then lets them be.
type flakyWatches struct {
	next     http.RoundTripper
	refusals int
	cutAfter time.Duration

	mu           sync.Mutex
	refused, cut int
}

func (f *flakyWatches) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") != "true" {
		return f.next.RoundTrip(req)
	}
	f.mu.Lock()
	refuse, cut := f.refused < f.refusals, f.refused == f.refusals && f.cut < 2
	if refuse {
		f.refused++
	}
	f.mu.Unlock()
	if refuse {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Request: req,
			Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("restarting"))}, nil
	}
	resp, err := f.next.RoundTrip(req)
	if err == nil && cut {
		time.AfterFunc(f.cutAfter, func() {
			f.mu.Lock()
			f.cut++
			f.mu.Unlock()
			_ = resp.Body.Close()
		})
	}
	return resp, err
}

// counts returns how many watches were refused and cut.
func (f *flakyWatches) counts() [2]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return [2]int{f.refused, f.cut}
}
