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
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

var _ = Describe("Controller restart", func() {
	It("keeps holders and their tokens, resumes renewal, and grants nothing twice", func() {
		ns := newNamespace()
		newLock(ns, "db") // 6 s lease: renewed every 2 s
		a := newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
		before := claimOf(ns, "a")(Default)

		stopManager()
		time.Sleep(time.Second) // less than the lease: the hold must survive the gap
		startManager()

		// Renewal resumed: the expiry moves past where it stood, with the same token.
		Eventually(func(g Gomega) {
			now := claimOf(ns, "a")(g)
			g.Expect(now.Status.Phase).To(Equal(held))
			g.Expect(now.Status.FencingToken).To(Equal(before.Status.FencingToken))
			g.Expect(now.Status.ExpireTime.Time).To(BeTemporally(">", before.Status.ExpireTime.Time))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		// Well past the original lease: still held, still the same token, b still waits.
		Consistently(func(g Gomega) {
			g.Expect(phaseOf(ns, "a")()).To(Equal(held))
			g.Expect(phaseOf(ns, "b")()).To(Equal(pending))
		}).WithTimeout(7 * time.Second).Should(Succeed())
		Expect(claimOf(ns, "a")(Default).Status.FencingToken).To(Equal(before.Status.FencingToken))

		deleteNow(a)
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
		Expect(claimOf(ns, "b")(Default).Status.FencingToken).To(BeNumerically(">", before.Status.FencingToken))
	})

	It("resumes a hold whose status.expireTime passed during the gap while the backend still holds it", func() {
		// status.expireTime trails the backend's expiry by up to most of a lease (it is
		// refreshed only an eighth of a lease before it passes), and a leader failover can outlast what it had left: the backend
		// decides. Here the lag is made certain by moving status.expireTime into the past.
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LeaseDurationSeconds = 10 })
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		stopManager()
		a := claimOf(ns, "a")(Default)
		token := a.Status.FencingToken
		stale := a.DeepCopy()
		stale.Status.ExpireTime = &metav1.MicroTime{Time: time.Now().Add(-time.Second)}
		Expect(k8sClient.Status().Patch(ctx(), stale, client.MergeFrom(a))).To(Succeed())
		startManager()

		Eventually(func(g Gomega) {
			now := claimOf(ns, "a")(g)
			g.Expect(now.Status.Phase).To(Equal(held))
			g.Expect(now.Status.ExpireTime.Time).To(BeTemporally(">", time.Now()))
		}).Should(Succeed())
		Consistently(phaseOf(ns, "a")).WithTimeout(3 * time.Second).Should(Equal(held))
		Expect(claimOf(ns, "a")(Default).Status.FencingToken).To(Equal(token))
		Expect(phaseOf(ns, "b")()).To(Equal(pending))
	})

	It("marks a hold that expired while no controller ran as Lost and grants the next claim", func() {
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LeaseDurationSeconds = 5 })
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
		tokenA := claimOf(ns, "a")(Default).Status.FencingToken

		stopManager()
		time.Sleep(6 * time.Second) // longer than the lease
		startManager()

		Eventually(phaseOf(ns, "a")).Should(Equal(locksv1alpha1.ClaimLost))
		Expect(acquired(ns, "a")()).To(Equal("False/RenewFailed"))
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
		Expect(claimOf(ns, "b")(Default).Status.FencingToken).To(BeNumerically(">", tokenA))
	})
})

var _ = Describe("DistributedLock deletion", func() {
	It("releases the holder, fails every claim, and a re-created lock issues higher tokens", func() {
		ns := newNamespace()
		lock := newLock(ns, "db")
		newClaim(ns, "holder", "db", "")
		Eventually(phaseOf(ns, "holder")).Should(Equal(held))
		newClaim(ns, "waiter", "db", "")
		Eventually(acquired(ns, "waiter")).Should(Equal("False/Queued"))
		lastToken := claimOf(ns, "holder")(Default).Status.FencingToken

		Expect(k8sClient.Delete(ctx(), lock)).To(Succeed())
		for _, name := range []string{"holder", "waiter"} {
			Eventually(phaseOf(ns, name)).Should(Equal(locksv1alpha1.ClaimFailed))
			Expect(acquired(ns, name)()).To(Equal("False/LockNotFound"))
		}
		Eventually(func() error {
			return k8sClient.Get(ctx(), key(lock), &locksv1alpha1.DistributedLock{})
		}).Should(MatchError(ContainSubstring("not found")))

		newLock(ns, "db")
		newClaim(ns, "after", "db", "")
		Eventually(phaseOf(ns, "after")).Should(Equal(held))
		Expect(claimOf(ns, "after")(Default).Status.FencingToken).To(BeNumerically(">", lastToken))
	})
})

