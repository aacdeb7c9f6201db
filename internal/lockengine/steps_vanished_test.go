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
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Claims without a finalizer (vanished.go): the lock record names each hold's claim by name and
// UID, and keeps its holder, so that a claim deleted in one write is released by the next pass.

// TestStepDeletedClaimReleasedByRecord: a claim deleted while its holder lives is gone at once (no
// finalizer holds it); the next pass finds its record entry without a claim, releases the hold on
// the backend and grants the next claim in the same pass, without the lock delay (a release).
func TestStepDeletedClaimReleasedByRecord(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db", withLockDelay(30))
	pod := e.pod("web-0")
	a := e.claim("a", "db", ownedBy(pod))
	e.claim("b", "db")
	e.heldBy("db", "a")
	rec := e.getLock("db").Status.Holders[0]
	if rec.ClaimUID != a.UID || rec.Holder == nil || rec.Holder.Kind != "Pod" || rec.Holder.Name != "web-0" || rec.Holder.UID != pod.UID {
		t.Fatalf("record entry %+v, want claim a's UID and pod web-0 with its UID", rec)
	}
	if held := e.getClaim("a"); len(held.Finalizers) != 0 {
		t.Fatalf("claim a has finalizers %v, want none", held.Finalizers)
	}

	e.remove(e.getClaim("a"))
	e.mustPass("db")
	b := e.getClaim("b")
	if b.Status.Phase != locksv1alpha1.ClaimHeld || b.Status.FencingToken <= rec.FencingToken {
		t.Fatalf("claim b %s with token %d after a's deletion, want Held with a token above %d", b.Status.Phase, b.Status.FencingToken, rec.FencingToken)
	}
	lock := e.getLock("db")
	if lock.Status.LockDelayUntil != nil {
		t.Fatalf("lockDelayUntil %v after a release, want none", lock.Status.LockDelayUntil)
	}
	if len(lock.Status.Holders) != 1 || lock.Status.Holders[0].ClaimUID != b.UID {
		t.Fatalf("record %+v, want claim b alone", lock.Status.Holders)
	}
	if got := e.backendHolders(stepKey("db")); len(got) != 1 || got[0] != lock.Status.Holders[0].BackendIdentity {
		t.Fatalf("backend holders %v, want b's %q only", got, lock.Status.Holders[0].BackendIdentity)
	}
}

// TestStepRecreatedClaimDoesNotInheritTheHold: a claim deleted and created again under its name,
// for the same pod (so with the same identity), before the pass looked, is a new claim: the old
// hold is released and the new claim is granted with a new token. Matched by name alone, the new
// claim would have been told Held with the old grant's token.
func TestStepRecreatedClaimDoesNotInheritTheHold(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db")
	pod := e.pod("web-0")
	e.claim("a", "db", ownedBy(pod))
	e.heldBy("db", "a")
	first := e.getClaim("a").Status.FencingToken

	e.remove(e.getClaim("a"))
	again := e.claim("a", "db", ownedBy(pod))
	e.heldBy("db", "a")
	a := e.getClaim("a")
	if a.UID != again.UID || a.Status.FencingToken <= first {
		t.Fatalf("claim a (UID %s) Held with token %d, want the new claim (UID %s) with a token above %d", a.UID, a.Status.FencingToken, again.UID, first)
	}
	if rec := e.getLock("db").Status.Holders; len(rec) != 1 || rec[0].ClaimUID != again.UID {
		t.Fatalf("record %+v, want the new claim's UID", rec)
	}
}

