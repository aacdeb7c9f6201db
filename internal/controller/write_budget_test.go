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
	"context"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The write budget of docs/design.md §3, counted the way etcd sees it: every create, change or delete
// of an object is one watch event (a write that changes nothing bumps no resourceVersion).

// writeTally counts writes per object, by kind, from watches started at a list's resourceVersion.
type writeTally struct {
	mu     sync.Mutex
	counts map[string]map[string]int // kind → object name → writes
}

func (w *writeTally) add(kind, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.counts[kind] == nil {
		w.counts[kind] = map[string]int{}
	}
	w.counts[kind][name]++
}

// snapshot copies the counts.
func (w *writeTally) snapshot() map[string]map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]map[string]int{}
	for kind, byName := range w.counts {
		out[kind] = map[string]int{}
		for n, c := range byName {
			out[kind][n] = c
		}
	}
	return out
}

// total sums the writes of kind.
func total(counts map[string]map[string]int, kind string) int {
	n := 0
	for _, c := range counts[kind] {
		n += c
	}
	return n
}

// countWrites counts writes to the claims and locks of ns and to the Leases of the controller's
// namespace until the spec ends.
func countWrites(ns string) *writeTally {
	GinkgoHelper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w := &writeTally{counts: map[string]map[string]int{}}
	watchCtx, stop := context.WithCancel(ctx())
	DeferCleanup(stop)
	start := func(kind string, list client.ObjectList, namespace string) {
		Expect(c.List(ctx(), list, client.InNamespace(namespace))).To(Succeed())
		rv := list.(metav1.ListInterface).GetResourceVersion()
		wi, err := c.Watch(watchCtx, list, client.InNamespace(namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		Expect(err).NotTo(HaveOccurred())
		go func() {
			defer GinkgoRecover()
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Bookmark || ev.Type == watch.Error {
					continue
				}
				if o, ok := ev.Object.(client.Object); ok {
					w.add(kind, o.GetName())
				}
			}
		}()
	}
	start("claims", &locksv1alpha1.LockClaimList{}, ns)
	start("locks", &locksv1alpha1.DistributedLockList{}, ns)
	start("leases", &coordinationv1.LeaseList{}, controllerNamespace)
	return w
}

// settle waits until a second goes by without a write to ns's claims and locks.
func settle(w *writeTally) {
	GinkgoHelper()
	last := -1
	Eventually(func() bool {
		now := w.snapshot()
		n := total(now, "claims") + total(now, "locks")
		quiet := n == last
		last = n
		return quiet
	}).WithPolling(time.Second).WithTimeout(20 * time.Second).Should(BeTrue())
}

var _ = Describe("The write budget", func() {
	It("holds locks for five leases with no lock record write, no Lease per lock and a bounded number of claim writes", func() {
		ns := newNamespace()
		const lease = 6 * time.Second // newLock's leaseDurationSeconds
		for _, name := range []string{"a", "b", "c"} {
			newLock(ns, name)
			newClaim(ns, name, name, "")
			Eventually(phaseOf(ns, name)).Should(Equal(held))
		}
		w := countWrites(ns)
		settle(w)
		before := w.snapshot()
		time.Sleep(5 * lease)
		after := w.snapshot()

		Expect(total(after, "locks")-total(before, "locks")).To(BeZero(), "no lock record is written while its hold goes on")
		for _, name := range []string{"a", "b", "c"} {
			writes := after["claims"][name] - before["claims"][name]
			GinkgoWriter.Printf("claim %s: %d status writes in 5 leases\n", name, writes)
			// status.expireTime moves once it is within an eighth of a lease of passing, to a lease
			// after the renewal a sixth of a lease before: every five sixths of a lease
			// (docs/how-locks-work.md says why not once a lease), so 6 writes in five leases; one
			// more for a renewal that lands late on a loaded machine. Renewing every third of a
			// lease, as lockwarden did before, costs 7.5.
			Expect(writes).To(BeNumerically("<=", 7), "claim %s", name)
			Expect(writes).To(BeNumerically(">=", 5), "claim %s: its expireTime must keep moving", name)
		}
		// Renewal is batched: one session Lease is renewed for every hold at once (other specs'
		// holds share it, so its writes are only reported), and no hold has a Lease of its own.
		for name := range after["leases"] {
			Expect(name).NotTo(HavePrefix("lock-"), "a Lease per lock was written: %s", name)
		}
		GinkgoWriter.Printf("Leases: %d writes in 5 leases, every spec's sessions included\n", total(after, "leases")-total(before, "leases"))
	})

	It("hands a lock over in three API writes on the built-in backend, the client's own delete included", func() {
		expectThreeWriteHandoff("")
	})

	It("hands a lock over in three API writes on an external backend too", func() {
		backend, _ := newRedisBackend()
		expectThreeWriteHandoff(backend)
	})
})

// expectThreeWriteHandoff hands a lock of backend ("" for the built-in one) from one detached
// claim to the next by deleting the first, and counts the API writes: the client's delete, the
// lock record (release, grant and token), the new holder's status. The old claim carries no
// finalizer: its delete is the release.
func expectThreeWriteHandoff(backend string) {
	GinkgoHelper()
	ns := newNamespace()
	newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = backend })
	newClaim(ns, "first", "db", "")
	Eventually(phaseOf(ns, "first")).Should(Equal(held))
	newClaim(ns, "next", "db", "")
	Eventually(acquired(ns, "next")).Should(Equal("False/Queued"))
	newClaim(ns, "then", "db", "") // after "next" in the queue, by creation time and name
	Eventually(acquired(ns, "then")).Should(Equal("False/Queued"))
	w := countWrites(ns)
	settle(w)
	before := w.snapshot()

	Expect(k8sClient.Delete(ctx(), claimOf(ns, "first")(Default))).To(Succeed())
	Eventually(phaseOf(ns, "next")).Should(Equal(held))
	Eventually(func() error {
		return k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "first"}, &locksv1alpha1.LockClaim{})
	}).
		Should(MatchError(ContainSubstring("not found")))
	settle(w)
	after := w.snapshot()

	claims, locks := total(after, "claims")-total(before, "claims"), total(after, "locks")-total(before, "locks")
	lockLeases := 0
	for name, n := range after["leases"] {
		if strings.HasPrefix(name, "lock-") {
			lockLeases += n - before["leases"][name]
		}
	}
	GinkgoWriter.Printf("handoff (backend %q): %d claim writes, %d lock writes, %d lock Lease writes\n", backend, claims, locks, lockLeases)
	Expect(locks).To(Equal(1), "release, grant and token in one lock record write")
	Expect(lockLeases).To(BeZero(), "no Lease per lock")
	Expect(claims).To(Equal(2), "the delete and the new holder's status")
	Expect(after["claims"]["then"]-before["claims"]["then"]).To(BeZero(),
		"no write to a waiter on a handoff (its move from place 2 to 1 follows in the next round, within a minute)")
	Expect(claims+locks).To(Equal(3), "the delete, the lock record, the new holder")
	l := &locksv1alpha1.DistributedLock{}
	Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "db"}, l)).To(Succeed())
	Expect(meta.IsStatusConditionTrue(l.Status.Conditions, locksv1alpha1.ConditionBackendReady)).To(BeTrue())
}
