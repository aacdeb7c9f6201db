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
	"sync/atomic"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestStepGrantFreeLock: the first pass takes the key in the key ledger, the next grants the head
// of the queue; the claim, the lock record and the backend agree on the holder.
func TestStepGrantFreeLock(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db")
	e.claim("a", "db")
	e.claim("b", "db")
	e.mustPass("db") // takes the key
	// The pass that took the key wrote no waiter: the next grants and places them, and a place
	// written now would be out of date by then.
	for _, name := range []string{"a", "b"} {
		if c := e.getClaim(name); c.Status.Phase != "" || c.Status.QueuePosition != 0 || len(c.Status.Conditions) > 0 {
			t.Fatalf("claim %s after the pass that took the key: status %+v, want none yet", name, c.Status)
		}
	}
	e.mustPass("db") // grants

	a, b := e.getClaim("a"), e.getClaim("b")
	if a.Status.Phase != locksv1alpha1.ClaimHeld || a.Status.FencingToken == 0 {
		t.Fatalf("claim a: phase %q token %d, want Held with a token", a.Status.Phase, a.Status.FencingToken)
	}
	if b.Status.Phase != locksv1alpha1.ClaimPending || b.Status.QueuePosition != 1 {
		t.Fatalf("claim b: phase %q place %d, want Pending at 1", b.Status.Phase, b.Status.QueuePosition)
	}
	lock := e.getLock("db")
	if len(lock.Status.Holders) != 1 || lock.Status.Holders[0].Claim != "a" {
		t.Fatalf("lock record holders %+v, want claim a alone", lock.Status.Holders)
	}
	if got := e.backendHolders(stepKey("db")); len(got) != 1 || got[0] != lock.Status.Holders[0].BackendIdentity {
		t.Fatalf("backend holders %v, want the record's %q", got, lock.Status.Holders[0].BackendIdentity)
	}
}

// TestStepFailedGrantGivesBack: a pass that took backend holds and then failed before its lock
// record was written (here: the API server refuses the record's write) returns the holds it took.
// Before the give-back was deferred, the key stayed on the backend, named by no record, until its
// TTL ran out (issue 37, bug 1).
func TestStepFailedGrantGivesBack(t *testing.T) {
	refused := errors.New("the API server refused the write")
	var refuse atomic.Bool
	e := newStepEnv(t, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, isLock := obj.(*locksv1alpha1.DistributedLock); isLock && refuse.Load() {
				return refused
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	e.lock("pool", func(l *locksv1alpha1.DistributedLock) { l.Spec.MaxHolders = 2 })
	e.mustPass("pool") // the lock's finalizer, and a record with nobody in it
	e.claim("a", "pool")
	e.claim("b", "pool")
	refuse.Store(true)

	if _, err := e.pass("pool"); !errors.Is(err, refused) {
		t.Fatalf("pass error %v, want the refused record write", err)
	}
	if got := e.backendHolders(stepKey("pool")); len(got) != 0 {
		t.Fatalf("backend holds %v after the failed pass, want none: a hold no record names leaked", got)
	}
	if holders := e.getLock("pool").Status.Holders; len(holders) != 0 {
		t.Fatalf("lock record holders %+v, want none", holders)
	}
	for _, name := range []string{"a", "b"} {
		if c := e.getClaim(name); c.Status.Phase == locksv1alpha1.ClaimHeld {
			t.Fatalf("claim %s Held after a pass that recorded nothing", name)
		}
	}
}

// TestStepMissingHolderWaitsAside: a claim at the head of the queue whose holder does not exist
// (a pod never created, a heartbeat Lease never created) waits aside with a reason that names what
// is missing, the claims behind it are served, and it fails once holderMissingLimit has passed.
// Before, it kept its place and every claim behind it waited for ever, saying only Queued (issue
// 37, bug 2).
func TestStepMissingHolderWaitsAside(t *testing.T) {
	for _, tc := range []struct {
		name   string
		holder locksv1alpha1.ClaimHolder
		reason string
	}{
		{"a pod never created", locksv1alpha1.ClaimHolder{PodName: "web-0"}, locksv1alpha1.ReasonPodNotFound},
		{"a heartbeat Lease never created", locksv1alpha1.ClaimHolder{LeaseName: "hb"}, locksv1alpha1.ReasonHeartbeatNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newStepEnv(t, interceptor.Funcs{})
			e.lock("db")
			e.claim("ghost", "db", func(c *locksv1alpha1.LockClaim) { c.Spec.Holder = tc.holder.DeepCopy() })
			e.claim("next", "db")
			e.mustPass("db") // takes the key
			res := e.mustPass("db")

			if next := e.getClaim("next"); next.Status.Phase != locksv1alpha1.ClaimHeld {
				t.Fatalf("the claim behind the missing holder's: phase %q, want Held", next.Status.Phase)
			}
			ghost := e.getClaim("ghost")
			if got := acquiredReason(&ghost.Status); ghost.Status.Phase != locksv1alpha1.ClaimPending || got != tc.reason || ghost.Status.QueuePosition != 0 {
				t.Fatalf("the missing holder's claim: phase %q reason %q position %d, want Pending, %s, 0",
					ghost.Status.Phase, got, ghost.Status.QueuePosition, tc.reason)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > holderMissingLimit*11/10 {
				t.Fatalf("the pass looks again in %s, want at most the limit (with jitter)", res.RequeueAfter)
			}

			e.clock.Step(holderMissingLimit)
			e.mustPass("db")
			ghost = e.getClaim("ghost")
			if got := acquiredReason(&ghost.Status); ghost.Status.Phase != locksv1alpha1.ClaimFailed || got != tc.reason {
				t.Fatalf("after the limit: phase %q reason %q, want Failed, %s", ghost.Status.Phase, got, tc.reason)
			}
			if next := e.getClaim("next"); next.Status.Phase != locksv1alpha1.ClaimHeld {
				t.Fatalf("the holder lost its hold when the claim ahead failed: phase %q", next.Status.Phase)
			}
		})
	}
}