// TestStepUpgradeShedsTheFinalizer: a claim that an earlier lockwarden gave the release finalizer,
// held under a record entry without the claim's UID, gets both: the entry its UID and holder, then
// the claim loses the finalizer. Deleted afterwards, it is released by the record.
func TestStepUpgradeShedsTheFinalizer(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db")
	pod := e.pod("web-0")
	a := e.claim("a", "db", ownedBy(pod), func(c *locksv1alpha1.LockClaim) { c.Finalizers = []string{locksv1alpha1.Finalizer} })
	e.claim("b", "db")
	e.heldBy("db", "a")
	// As an earlier lockwarden left them: the finalizer on the claim, an entry without UID or holder.
	old := e.getClaim("a")
	controllerutil.AddFinalizer(old, locksv1alpha1.Finalizer)
	if err := e.client.Update(e.ctx(), old); err != nil {
		t.Fatal(err)
	}
	lock := e.getLock("db")
	lock.Status.Holders[0].ClaimUID, lock.Status.Holders[0].Holder = "", nil
	if err := e.client.Status().Update(e.ctx(), lock); err != nil {
		t.Fatal(err)
	}

	e.mustPass("db")
	rec := e.getLock("db").Status.Holders
	if len(rec) != 1 || rec[0].ClaimUID != a.UID || rec[0].Holder == nil || rec[0].Holder.UID != pod.UID {
		t.Fatalf("record %+v, want claim a's UID and its pod filled in", rec)
	}
	if got := e.getClaim("a"); slices.Contains(got.Finalizers, locksv1alpha1.Finalizer) || got.Status.Phase != locksv1alpha1.ClaimHeld {
		t.Fatalf("claim a: finalizers %v, phase %s; want no finalizer, still Held", got.Finalizers, got.Status.Phase)
	}

	e.remove(e.getClaim("a"))
	e.heldBy("db", "b")
}

// TestStepOldEntryWithoutClaimReleased: a record entry from before claims lost their finalizer
// (no claim UID) whose claim is gone is released as before, as a release.
func TestStepOldEntryWithoutClaimReleased(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db", withLockDelay(30))
	e.claim("a", "db")
	e.claim("b", "db")
	e.heldBy("db", "a")
	lock := e.getLock("db")
	lock.Status.Holders[0].ClaimUID = ""
	if err := e.client.Status().Update(e.ctx(), lock); err != nil {
		t.Fatal(err)
	}
	e.remove(e.getClaim("a"))
	e.mustPass("db")
	if b := e.getClaim("b"); b.Status.Phase != locksv1alpha1.ClaimHeld {
		t.Fatalf("claim b %s, want Held at once", b.Status.Phase)
	}
}

// TestStepUnwrittenClaimKeepsItsFinalizer: claims that an earlier lockctl made with the release
// finalizer, on a new lock whose first pass only takes the key, keep it through that pass: their
// place in the queue is read from their resourceVersion until a status write stamps it, and
// updates shedding it (in parallel, in either order) would move the first claim behind the
// second. The next pass grants the first and sheds both.
func TestStepUnwrittenClaimKeepsItsFinalizer(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db")
	finalized := func(c *locksv1alpha1.LockClaim) { c.Finalizers = []string{locksv1alpha1.Finalizer} }
	e.claim("a", "db", finalized)
	e.claim("b", "db", finalized)
	e.mustPass("db")
	for _, name := range []string{"a", "b"} {
		if c := e.getClaim(name); c.Status.Phase != "" || !slices.Contains(c.Finalizers, locksv1alpha1.Finalizer) {
			t.Fatalf("claim %s after the pass that took the key: phase %q, finalizers %v; want no status and the finalizer kept", name, c.Status.Phase, c.Finalizers)
		}
	}
	e.mustPass("db")
	a, b := e.getClaim("a"), e.getClaim("b")
	if a.Status.Phase != locksv1alpha1.ClaimHeld || b.Status.Phase != locksv1alpha1.ClaimPending {
		t.Fatalf("claims a %s, b %s; want a Held and b Pending (queue order)", a.Status.Phase, b.Status.Phase)
	}
	if len(a.Finalizers) != 0 || len(b.Finalizers) != 0 {
		t.Fatalf("finalizers a %v, b %v once written; want none", a.Finalizers, b.Finalizers)
	}
}
