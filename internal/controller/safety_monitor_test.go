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
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// safetyMonitor watches every LockClaim for the whole suite and checks the promises that no test
// may break: a lock never has more holder identities Held at once than its places (the highest
// spec.maxHolders it ever had: a lowered limit takes effect as holders leave), an Exclusive holder
// or the holder of a lock of one place is never Held beside another identity, and every grant's
// token is above every token the lock issued before (a reentrant claim of the same identity
// shares its hold's token). The watch stream is ordered by the API server, so the states it shows
// really happened in that order.
type safetyMonitor struct {
	mu        sync.Mutex
	phase     map[string]*locksv1alpha1.LockClaim // by namespace/name
	lastToken map[string]int64                    // by namespace/lock
	// issued maps, per lock, each token issued to the identity it was issued to.
	issued     map[string]map[int64]string
	violations []string
	events     int
	// exempt namespaces are not watched over: specs that break the promises on purpose.
	exempt map[string]bool
	// places is, per lock, the highest maxHolders the monitor has read.
	places map[string]int32
	// client reads a lock's maxHolders when a grant needs it.
	client client.Client
	// stop ends the watch; the API server cannot shut down while it is open.
	stop context.CancelFunc
}

func newSafetyMonitor() *safetyMonitor {
	return &safetyMonitor{phase: map[string]*locksv1alpha1.LockClaim{}, lastToken: map[string]int64{},
		issued: map[string]map[int64]string{}, places: map[string]int32{}}
}

var monitor = newSafetyMonitor()

func (m *safetyMonitor) run(ctx context.Context, c client.WithWatch) {
	defer GinkgoRecover()
	m.mu.Lock()
	m.client = c
	m.mu.Unlock()
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, &locksv1alpha1.LockClaimList{})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			claim, ok := ev.Object.(*locksv1alpha1.LockClaim)
			if !ok {
				continue
			}
			m.observe(ev.Type, claim)
		}
	}
}

func (m *safetyMonitor) observe(t watch.EventType, c *locksv1alpha1.LockClaim) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	if m.exempt[c.Namespace] {
		return
	}
	id := c.Namespace + "/" + c.Name
	prev := m.phase[id]
	if t == watch.Deleted {
		delete(m.phase, id)
		return
	}
	m.phase[id] = c.DeepCopy()

	if !heldNow(c) {
		return
	}
	// A claim of several locks holds each of them with a token of its own.
	for _, part := range heldParts(c) {
		lock := c.Namespace + "/" + part.LockName
		if prev == nil || prev.Status.Phase != locksv1alpha1.ClaimHeld {
			m.checkToken(id, lock, c.Status.HolderIdentity, part.FencingToken)
		}
		m.checkHolders(id, c, part.LockName)
	}
}

// heldParts are the locks held claim c holds and the token of each.
func heldParts(c *locksv1alpha1.LockClaim) []locksv1alpha1.ClaimLock {
	if len(c.Spec.LockNames) > 0 {
		return c.Status.Locks
	}
	return []locksv1alpha1.ClaimLock{{LockName: c.Spec.LockName, FencingToken: c.Status.FencingToken}}
}

// holdsLock says whether claim o, Held, holds lockName.
func holdsLock(o *locksv1alpha1.LockClaim, lockName string) bool {
	for _, part := range heldParts(o) {
		if part.LockName == lockName {
			return true
		}
	}
	return false
}

// checkHolders reports lockName held by more claims than its places allow, counting held claim
// c (id) and every other claim Held on it.
func (m *safetyMonitor) checkHolders(id string, c *locksv1alpha1.LockClaim, lockName string) {
	lock := c.Namespace + "/" + lockName
	identities := map[string]bool{c.Status.HolderIdentity: true}
	exclusive := c.Spec.Mode == locksv1alpha1.LockModeExclusive
	for otherID, o := range m.phase {
		if otherID != id && o.Namespace == c.Namespace && heldNow(o) && holdsLock(o, lockName) {
			identities[o.Status.HolderIdentity] = true
			exclusive = exclusive || o.Spec.Mode == locksv1alpha1.LockModeExclusive
		}
	}
	if len(identities) < 2 {
		return
	}
	places := m.placesOf(c.Namespace, lockName, int32(len(identities)))
	switch {
	case exclusive || places <= 1:
		m.violate("claim %s of lock %s is Held beside another holder while the lock is held exclusively (%d holders, %d place(s))", id, lock, len(identities), places)
	case int32(len(identities)) > places:
		m.violate("lock %s has %d holders Held at once, more than its %d places", lock, len(identities), places)
	}
}

