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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

// What a user of one namespace can do to another's locks: each spec plays an attack the
// issue on tenancy found possible, on real servers.
var _ = Describe("Namespaces and keys", func() {
	readyCondition := func(ns, name string) func(g Gomega) *metav1.Condition {
		return func(g Gomega) *metav1.Condition {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
			c := meta.FindStatusCondition(l.Status.Conditions, locksv1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			return c
		}
	}

	It("keeps a key that names another namespace's key under the claimant's own namespace", func() {
		backend, server := newRedisBackend()
		redis := server.Client()
		victim, intruder := newNamespace(), newNamespace()
		newLock(victim, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = backend })
		newClaim(victim, "owner", "db", "")
		Eventually(phaseOf(victim, "owner")).Should(Equal(held))
		victimKey := "lockwarden/" + victim + "/db"
		victimValue, err := redis.Get(ctx(), victimKey).Result()
		Expect(err).NotTo(HaveOccurred())
		identity := claimOf(victim, "owner")(Default).Status.HolderIdentity

		// The intruder names the victim's key and forges the victim's holder identity.
		newLock(intruder, "steal", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = backend
			l.Spec.Key = victimKey
		})
		newClaim(intruder, "forged", "steal", "", func(c *locksv1alpha1.LockClaim) {
			c.Spec.Holder = &locksv1alpha1.ClaimHolder{Identity: identity}
		})
		// Its lock lives under its own namespace, so it is granted without touching the victim's.
		Eventually(phaseOf(intruder, "forged")).Should(Equal(held))
		Expect(redis.Exists(ctx(), "lockwarden/"+intruder+"/"+victimKey).Val()).To(Equal(int64(1)))
		Expect(redis.Get(ctx(), victimKey).Val()).To(Equal(victimValue))

		// Ending the intruder's hold leaves the victim's key alone.
		deleteNow(claimOf(intruder, "forged")(Default))
		Eventually(func() int64 { return redis.Exists(ctx(), "lockwarden/"+intruder+"/"+victimKey).Val() }).Should(BeZero())
		Expect(redis.Get(ctx(), victimKey).Val()).To(Equal(victimValue))
		Consistently(phaseOf(victim, "owner")).WithTimeout(2 * time.Second).Should(Equal(held))
	})

	It("neither names nor takes over a key held by a client outside lockwarden, whatever identity a claim forges", func() {
		server := redistest.Start(GinkgoTB(), redistest.Options{})
		backend := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
			KeyPolicy: locksv1alpha1.KeyPolicyVerbatim, Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(server.Addr())}})
		redis := server.Client()
		Expect(redis.Set(ctx(), "nightly-batch", "cron-on-vm-7", 2*time.Minute).Err()).To(Succeed())

		ns := newNamespace()
		newLock(ns, "batch", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = backend
			l.Spec.Key = "nightly-batch"
		})
		newClaim(ns, "forged", "batch", "", func(c *locksv1alpha1.LockClaim) {
			c.Spec.Holder = &locksv1alpha1.ClaimHolder{Identity: "cron-on-vm-7"}
		})
		Eventually(acquired(ns, "forged")).Should(Equal("False/Contended"))
		cond := meta.FindStatusCondition(claimOf(ns, "forged")(Default).Status.Conditions, locksv1alpha1.ConditionAcquired)
		Expect(cond.Message).To(ContainSubstring("held on the backend by another client"))
		Expect(cond.Message).NotTo(ContainSubstring("cron-on-vm-7"))
		Consistently(phaseOf(ns, "forged")).WithTimeout(2 * time.Second).Should(Equal(locksv1alpha1.ClaimPending))

		deleteNow(claimOf(ns, "forged")(Default))
		Consistently(func() string { return redis.Get(ctx(), "nightly-batch").Val() }).WithTimeout(2*time.Second).
			Should(Equal("cron-on-vm-7"), "deleting the claim must not delete the outside client's key")
	})

	It("lets the first of two locks on one key grant it, and the second only once the first is gone, with higher tokens", func() {
		ns := newNamespace()
		newLock(ns, "first", func(l *locksv1alpha1.DistributedLock) { l.Spec.Key = "shared" })
		newClaim(ns, "a", "first", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "a2", "first", "")
		Eventually(acquired(ns, "a2")).Should(Equal("False/Queued"))

		newLock(ns, "second", func(l *locksv1alpha1.DistributedLock) { l.Spec.Key = "shared" })
		newClaim(ns, "b", "second", "")
		Eventually(func(g Gomega) {
			c := readyCondition(ns, "second")(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(locksv1alpha1.ReasonKeyConflict))
			g.Expect(c.Message).To(ContainSubstring("DistributedLock first"))
		}).Should(Succeed())
		Eventually(acquired(ns, "b")).Should(Equal("False/KeyConflict"))
		// A lock named like the key, without spec.key, resolves to it too.
		newLock(ns, "shared")
		newClaim(ns, "c", "shared", "")
		Eventually(acquired(ns, "c")).Should(Equal("False/KeyConflict"))

		// The first lock goes on handing over meanwhile; its last token is the highest so far.
		deleteNow(claimOf(ns, "a")(Default))
		Eventually(phaseOf(ns, "a2")).Should(Equal(held))
		last := claimOf(ns, "a2")(Default).Status.FencingToken
		Expect(phaseOf(ns, "b")()).To(Equal(locksv1alpha1.ClaimPending))

		// Once the first lock is gone, one of the others takes the key, with a higher token.
		deleteNow(&locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}})
		Eventually(func(g Gomega) {
			b, c := claimOf(ns, "b")(g), claimOf(ns, "c")(g)
			g.Expect([]locksv1alpha1.ClaimPhase{b.Status.Phase, c.Status.Phase}).To(ContainElement(held))
			for _, x := range []*locksv1alpha1.LockClaim{b, c} {
				if x.Status.Phase == held {
					g.Expect(x.Status.FencingToken).To(BeNumerically(">", last))
				}
			}
		}).Should(Succeed())
	})

	It("stops renewing and releases a hold whose claims were all deleted", func() {
		backend, server := newRedisBackend()
		redis := server.Client()
		ns := newNamespace()
		// A long lease: only a release frees the key in time.
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = backend
			l.Spec.LeaseDurationSeconds = 300
		})
		shared := func(c *locksv1alpha1.LockClaim) { c.Spec.Holder = &locksv1alpha1.ClaimHolder{Identity: "batch-7"} }
		newClaim(ns, "a", "db", "", shared)
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "", shared) // shares a's hold (same identity)
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
		newClaim(ns, "next", "db", "")
		Eventually(acquired(ns, "next")).Should(Equal("False/Queued"))

		for _, name := range []string{"b", "a"} {
			deleteNow(claimOf(ns, name)(Default))
		}
		Eventually(phaseOf(ns, "next")).WithTimeout(10 * time.Second).Should(Equal(held))
		Expect(redis.Get(ctx(), "lockwarden/"+ns+"/db").Val()).To(HaveSuffix("/" + string(claimOf(ns, "next")(Default).UID)))
		deleteNow(claimOf(ns, "next")(Default))
		// Nothing renews or re-creates the key afterwards.
		Eventually(func() int64 { return redis.Exists(ctx(), "lockwarden/"+ns+"/db").Val() }).Should(BeZero())
		Consistently(func() int64 { return redis.Exists(ctx(), "lockwarden/"+ns+"/db").Val() }).WithTimeout(2 * time.Second).Should(BeZero())
	})

	It("names a conflicting lock of another namespace only as another lock", func() {
		server := redistest.Start(GinkgoTB(), redistest.Options{})
		backend := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
			KeyPolicy: locksv1alpha1.KeyPolicyVerbatim, Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(server.Addr())}})
		one, other := newNamespace(), newNamespace()
		newLock(one, "jobs", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = backend
			l.Spec.Key = "jobs/nightly"
		})
		newClaim(one, "a", "jobs", "")
		Eventually(phaseOf(one, "a")).Should(Equal(held))
		newLock(other, "mine", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = backend
			l.Spec.Key = "jobs/nightly"
		})
		Eventually(func(g Gomega) {
			c := readyCondition(other, "mine")(g)
			g.Expect(c.Reason).To(Equal(locksv1alpha1.ReasonKeyConflict))
			g.Expect(c.Message).To(HavePrefix("Another DistributedLock"))
			g.Expect(c.Message).NotTo(ContainSubstring(one))
			g.Expect(c.Message).NotTo(ContainSubstring("jobs "))
		}).Should(Succeed())
	})
})
