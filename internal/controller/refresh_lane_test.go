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

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/fake"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
)

var _ = Describe("The refresh lane", func() {
	It("keeps a held claim's expireTime ahead while every lock worker waits on a stalled backend", func() {
		// One lock worker, as if a thousand locks' handoffs filled the lock queue: a held claim's
		// refresh must not wait for it.
		stopManager()
		startManagerWith(func(o *lockenv.ManagerOptions) { o.Workers = 1 })
		DeferCleanup(func() {
			stopManager()
			startManager()
		})
		ns := newNamespace()
		stalled := newFaultyBackend()
		newLock(ns, "steady")
		newClaim(ns, "holder", "steady", "")
		Eventually(phaseOf(ns, "holder")).Should(Equal(held))
		first := claimOf(ns, "holder")(Default).Status.RenewTime.Time

		release := make(chan struct{})
		faultyStore.Stall(release)
		DeferCleanup(func() {
			faultyStore.Stall(nil)
			close(release)
		})
		acquires := faultyStore.Calls(fake.OpTryAcquire)
		newLock(ns, "stuck", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = stalled })
		newClaim(ns, "waiter", "stuck", "")
		Eventually(func() int { return faultyStore.Calls(fake.OpTryAcquire) }).Should(BeNumerically(">", acquires),
			"the only lock worker is inside a backend call that does not return")

		const lease = 6 * time.Second // newLock's leaseDurationSeconds
		for end := time.Now().Add(3 * lease); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			c := claimOf(ns, "holder")(Default)
			Expect(c.Status.Phase).To(Equal(held))
			Expect(c.Status.ExpireTime.Time).To(BeTemporally(">", time.Now()), "status.expireTime passed while the claim was Held")
		}
		c := claimOf(ns, "holder")(Default)
		Expect(c.Status.RenewTime.Time).To(BeTemporally(">", first.Add(2*lease)), "status.renewTime follows the renewals")
		Expect(phaseOf(ns, "waiter")()).NotTo(Equal(held), "the stalled lock's pass is still waiting")
	})
})