var _ = Describe("An external backend", func() {
	var ns string
	var backendName string
	BeforeEach(func() {
		faultyStore.SetUnavailable(nil)
		ns = newNamespace()
		backendName = newFaultyBackend()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = backendName })
	})

	It("reports a lost lock as Lost with a Warning event and hands over once the key is free", func() {
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		// Someone outside lockwarden takes the key (as after a Redis restart without persistence).
		faultyStore.Steal("lockwarden/"+ns+"/db", "intruder")
		Eventually(phaseOf(ns, "a")).WithTimeout(10 * time.Second).Should(Equal(locksv1alpha1.ClaimLost))
		Expect(acquired(ns, "a")()).To(Equal("False/RenewFailed"))
		Eventually(acquired(ns, "b")).Should(Equal("False/Contended"))
		Expect(testutil.ToFloat64(mgrMetric.Losses.WithLabelValues(backendName, locksv1alpha1.ReasonRenewFailed))).To(BeNumerically(">=", 1))
	})

	It("grants nothing while the backend is down, and resumes when it recovers", func() {
		faultyStore.SetUnavailable(errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"))
		Eventually(func(g Gomega) {
			lb := &locksv1alpha1.LockBackend{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Name: backendName}, lb)).To(Succeed())
			ready := meta.FindStatusCondition(lb.Status.Conditions, locksv1alpha1.ConditionReady)
			g.Expect(ready.Status).To(BeEquivalentTo("False"))
			g.Expect(ready.Message).To(ContainSubstring("connection refused"))
		}).Should(Succeed())
		newClaim(ns, "a", "db", "")
		Eventually(acquired(ns, "a")).Should(Equal("False/BackendUnavailable"))
		Consistently(phaseOf(ns, "a")).WithTimeout(2 * time.Second).Should(Equal(pending))
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "db"}, l)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(l.Status.Conditions, locksv1alpha1.ConditionBackendReady)).To(BeTrue())
		}).Should(Succeed())

		faultyStore.SetUnavailable(nil)
		Eventually(phaseOf(ns, "a")).WithTimeout(10 * time.Second).Should(Equal(held))
	})
})

var _ = Describe("Backends a lock may not use", func() {
	It("says so when the LockBackend does not exist", func() {
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = "nowhere" })
		newClaim(ns, "a", "db", "")
		Eventually(acquired(ns, "a")).Should(Equal("False/BackendNotFound"))
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "db"}, l)).To(Succeed())
			c := meta.FindStatusCondition(l.Status.Conditions, locksv1alpha1.ConditionBackendReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(locksv1alpha1.ReasonBackendNotFound))
			g.Expect(c.Message).To(Equal("LockBackend nowhere does not exist; ask a cluster admin to create it or fix spec.backendRef"))
		}).Should(Succeed())
	})

	It("refuses namespaces outside the backend's namespaceSelector", func() {
		ns := newNamespace()
		lb := &locksv1alpha1.LockBackend{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "restricted-"},
			Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL, SQL: faultySQL,
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}},
		}
		Expect(k8sClient.Create(ctx(), lb)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx(), lb) })
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = lb.Name })
		newClaim(ns, "a", "db", "")
		Eventually(func(g Gomega) {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "db"}, l)).To(Succeed())
			c := meta.FindStatusCondition(l.Status.Conditions, locksv1alpha1.ConditionBackendReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(locksv1alpha1.ReasonNamespaceNotAllowed))
		}).Should(Succeed())
		Eventually(acquired(ns, "a")).Should(Equal("False/NamespaceNotAllowed"))
		Consistently(phaseOf(ns, "a")).WithTimeout(time.Second).Should(Equal(pending))
	})
})

// faultyStoreSecret, as the DSN Secret of a LockBackend of type SQL, has the suite serve it from
// the in-memory faultyStore instead of a database (see suite_test.go).
const faultyStoreSecret = "in-memory-faulty-store"

// faultySQL configures a LockBackend served by the in-memory faultyStore.
// newFaultyBackend creates a LockBackend served by faultyStore, removed after the spec, waits
// until it is Ready and returns its name.
func newFaultyBackend() string {
	GinkgoHelper()
	lb := &locksv1alpha1.LockBackend{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "faulty-"},
		Spec:       locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL, SQL: faultySQL},
	}
	Expect(k8sClient.Create(ctx(), lb)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx(), lb) })
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx(), key(lb), lb)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(lb.Status.Conditions, locksv1alpha1.ConditionReady)).To(BeTrue())
	}).Should(Succeed())
	return lb.Name
}

var faultySQL = &locksv1alpha1.SQLBackend{Driver: locksv1alpha1.SQLDriverPostgres,
	DSNSecretRef: locksv1alpha1.SecretKeySelector{
		SecretReference: locksv1alpha1.SecretReference{Name: faultyStoreSecret, Namespace: controllerNamespace}, Key: "dsn"}}
