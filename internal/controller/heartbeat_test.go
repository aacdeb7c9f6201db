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
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// newHeartbeat creates a heartbeat Lease as a claimant would: labelled, with a duration, and a
// renewTime from a claimant whose clock is a day behind the controller's, which must not matter.
func newHeartbeat(ns, name string, seconds int32) *coordinationv1.Lease {
	GinkgoHelper()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{locksv1alpha1.HeartbeatLabel: "true"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: &metav1.MicroTime{Time: time.Now().Add(-24 * time.Hour)}},
	}
	Expect(k8sClient.Create(ctx(), l)).To(Succeed())
	return l
}

// beat renews a heartbeat Lease every interval until stop is called (and waits for it).
func beat(l *coordinationv1.Lease, interval time.Duration) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.Spec.RenewTime = &metav1.MicroTime{Time: l.Spec.RenewTime.Add(interval)}
				Expect(k8sClient.Update(ctx(), l)).To(Succeed())
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-stopped }) }
}

// withHeartbeat makes a claim name a heartbeat Lease.
func withHeartbeat(lease string) func(*locksv1alpha1.LockClaim) {
	return func(c *locksv1alpha1.LockClaim) { c.Spec.Holder = &locksv1alpha1.ClaimHolder{LeaseName: lease} }
}

// acquiredMessage returns a claim's Acquired condition as "Status/Reason: message".
func acquiredMessage(ns, name string) func(g Gomega) string {
	return func(g Gomega) string {
		cond := meta.FindStatusCondition(claimOf(ns, name)(g).Status.Conditions, locksv1alpha1.ConditionAcquired)
		g.Expect(cond).NotTo(BeNil())
		return fmt.Sprintf("%s/%s: %s", cond.Status, cond.Reason, cond.Message)
	}
}

var _ = Describe("Heartbeat Leases of detached claims", func() {
	It("keeps a renewed heartbeat's hold, and releases it once the Lease is not renewed for its duration", func() {
		ns := newNamespace()
		newLock(ns, "db")
		lease := newHeartbeat(ns, "beat-a", 2)
		stop := beat(lease, 500*time.Millisecond)
		defer stop()
		newClaim(ns, "a", "db", "", withHeartbeat("beat-a"))
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
		// Renewed: held well past the Lease's duration, whatever its renewTime says.
		Consistently(phaseOf(ns, "a")).WithTimeout(4 * time.Second).Should(Equal(held))

		stop()
		stopped := time.Now()
		Eventually(phaseOf(ns, "a")).Should(Equal(locksv1alpha1.ClaimReleased))
		Expect(time.Since(stopped)).To(BeNumerically(">=", 1500*time.Millisecond), "released before the Lease's duration passed")
		Expect(acquiredMessage(ns, "a")(Default)).To(Equal(
			"False/HolderTerminated: Released: heartbeat Lease beat-a in namespace " + ns + " was not renewed for 2s"))
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
	})

	It("releases a holder at once when its heartbeat Lease is deleted", func() {
		ns := newNamespace()
		newLock(ns, "db")
		lease := newHeartbeat(ns, "beat-a", 300)
		newClaim(ns, "a", "db", "", withHeartbeat("beat-a"))
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		Expect(k8sClient.Delete(ctx(), lease)).To(Succeed())
		Eventually(phaseOf(ns, "a")).WithTimeout(5 * time.Second).Should(Equal(locksv1alpha1.ClaimReleased))
		Expect(acquiredMessage(ns, "a")(Default)).To(Equal(
			"False/HolderTerminated: Released: heartbeat Lease beat-a in namespace " + ns + " was deleted"))
		Eventually(phaseOf(ns, "b")).WithTimeout(5 * time.Second).Should(Equal(held))
	})

	It("keeps a claim whose heartbeat Lease does not exist yet waiting, and grants it once the Lease appears", func() {
		ns := newNamespace()
		newLock(ns, "db")
		newClaim(ns, "a", "db", "", withHeartbeat("beat-a"))
		want := "False/HeartbeatNotFound: Heartbeat Lease beat-a does not exist in namespace " + ns +
			`, or lacks the label locks.lockwarden.io/heartbeat: "true"; the claim waits aside for it, behind no one and blocking no one, and fails at `
		Eventually(acquiredMessage(ns, "a")).Should(HavePrefix(want))
		Consistently(phaseOf(ns, "a")).WithTimeout(time.Second).Should(Equal(pending))

		newHeartbeat(ns, "beat-a", 300)
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
	})

	It("ends the wait of a claim whose heartbeat stops while it waits", func() {
		ns := newNamespace()
		newLock(ns, "db")
		newClaim(ns, "holder", "db", "")
		Eventually(phaseOf(ns, "holder")).Should(Equal(held))
		newHeartbeat(ns, "beat-w", 2)
		newClaim(ns, "w", "db", "", withHeartbeat("beat-w"))
		Eventually(acquired(ns, "w")).Should(Equal("False/Queued"))

		Eventually(phaseOf(ns, "w")).Should(Equal(locksv1alpha1.ClaimFailed))
		Expect(acquiredMessage(ns, "w")(Default)).To(Equal(
			"False/HolderTerminated: The holder will never get the lock: heartbeat Lease beat-w in namespace " + ns + " was not renewed for 2s"))
	})
})
