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
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	kubernetesbackend "github.com/lockwarden/lockwarden/internal/backends/kubernetes"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
)

// On a large cluster a new leader's controllers start only once their caches have seen every
// object, which can take longer than a short lease; the session bridge keeps the built-in
// backend's session renewed meanwhile. These specs start the new leader with its controllers
// held back past the lease (lockenv.ManagerOptions.ControllersStartAfter); the Renewer and the
// bridge start at once, as they do in cmd/manager.
var _ = Describe("A new leader whose lock passes come after the lease", func() {
	const lease = 5 * time.Second

	// startLateLeader stops the running manager's successor from passing any lock for after.
	startLateLeader := func(after time.Duration) {
		startManagerWith(func(o *lockenv.ManagerOptions) { o.ControllersStartAfter = after })
		DeferCleanup(func() {
			stopManager()
			startManager()
		})
	}
	sessionRenewed := func() (time.Time, error) {
		l := &coordinationv1.Lease{}
		err := k8sClient.Get(ctx(), client.ObjectKey{Namespace: controllerNamespace, Name: kubernetesbackend.DefaultSessionName}, l)
		if err != nil || l.Spec.RenewTime == nil {
			return time.Time{}, err
		}
		return l.Spec.RenewTime.Time, nil
	}

	It("resumes a hold of the built-in backend with its token, because the session was kept alive", func() {
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LeaseDurationSeconds = int32(lease / time.Second) })
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
		before := claimOf(ns, "a")(Default)

		stopManager()
		startLateLeader(lease + 3*time.Second)

		// No pass runs for longer than the lease: a's status stays as the old leader left it.
		Consistently(func(g Gomega) {
			now := claimOf(ns, "a")(g)
			g.Expect(now.Status.Phase).To(Equal(held))
			g.Expect(now.Status.ExpireTime.Time).To(BeTemporally("==", before.Status.ExpireTime.Time))
		}).WithTimeout(lease + time.Second).Should(Succeed())
		// Then the passes resume it: same token, expiry moved on, b still waits. Without the
		// bridge the session would have gone the lease without renewal, and a would be Lost.
		Eventually(func(g Gomega) {
			now := claimOf(ns, "a")(g)
			g.Expect(now.Status.Phase != held || now.Status.ExpireTime.After(before.Status.ExpireTime.Time)).To(BeTrue())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(acquired(ns, "a")()).To(Equal("True/" + locksv1alpha1.ReasonAcquired))
		Expect(claimOf(ns, "a")(Default).Status.FencingToken).To(Equal(before.Status.FencingToken))
		Consistently(func(g Gomega) {
			g.Expect(phaseOf(ns, "a")()).To(Equal(held))
			g.Expect(phaseOf(ns, "b")()).To(Equal(pending))
		}).WithTimeout(2 * lease).Should(Succeed())
	})

	It("does not revive a hold whose session lapsed before the new leader started", func() {
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LeaseDurationSeconds = int32(lease / time.Second) })
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
		tokenA := claimOf(ns, "a")(Default).Status.FencingToken

		stopManager()
		time.Sleep(lease + time.Second) // nobody renews the session: a's hold lapses
		started := time.Now()
		startLateLeader(3 * time.Second)

		// The bridge renews the session before any pass runs (the record still names a)...
		Eventually(sessionRenewed).WithTimeout(2 * time.Second).Should(BeTemporally(">", started))
		Expect(phaseOf(ns, "a")()).To(Equal(held))
		// ...and the renewal recorded the gap: the pass reports a's hold lost and grants b.
		Eventually(phaseOf(ns, "a")).WithTimeout(15 * time.Second).Should(Equal(locksv1alpha1.ClaimLost))
		Expect(acquired(ns, "a")()).To(Equal("False/" + locksv1alpha1.ReasonRenewFailed))
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
		Expect(claimOf(ns, "b")(Default).Status.FencingToken).To(BeNumerically(">", tokenA))
	})
})
