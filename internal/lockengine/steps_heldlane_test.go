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

package lockengine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// heldGate holds back the Held writes of the claims it is told to, and remembers the order in
// which claim status writes reached the API server.
type heldGate struct {
	mu      sync.Mutex
	stopped map[string]chan struct{}
	written []string // "claim:phase", in order
}

func (g *heldGate) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			claim, ok := obj.(*locksv1alpha1.LockClaim)
			if ok && claim.Status.Phase == locksv1alpha1.ClaimHeld {
				g.mu.Lock()
				gate := g.stopped[claim.Name]
				g.mu.Unlock()
				if gate != nil {
					<-gate
				}
			}
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			if ok && err == nil {
				g.mu.Lock()
				g.written = append(g.written, claim.Name+":"+string(claim.Status.Phase))
				g.mu.Unlock()
			}
			return err
		},
	}
}

// stop holds back claim's Held write until the returned function is called.
func (g *heldGate) stop(claim string) (release func()) {
	gate := make(chan struct{})
	g.mu.Lock()
	g.stopped[claim] = gate
	g.mu.Unlock()
	return sync.OnceFunc(func() { close(gate) })
}

func (g *heldGate) order() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.written)
}

// passReturns runs one pass of lock without waiting for the held lane, and fails the test if the
// pass fails or does not return within a few seconds (it waited for a Held write).
func (e *stepEnv) passReturns(lock string) {
	e.t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := e.r.Reconcile(e.ctx(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: stepNamespace, Name: lock}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			e.t.Fatalf("pass of %s: %v", lock, err)
		}
	case <-time.After(5 * time.Second):
		e.t.Fatalf("the pass of %s waited for a Held write held back in the lane", lock)
	}
}

// TestStepHeldWriteLeavesThePass: a grant's pass returns once the lock record is written, its
// Held write still on the way; a pass meanwhile sees the claim as Held (it writes nothing to it
// and grants nobody else), and a later write to the claim (its release, once its pod is gone)
// waits for the Held write and lands after it, never before. Before, the Held write held the
// lock's pass lock, so a holder that deleted its claim on reading the record waited for it.
func TestStepHeldWriteLeavesThePass(t *testing.T) {
	gate := &heldGate{stopped: map[string]chan struct{}{}}
	e := newStepEnv(t, gate.funcs())
	e.lock("db")
	pod := e.pod("web-0")
	e.claim("a", "db", ownedBy(pod))
	e.claim("b", "db")
	e.mustPass("db") // takes the key
	release := gate.stop("a")
	defer release()

	e.passReturns("db")
	if holders := e.getLock("db").Status.Holders; len(holders) != 1 || holders[0].Claim != "a" {
		t.Fatalf("lock record holders %+v, want claim a", holders)
	}
	if a := e.getClaim("a"); a.Status.Phase == locksv1alpha1.ClaimHeld {
		t.Fatalf("claim a Held on the API server while its write is held back")
	}

	e.passReturns("db") // sees a as Held: nothing to write to it, nobody else to grant
	if holders := e.getLock("db").Status.Holders; len(holders) != 1 || holders[0].Claim != "a" {
		t.Fatalf("lock record holders %+v after a pass beside the pending write, want claim a alone", holders)
	}

	// The holder's pod goes: the next pass ends a's hold and writes it, after the Held write.
	e.remove(pod)
	passed := make(chan error, 1)
	go func() { _, err := e.pass("db"); passed <- err }()
	time.Sleep(100 * time.Millisecond)
	release()
	if err := <-passed; err != nil {
		t.Fatalf("pass that ends a's hold: %v", err)
	}
	order := gate.order()
	held, ended := slices.Index(order, "a:Held"), slices.IndexFunc(order, func(w string) bool { return w == "a:Released" || w == "a:Lost" })
	if held < 0 || ended < held {
		t.Fatalf("claim status writes %v: want a's Held before its end", order)
	}
	if a := e.getClaim("a"); a.Status.Phase == locksv1alpha1.ClaimHeld {
		t.Fatalf("claim a still Held after its pod went: %+v", a.Status)
	}
}

// TestStepFailedHeldWriteIsWrittenAgain: a Held write that fails in the lane (here the claim was
// written by someone else in between, so its precondition fails) wakes the lock, and the next pass
// writes Held on top of the claim as it now is.
func TestStepFailedHeldWriteIsWrittenAgain(t *testing.T) {
	gate := &heldGate{stopped: map[string]chan struct{}{}}
	e := newStepEnv(t, gate.funcs())
	e.lock("db")
	e.claim("a", "db")
	e.mustPass("db") // takes the key
	release := gate.stop("a")

	e.passReturns("db")
	a := e.getClaim("a")
	a.Labels = map[string]string{"touched": "yes"} // a write by another party moves its resourceVersion
	if err := e.client.Update(e.ctx(), a); err != nil {
		t.Fatal(err)
	}
	release()
	e.r.memory.lane.idle()
	select {
	case <-e.r.wakeups:
	default:
		t.Fatalf("a failed Held write woke no pass")
	}
	if a := e.getClaim("a"); a.Status.Phase == locksv1alpha1.ClaimHeld {
		t.Fatalf("claim a Held although its write's precondition failed")
	}
	e.mustPass("db")
	if a := e.getClaim("a"); a.Status.Phase != locksv1alpha1.ClaimHeld {
		t.Fatalf("claim a %q after the pass that followed the failed write, want Held", a.Status.Phase)
	}
}

// TestStepHeldWritesKeepGrantOrder: the Held writes of one pass's grants (two places of a
// semaphore) reach the API server in grant order, the second after the first even while the
// first is held back, so that whoever watches claims sees their tokens only go up.
func TestStepHeldWritesKeepGrantOrder(t *testing.T) {
	gate := &heldGate{stopped: map[string]chan struct{}{}}
	e := newStepEnv(t, gate.funcs())
	e.lock("pool", func(l *locksv1alpha1.DistributedLock) { l.Spec.MaxHolders = 2 })
	e.claim("a", "pool")
	e.claim("b", "pool")
	e.mustPass("pool") // takes the key
	release := gate.stop("a")
	defer release()

	e.passReturns("pool")
	time.Sleep(100 * time.Millisecond)
	if order := gate.order(); len(order) != 0 {
		t.Fatalf("claim status writes %v while a's Held write is held back, want none: b's overtook it", order)
	}
	release()
	e.r.memory.lane.idle()
	if order := gate.order(); !slices.Equal(order, []string{"a:Held", "b:Held"}) {
		t.Fatalf("claim status writes %v, want a's Held, then b's", order)
	}
	if a, b := e.getClaim("a"), e.getClaim("b"); a.Status.FencingToken >= b.Status.FencingToken {
		t.Fatalf("tokens a %d, b %d: want a's below b's (grant order)", a.Status.FencingToken, b.Status.FencingToken)
	}
}
