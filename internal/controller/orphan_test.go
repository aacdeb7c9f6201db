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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	kubernetesbackend "github.com/lockwarden/lockwarden/internal/backends/kubernetes"
	lwidentity "github.com/lockwarden/lockwarden/internal/identity"
)

// A pass that takes a backend lock can be cut short before the claim's status says Held: the
// process crashes, its status write fails, or it was a deposed leader acting on a stale cache
// in the moment before it noticed. These specs play such a pass by hand while no manager runs
// (with a session of the built-in backend's own name, as another replica would) and check that
// the lock does not stay held for nobody.
var _ = Describe("Holds that no claim records", func() {
	// deposedLeader is a replica of the controller's session on the built-in backend.
	deposedLeader := func() *kubernetesbackend.Backend {
		GinkgoHelper()
		b, err := kubernetesbackend.New(kubernetesbackend.Config{Client: k8sClient, Namespace: controllerNamespace})
		Expect(err).NotTo(HaveOccurred())
		return b
	}
	recordGrant := func(lock *locksv1alpha1.DistributedLock, claim, identity string, token int64) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), key(lock), l)).To(Succeed())
			now := metav1.NewMicroTime(time.Now())
			l.Status.FencingToken = token
			l.Status.Holders = []locksv1alpha1.LockHolder{{Claim: claim, Identity: identity, FencingToken: token, AcquireTime: now,
				BackendIdentity: lwidentity.OnBackend(l.UID, identity)}}
			g.Expect(k8sClient.Status().Update(ctx(), l)).To(Succeed())
		}).Should(Succeed())
	}

	It("releases, when the claim is deleted, a grant that its status never showed", func() {
		ns := newNamespace()
		// A lease far longer than the spec: only a release can free the key in time.
		lock := newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LeaseDurationSeconds = 120 })
		newClaim(ns, "holder", "db", "")
		Eventually(phaseOf(ns, "holder")).Should(Equal(held))
		first := newClaim(ns, "first", "db", "")
		Eventually(acquired(ns, "first")).Should(Equal("False/Queued"))
		w := newClaim(ns, "w", "db", "")
		Eventually(func(g Gomega) {
			g.Expect(claimOf(ns, "w")(g).Status.QueuePosition).To(Equal(int32(2)))
		}).Should(Succeed())
		holder := claimOf(ns, "holder")(Default)

		stopManager()
		// The passes: the holder's hold ended, the first waiter gave up, and w was granted on
		// the backend and on the lock; then w's owner deleted it, before w's status said Held
		// (it still says position 2).
		Expect(k8sClient.Delete(ctx(), first)).To(Succeed())
		b := deposedLeader()
		Expect(b.Release(ctx(), backends.Lease{Key: lock.BackendKey(""), Identity: lwidentity.OnBackend(lock.UID, holder.Status.HolderIdentity)})).To(Succeed())
		_, err := b.TryAcquire(ctx(), lock.BackendKey(""), lwidentity.OnBackend(lock.UID, string(w.UID)), 120*time.Second)
		Expect(err).NotTo(HaveOccurred())
		recordGrant(lock, "w", string(w.UID), holder.Status.FencingToken+1)
		Expect(k8sClient.Delete(ctx(), holder)).To(Succeed())
		Expect(k8sClient.Delete(ctx(), w)).To(Succeed())
		newClaim(ns, "next", "db", "")
		startManager()

		Eventually(phaseOf(ns, "next")).WithTimeout(20 * time.Second).Should(Equal(held))
		Expect(claimOf(ns, "next")(Default).Status.FencingToken).To(BeNumerically(">", holder.Status.FencingToken+1))
		Eventually(func() error { return k8sClient.Get(ctx(), key(w), w) }).Should(MatchError(ContainSubstring("not found")))
	})

	It("releases at once a hold that the lock record names for a claim that is already gone", func() {
		ns := newNamespace()
		// A held lock of its own keeps the controller renewing the session all along.
		newLock(ns, "busy", func(l *locksv1alpha1.DistributedLock) { l.Spec.LeaseDurationSeconds = 5 })
		newClaim(ns, "keeps-session-renewed", "busy", "")
		Eventually(phaseOf(ns, "keeps-session-renewed")).Should(Equal(held))
		lock := newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LeaseDurationSeconds = 5 })

		stopManager()
		// A deposed leader's last act: it grants a claim that the new leader had already let
		// go. No claim exists to release the key, and the new leader shares the session.
		_, err := deposedLeader().TryAcquire(ctx(), lock.BackendKey(""), lwidentity.OnBackend(lock.UID, "uid-of-a-deleted-claim"), 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		recordGrant(lock, "deleted-claim", "uid-of-a-deleted-claim", 1)
		startManager()
		newClaim(ns, "next", "db", "")

		// The lock's pass is the one writer of its record: a hold it names for no claim is
		// released (owner-checked) and the queue goes on, without waiting for the key to expire.
		Eventually(phaseOf(ns, "next")).Should(Equal(held))
		Expect(claimOf(ns, "next")(Default).Status.FencingToken).To(BeNumerically(">", 1))
		Expect(phaseOf(ns, "keeps-session-renewed")()).To(Equal(held))
	})
})
