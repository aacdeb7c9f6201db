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
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/faultproxy"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// A holder cut off from the API server (its connections through a fault proxy black-holed, while
// the controller's are not) ends its hold by its local deadline, before the lock can be granted to
// anyone else.

// cutOffHolder returns a lockclient whose every request goes through a fault proxy in front of
// the API server, and the proxy.
func cutOffHolder() (*lockclient.Client, *faultproxy.Proxy) {
	GinkgoHelper()
	u, err := url.Parse(cfg.Host)
	Expect(err).NotTo(HaveOccurred())
	proxy, err := faultproxy.New(u.Host)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(proxy.Close)
	proxied := rest.CopyConfig(cfg)
	proxied.Host = "https://" + proxy.Addr()
	c, err := lockclient.New(proxied)
	Expect(err).NotTo(HaveOccurred())
	return c, proxy
}

// heal ends the partition; the connections it stalled carry on.
func heal(proxy *faultproxy.Proxy) { proxy.Heal() }

// endedAt reports, once, when ctx ended.
func endedAt(c context.Context) <-chan time.Time {
	at := make(chan time.Time, 1)
	context.AfterFunc(c, func() { at <- time.Now() })
	return at
}

// grantedAt is when the lock record granted claim, zero while it does not name it.
func grantedAt(ns, lock, claim string) func(g Gomega) time.Time {
	return func(g Gomega) time.Time {
		l := &locksv1alpha1.DistributedLock{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: lock}, l)).To(Succeed())
		for _, h := range l.Status.CurrentHolders() {
			if h.Claim == claim {
				return h.AcquireTime.Time
			}
		}
		return time.Time{}
	}
}

var _ = Describe("A holder's local deadline", func() {
	It("ends a hold whose renewals it cannot see at the claim's last expireTime, while the controller still renews it", func() {
		ns := newNamespace()
		// A lease of 12 s: the controller rewrites expireTime an eighth of a lease (1.5 s) before
		// it passes, and the hold ends its skew allowance (500 ms) before it, so the rewrite has
		// 1 s to reach the holder. With the suite's 6 s lease it had 375 ms, which a loaded CI
		// machine once missed, ending a hold the controller was still renewing.
		Expect(k8sClient.Create(ctx(), &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: 12}})).To(Succeed())
		holder, proxy := cutOffHolder()
		hold, err := holder.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		ended := endedAt(hold.Context())
		// Held across a refresh of its expireTime first (due 10.5 s after the grant): the deadline
		// moves with it.
		Consistently(hold.Err, 13*time.Second).Should(Succeed())

		proxy.Partition(faultproxy.Blackhole)
		cut := time.Now()
		onServer := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: hold.Claim}, onServer)).To(Succeed())
		lastExpire := onServer.Status.ExpireTime.Time // what the holder can have seen, at most

		var at time.Time
		Eventually(ended, 15*time.Second).Should(Receive(&at))
		Expect(hold.Err()).To(MatchError(lockclient.ErrExpired))
		Expect(hold.Err()).To(MatchError(lockclient.ErrLost))
		Expect(at).To(BeTemporally(">", cut))
		Expect(at).To(BeTemporally("<", lastExpire), "ended after the last expireTime it could have seen")
		// The controller, which still reaches the API server, kept renewing: the end was the
		// holder's caution, not a loss.
		Expect(claimPhase(ns, hold.Claim)(Default)).To(Equal(locksv1alpha1.ClaimHeld))

		heal(proxy)
		Expect(hold.Release(ctx())).To(Succeed())
	})

	It("ends a heartbeat claim's hold before the controller, no longer seeing its heartbeat, grants the next claim", func() {
		ns := newNamespace()
		// A lease far longer than the heartbeat: the claim's expireTime is no bound here.
		Expect(k8sClient.Create(ctx(), &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: 60}})).To(Succeed())
		holder, proxy := cutOffHolder()
		hold, err := holder.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Heartbeat: 3 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		ended := endedAt(hold.Context())
		next := acquireAsync(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Consistently(hold.Err, 4*time.Second).Should(Succeed())

		proxy.Partition(faultproxy.Blackhole)
		var nextHold acquisition
		Eventually(next, 30*time.Second).Should(Receive(&nextHold))
		Expect(nextHold.err).NotTo(HaveOccurred())
		defer func() { Expect(nextHold.res.Release(ctx())).To(Succeed()) }()
		granted := grantedAt(ns, "db", nextHold.res.Claim)(Default)
		Expect(granted.IsZero()).To(BeFalse())

		var at time.Time
		Expect(ended).To(Receive(&at), "the cut-off holder was still running when the next claim was granted")
		Expect(at).To(BeTemporally("<", granted))
		Expect(hold.Err()).To(MatchError(lockclient.ErrExpired))
		Expect(hold.Err()).To(MatchError(ContainSubstring("heartbeat Lease")))
		heal(proxy)
		_ = hold.Release(ctx())
	})
})
