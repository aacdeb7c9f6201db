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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// leaseOf reads a Lease; nil when it does not exist.
func leaseOf(ns, name string) func(g Gomega) *coordinationv1.Lease {
	return func(g Gomega) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		err := k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, l)
		if apierrors.IsNotFound(err) {
			return nil
		}
		g.Expect(err).NotTo(HaveOccurred())
		return l
	}
}

var _ = Describe("Heartbeats of detached claims", func() {
	It("creates the claim's heartbeat Lease, renews it while held, and deletes it on Release", func() {
		ns := newNamespace()
		newLock(ns, "db")
		hold, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Heartbeat: 3 * time.Second})
		Expect(err).NotTo(HaveOccurred())

		claim := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: hold.Claim}, claim)).To(Succeed())
		Expect(claim.Spec.Holder).NotTo(BeNil())
		Expect(claim.Spec.Holder.LeaseName).To(Equal(hold.Claim))
		lease := leaseOf(ns, hold.Claim)(Default)
		Expect(lease).NotTo(BeNil())
		Expect(lease.Labels).To(HaveKeyWithValue(locksv1alpha1.HeartbeatLabel, "true"))
		Expect(*lease.Spec.LeaseDurationSeconds).To(Equal(int32(3)))
		Expect(lease.OwnerReferences).To(ConsistOf(HaveField("UID", claim.UID)))

		// Renewed every second: still held well past the Lease's duration.
		first := lease.Spec.RenewTime.Time
		// Acquire returns when the lock's record names the claim; its own status follows.
		Eventually(claimPhase(ns, hold.Claim)).Should(Equal(locksv1alpha1.ClaimHeld))
		Consistently(claimPhase(ns, hold.Claim), 5*time.Second).Should(Equal(locksv1alpha1.ClaimHeld))
		Expect(leaseOf(ns, hold.Claim)(Default).Spec.RenewTime.Time).To(BeTemporally(">", first))
		Expect(hold.Err()).To(Succeed())

		Expect(hold.Release(ctx())).To(Succeed())
		Expect(leaseOf(ns, hold.Claim)(Default)).To(BeNil())
		Expect(claimExists(ns, hold.Claim)()).To(BeFalse())
	})

	It("ends the hold when its heartbeat Lease is deleted", func() {
		ns := newNamespace()
		newLock(ns, "db")
		hold, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Heartbeat: 30 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Delete(ctx(), leaseOf(ns, hold.Claim)(Default))).To(Succeed())
		Eventually(ended(hold.Context()), 10*time.Second).Should(BeTrue())
		Expect(hold.Err()).To(MatchError(ContainSubstring("heartbeat Lease " + hold.Claim + " in namespace " + ns + " was deleted")))
		Expect(hold.Release(ctx())).To(Succeed())
	})

	It("deletes the Lease of a claim whose wait is given up", func() {
		ns := newNamespace()
		newLock(ns, "db")
		first, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db"})
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = first.Release(ctx()) }()
		c, cancel := context.WithTimeout(ctx(), 2*time.Second)
		defer cancel()
		_, err = locks.Acquire(c, lockclient.Request{Namespace: ns, Lock: "db", Heartbeat: 15 * time.Second})
		Expect(err).To(HaveOccurred())
		leases := &coordinationv1.LeaseList{}
		Expect(k8sClient.List(ctx(), leases, client.InNamespace(ns))).To(Succeed())
		Expect(leases.Items).To(BeEmpty())
	})

	It("refuses a heartbeat for a pod's claim, and for Claim, which keeps none", func() {
		ns := newNamespace()
		newLock(ns, "db")
		pod := newPod(ns, "web-0")
		_, err := locks.Acquire(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Pod: podRef(pod), Heartbeat: time.Minute})
		Expect(err).To(MatchError("lockclient: Request.Heartbeat is for detached claims; a pod's liveness is its heartbeat"))
		_, _, err = locks.Claim(ctx(), lockclient.Request{Namespace: ns, Lock: "db", Heartbeat: time.Minute})
		Expect(err).To(MatchError("lockclient: Claim keeps no heartbeat (Request.Heartbeat); use Acquire or TryAcquire"))
	})
})
