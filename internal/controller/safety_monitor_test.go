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

// safetyMonitor watches every LockClaim for the whole suite and checks the two promises that no
// test may break: at no point are two holder identities Held on one lock, and a lock's tokens
// never repeat or go back (a reentrant claim of the same identity shares the current token). The
// watch stream is ordered by the API server, so the states it shows really happened in that order.
type safetyMonitor struct {
	mu         sync.Mutex
	phase      map[string]*locksv1alpha1.LockClaim // by namespace/name
	lastToken  map[string]int64                    // by namespace/lock
	lastHolder map[string]string                   // identity that got lastToken
	violations []string
	events     int
	// exempt namespaces are not watched over: specs that break the promises on purpose.
	exempt map[string]bool
	// stop ends the watch; the API server cannot shut down while it is open.
	stop context.CancelFunc
}

var monitor = &safetyMonitor{
	phase: map[string]*locksv1alpha1.LockClaim{}, lastToken: map[string]int64{}, lastHolder: map[string]string{},
}

func (m *safetyMonitor) run(ctx context.Context, c client.WithWatch) {
	defer GinkgoRecover()
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
	lock := c.Namespace + "/" + c.Spec.LockName
	prev := m.phase[id]
	if t == watch.Deleted {
		delete(m.phase, id)
		return
	}
	m.phase[id] = c.DeepCopy()

	// A claim being deleted is released by its deletion: the controller hands the lock on
	// without writing its status again, and takes its finalizer off after.
	if !heldNow(c) {
		return
	}
	if prev == nil || prev.Status.Phase != locksv1alpha1.ClaimHeld {
		last, holder := m.lastToken[lock], m.lastHolder[lock]
		switch {
		case c.Status.HolderIdentity == holder && c.Status.FencingToken < last:
			m.violate("claim %s got token %d below the lock's last token %d", id, c.Status.FencingToken, last)
		case c.Status.HolderIdentity != holder && c.Status.FencingToken <= last:
			m.violate("claim %s (identity %s) got token %d, not above %d issued to %s", id, c.Status.HolderIdentity, c.Status.FencingToken, last, holder)
		}
		m.lastToken[lock], m.lastHolder[lock] = max(last, c.Status.FencingToken), c.Status.HolderIdentity
	}
	for otherID, o := range m.phase {
		if otherID != id && o.Namespace == c.Namespace && o.Spec.LockName == c.Spec.LockName &&
			heldNow(o) && o.Status.HolderIdentity != c.Status.HolderIdentity {
			m.violate("claims %s and %s of lock %s are Held at once by different holders", id, otherID, lock)
		}
	}
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
		own := &safetyMonitor{phase: map[string]*locksv1alpha1.LockClaim{}, lastToken: map[string]int64{}, lastHolder: map[string]string{}}
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
			ContainSubstring("are Held at once by different holders"),
			ContainSubstring("got token 7, not above 7"),
		))
	})
})
