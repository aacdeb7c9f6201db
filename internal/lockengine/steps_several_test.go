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
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// onLocks makes a claim one of several locks.
func onLocks(locks ...string) func(*locksv1alpha1.LockClaim) {
	return func(c *locksv1alpha1.LockClaim) { c.Spec.LockName, c.Spec.LockNames = "", locks }
}

// refusingRecordOf is a client interceptor that refuses, with err, the writes of lock's record
// while refuse is set: a joint grant that stops half way.
func refusingRecordOf(lock string, refuse *atomic.Bool, err error) interceptor.Funcs {
	return interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if l, isLock := obj.(*locksv1alpha1.DistributedLock); isLock && l.Name == lock && refuse.Load() {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

// recordNames says whether lock's record names claim.
func (e *stepEnv) recordNames(lock, claim string) bool {
	e.t.Helper()
	for _, h := range e.getLock(lock).Status.Holders {
		if h.Claim == claim {
			return true
		}
	}
	return false
}

// TestStepSeveralLocksStoppedHalfWay: a joint grant whose second record write fails leaves the
// first record naming a claim that is not Held. The next pass of that lock first writes the
// claim, listing the entry (PartialGrant), and only the pass after gives it back; then the claim
// is granted both locks afresh, with new tokens.
func TestStepSeveralLocksStoppedHalfWay(t *testing.T) {
	refused := errors.New("the API server refused the write")
	var refuse atomic.Bool
	e := newStepEnv(t, refusingRecordOf("b", &refuse, refused))
	e.lock("a")
	e.lock("b")
	e.mustPass("a") // each lock's finalizer, key and first record
	e.mustPass("b")
	e.claim("m", "", onLocks("b", "a"))
	refuse.Store(true)
	if _, err := e.pass("a"); !errors.Is(err, refused) {
		t.Fatalf("pass error %v, want the refused write of b's record", err)
	}
	refuse.Store(false)
	if !e.recordNames("a", "m") || e.recordNames("b", "m") {
		t.Fatalf("after the stopped grant: a names m %v, b names m %v; want a only", e.recordNames("a", "m"), e.recordNames("b", "m"))
	}
	if got := e.backendHolders(stepKey("b")); len(got) != 0 {
		t.Fatalf("b's key is held by %v, named by no record", got)
	}
	if m := e.getClaim("m"); m.Status.Phase == locksv1alpha1.ClaimHeld {
		t.Fatal("m Held after a grant that stopped half way")
	}

	e.mustPass("a")
	m := e.getClaim("m")
	if !strings.Contains(e.acquiredCondition("m"), "/PartialGrant") || len(m.Status.Locks) != 1 || m.Status.Locks[0].LockName != "a" {
		t.Fatalf("m after the first look: %s, locks %+v; want PartialGrant listing a", e.acquiredCondition("m"), m.Status.Locks)
	}
	if !e.recordNames("a", "m") {
		t.Fatal("a's entry was released before the claim listed it")
	}
	partialToken := m.Status.Locks[0].FencingToken

	e.mustPass("a")
	if e.recordNames("a", "m") || len(e.backendHolders(stepKey("a"))) != 0 {
		t.Fatalf("a's entry not given back: record names m %v, key held by %v", e.recordNames("a", "m"), e.backendHolders(stepKey("a")))
	}
	if m := e.getClaim("m"); len(m.Status.Locks) != 0 || strings.Contains(e.acquiredCondition("m"), "PartialGrant") {
		t.Fatalf("m still lists %+v (%s) after the give-back", m.Status.Locks, e.acquiredCondition("m"))
	}

	e.heldBy("a", "m")
	m = e.getClaim("m")
	if len(m.Status.Locks) != 2 || !e.recordNames("a", "m") || !e.recordNames("b", "m") {
		t.Fatalf("m Held with locks %+v; records name it: a %v, b %v", m.Status.Locks, e.recordNames("a", "m"), e.recordNames("b", "m"))
	}
	if tok := partOf(&m.Status, "a").FencingToken; tok <= partialToken {
		t.Fatalf("a's new token %d, not above the given-back grant's %d", tok, partialToken)
	}
}

// TestStepSeveralLocksLoss: a several-lock claim whose hold of one lock is lost is Lost, and the
// pass of its other lock then releases that one too.
func TestStepSeveralLocksLoss(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("a")
	e.lock("b")
	e.claim("m", "", onLocks("a", "b"))
	e.heldBy("a", "m")
	if !e.recordNames("b", "m") {
		t.Fatal("b's record does not name m")
	}

	// A new leader finds b's key taken by another client once the hold expired.
	e.restart()
	e.clock.Step(31 * time.Second)
	e.store.Steal(stepKey("b"), "intruder")
	e.mustPass("b")
	if m := e.getClaim("m"); m.Status.Phase != locksv1alpha1.ClaimLost {
		t.Fatalf("m %s after b's hold was lost, want Lost", m.Status.Phase)
	}
	e.mustPass("a")
	if e.recordNames("a", "m") {
		t.Fatal("a's record still names the Lost claim")
	}
	if got := e.backendHolders(stepKey("a")); len(got) != 0 {
		t.Fatalf("a's key still held by %v", got)
	}
}

// TestStepSeveralLocksMissingLock: a claim one of whose locks does not exist says which, and holds
// none of them.
func TestStepSeveralLocksMissingLock(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("a")
	e.mustPass("a") // the lock's finalizer, key and first record
	e.claim("m", "", onLocks("a", "gone"))
	e.mustPass("a")
	if !strings.Contains(e.acquiredCondition("m"), "False/LockNotFound") || !strings.Contains(e.acquiredCondition("m"), "gone") {
		t.Fatalf("m: %s; want LockNotFound naming the missing lock", e.acquiredCondition("m"))
	}
	if e.recordNames("a", "m") || len(e.backendHolders(stepKey("a"))) != 0 {
		t.Fatal("m holds a while its other lock does not exist")
	}
}
