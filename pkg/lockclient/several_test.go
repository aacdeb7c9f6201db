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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// recordToken is lock's record's token for claim; 0 when it does not name it.
func recordToken(ns, lock, claim string) int64 {
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

var _ = Describe("Several locks at once", func() {
	It("acquires them together and gives each one's token", func() {
		ns := newNamespace()
		newLock(ns, "staging")
		newLock(ns, "prod")
		hold, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Locks: []string{"staging", "prod"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(hold.Lock).To(Equal("prod,staging"))
		Expect(hold.FencingToken).To(BeZero())
		Expect(hold.Locks).To(HaveLen(2))
		for i, want := range []string{"prod", "staging"} {
			Expect(hold.Locks[i].Lock).To(Equal(want))
			Expect(hold.Locks[i].FencingToken).To(Equal(recordToken(ns, want, hold.Claim)))
		}
		Expect(hold.Err()).To(Succeed())
		Expect(hold.Release(ctx())).To(Succeed())
		// The claim is gone when Release returns; the lock's next pass drops it from the record.
		for _, lock := range []string{"prod", "staging"} {
			Eventually(func() int64 { return recordToken(ns, lock, hold.Claim) }).Should(BeZero(), "the record of %s", lock)
		}
	})

	It("tries them once: busy while one of them is held, and holds neither", func() {
		ns := newNamespace()
		newLock(ns, "staging")
		newLock(ns, "prod")
		other, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "staging"})
		Expect(err).NotTo(HaveOccurred())
		_, err = locks.TryAcquire(ctx(), lockclient.Request{Namespace: ns, Locks: []string{"prod", "staging"}})
		Expect(err).To(MatchError(lockclient.ErrLockBusy))
		Expect(err.Error()).To(ContainSubstring(`lock "prod,staging"`))
		l := &locksv1alpha1.DistributedLock{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "prod"}, l)).To(Succeed())
		Expect(l.Status.CurrentHolders()).To(BeEmpty(), "nothing held on prod while staging is taken")
		Expect(other.Release(ctx())).To(Succeed())
	})

	It("refuses requests that name the locks wrongly, and a lock that does not exist", func() {
		ns := newNamespace()
		newLock(ns, "prod")
		for _, tc := range []struct {
			req  lockclient.Request
			want string
		}{
			{lockclient.Request{Namespace: ns, Lock: "prod", Locks: []string{"a", "b"}}, "lockclient: set one of Request.Lock and Request.Locks, not both"},
			{lockclient.Request{Namespace: ns, Locks: []string{"prod"}}, "lockclient: Request.Locks names 2 to 8 locks, not 1 (one lock: Request.Lock)"},
			{lockclient.Request{Namespace: ns, Locks: []string{"prod", "prod"}}, "lockclient: Request.Locks names a lock twice: [prod prod]"},
		} {
			_, err := locks.Acquire(ctx(), tc.req)
			Expect(err).To(MatchError(tc.want))
		}
		_, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Locks: []string{"prod", "staging"}})
		Expect(err).To(MatchError(lockclient.ErrLockNotFound))
		Expect(err.Error()).To(ContainSubstring(`"staging"`))
		Expect(claimsOf(ns)(Default)).To(BeEmpty())
	})

	It("makes one claim of a pod for the set, whatever the order", func() {
		ns := newNamespace()
		newLock(ns, "staging")
		newLock(ns, "prod")
		p := newPod(ns, "deploy")
		hold, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Locks: []string{"staging", "prod"}, Pod: podRef(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(hold.Claim).To(Equal(locksv1alpha1.PodClaimNameOfLocks(p.Name, p.UID, []string{"prod", "staging"})))
		again, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Locks: []string{"prod", "staging"}, Pod: podRef(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Reattached).To(BeTrue())
		Expect(again.Claim).To(Equal(hold.Claim))
		Expect(claimsOf(ns)(Default)).To(HaveLen(1))
		Expect(hold.Release(ctx())).To(Succeed())
	})
})