func (m *safetyMonitor) checkToken(id, lock, identity string, token int64) {
	issued := m.issued[lock]
	if issued == nil {
		issued = map[int64]string{}
		m.issued[lock] = issued
	}
	last := m.lastToken[lock]
	switch owner, seen := issued[token]; {
	case seen && owner != identity:
		m.violate("claim %s (identity %s) got token %d, not above %d: it was issued to %s", id, identity, token, last, owner)
	case !seen && token <= last:
		m.violate("claim %s (identity %s) got token %d, not above %d", id, identity, token, last)
	}
	issued[token] = identity
	m.lastToken[lock] = max(last, token)
}

// placesOf is the highest maxHolders that lock has had, as far as the monitor knows. A lock seen
// with fewer places than it has holders is read again: it was raised before the grants the
// monitor sees, and the watch of claims cannot show that. The caller holds m.mu.
func (m *safetyMonitor) placesOf(namespace, name string, holders int32) int32 {
	key := namespace + "/" + name
	if m.places[key] < holders && m.client != nil {
		l := &locksv1alpha1.DistributedLock{}
		if err := m.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, l); err == nil {
			m.places[key] = max(m.places[key], l.Spec.MaxHolders)
		}
	}
	return max(m.places[key], 1)
}

// heldNow says whether c holds its lock as its watcher sees it: Held, and not being deleted.
func heldNow(c *locksv1alpha1.LockClaim) bool {
	return c.Status.Phase == locksv1alpha1.ClaimHeld && c.DeletionTimestamp == nil
}

func (m *safetyMonitor) violate(format string, args ...any) {
	m.violations = append(m.violations, fmt.Sprintf(format, args...))
}

func (m *safetyMonitor) check() {
	GinkgoHelper()
	m.mu.Lock()
	defer m.mu.Unlock()
	Expect(m.violations).To(BeEmpty(), "safety violations seen by the claim watch")
}

// exempt makes the monitor ignore namespace ns.
func (m *safetyMonitor) exemptNamespace(ns string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.exempt == nil {
		m.exempt = map[string]bool{}
	}
	m.exempt[ns] = true
}

// startMonitor starts the monitor's watch for the rest of the suite.
func startMonitor() {
	GinkgoHelper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	monitor.stop = cancel
	go monitor.run(ctx, c)
}

var _ = AfterEach(func() { monitor.check() })

// checkWatching fails if the monitor saw nothing, which would make its checks vacuous.
func (m *safetyMonitor) checkWatching() {
	GinkgoHelper()
	m.mu.Lock()
	defer m.mu.Unlock()
	Expect(m.events).To(BeNumerically(">", 0), "the safety monitor saw no claim at all: it is not watching")
}

// The monitor guards every spec of the suite; a monitor that cannot fire would guard nothing.
// This spec writes a double grant by hand, through the real API server, into claims of a lock
// whose backend does not exist, with the manager stopped, and checks that a monitor of its own
// reports both broken promises. The suite's monitor is told to look away from this namespace.
var _ = Describe("The safety monitor", func() {
	It("fires on a hand-made double grant", func() {
		ns := newNamespace()
		monitor.exemptNamespace(ns)
		own := newSafetyMonitor()
		c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		watchCtx, stop := context.WithCancel(ctx())
		defer stop()
		go own.run(watchCtx, c)

		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = "no-such-backend" })
		a := newClaim(ns, "a", "db", "")
		b := newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(HavePrefix("False/"))
		// The lock's pass would end both hand-made holds at once (the lock record names
		// neither): no manager runs while the spec writes them.
		stopManager()
		defer startManager()
		hold := func(claim *locksv1alpha1.LockClaim, identity string, token int64) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				cl := claimOf(ns, claim.Name)(g)
				now := metav1.NewMicroTime(time.Now())
				later := metav1.NewMicroTime(time.Now().Add(time.Hour))
				cl.Status.Phase, cl.Status.HolderIdentity, cl.Status.FencingToken = locksv1alpha1.ClaimHeld, identity, token
				cl.Status.AcquireTime, cl.Status.ExpireTime = &now, &later
				g.Expect(k8sClient.Status().Update(ctx(), cl)).To(Succeed())
			}).Should(Succeed())
		}
		hold(a, "holder-a", 7)
		hold(b, "holder-b", 7) // a second holder, with the same token

		Eventually(func() []string {
			own.mu.Lock()
			defer own.mu.Unlock()
			return append([]string(nil), own.violations...)
		}).Should(ContainElements(
			ContainSubstring("is Held beside another holder while the lock is held exclusively"),
			ContainSubstring("got token 7, not above 7"),
		))
	})
})
