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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// After a restart (or a leader change) the lock record names a hold that the new Renewer does not
// know: the first pass asks the backend whether it still holds it, and resumes it, or reports it
// Lost, never granting it again with a new token.
func TestStepResumeAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// between happens between the restart and the first pass.
		between    func(e *stepEnv)
		wantPhase  locksv1alpha1.ClaimPhase
		wantReason string
	}{
		{"the backend still holds it: resumed, same token", func(*stepEnv) {}, locksv1alpha1.ClaimHeld, locksv1alpha1.ReasonAcquired},
		{"it expired while no controller renewed it: Lost", func(e *stepEnv) { e.clock.Step(31 * time.Second) },
			locksv1alpha1.ClaimLost, locksv1alpha1.ReasonRenewFailed},
		{"another client took the key: Lost", func(e *stepEnv) {
			e.clock.Step(31 * time.Second)
			e.store.Steal(stepKey("db"), "intruder")
		}, locksv1alpha1.ClaimLost, locksv1alpha1.ReasonRenewFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newStepEnv(t, interceptor.Funcs{})
			e.lock("db", withLockDelay(10))
			e.claim("a", "db")
			e.claim("b", "db")
			e.heldBy("db", "a")
			token := e.getClaim("a").Status.FencingToken

			e.restart()
			tc.between(e)
			e.mustPass("db")

			a := e.getClaim("a")
			if a.Status.Phase != tc.wantPhase || acquiredReason(&a.Status) != tc.wantReason || a.Status.FencingToken != token {
				t.Fatalf("claim a: %s/%s token %d, want %s/%s token %d", a.Status.Phase, acquiredReason(&a.Status),
					a.Status.FencingToken, tc.wantPhase, tc.wantReason, token)
			}
			lock := e.getLock("db")
			if tc.wantPhase == locksv1alpha1.ClaimHeld {
				hold := renewal.HoldKey{Backend: lock.BackendName(), Key: stepKey("db"), Identity: lock.Status.Holders[0].BackendIdentity}
				if _, tracked := e.r.Renewer.Lookup(hold); !tracked {
					t.Fatalf("the resumed hold is not renewed")
				}
				return
			}
			if len(lock.Status.Holders) != 0 || lock.Status.LockDelayUntil == nil {
				t.Fatalf("after a lost hold: holders %+v, lockDelayUntil %v; want none and a delay", lock.Status.Holders, lock.Status.LockDelayUntil)
			}
			if b := e.getClaim("b"); b.Status.Phase == locksv1alpha1.ClaimHeld {
				t.Fatalf("the next claim was granted inside the lock delay")
			}
		})
	}
}

// Deleting a lock releases its holder on the backend and fails every claim with LockNotFound;
// its claims then hold and wait for nothing, so the same pass lets the key and the lock go.
func TestStepLockDeleted(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db", func(l *locksv1alpha1.DistributedLock) { l.Finalizers = []string{locksv1alpha1.Finalizer} })
	e.claim("a", "db")
	e.claim("b", "db")
	e.heldBy("db", "a")

	e.remove(e.getLock("db"))
	e.mustPass("db")
	for _, name := range []string{"a", "b"} {
		c := e.getClaim(name)
		if c.Status.Phase != locksv1alpha1.ClaimFailed || acquiredReason(&c.Status) != locksv1alpha1.ReasonLockNotFound {
			t.Fatalf("claim %s: %s/%s, want Failed/LockNotFound", name, c.Status.Phase, acquiredReason(&c.Status))
		}
	}
	if got := e.backendHolders(stepKey("db")); len(got) != 0 {
		t.Fatalf("backend holds %v after the lock's deletion, want none", got)
	}
	l := &locksv1alpha1.DistributedLock{}
	if err := e.client.Get(e.ctx(), types.NamespacedName{Namespace: stepNamespace, Name: "db"}, l); !apierrors.IsNotFound(err) {
		t.Fatalf("the lock is still there (finalizers %v, error %v)", l.Finalizers, err)
	}
	leases := &coordinationv1.LeaseList{}
	if err := e.client.List(e.ctx(), leases, client.InNamespace("lockwarden-system")); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Fatalf("the key ledger keeps %d Lease(s) after the lock went", len(leases.Items))
	}
}
