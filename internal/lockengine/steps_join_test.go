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
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestStepJoinNeedsTheSameHolder: a claim joins a hold (re-entry) only with the same identity and
// the same holder: a second claim of the holding pod joins at once with its token; a claim of
// another pod that copies the holder's identity from the lock's status (the forged claim of the
// reliability review's F1) waits in the queue, and is never handed the live hold or its token.
func TestStepJoinNeedsTheSameHolder(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db")
	x, y := e.pod("x"), e.pod("y")
	e.claim("x-db", "db", ownedBy(x))
	e.mustPass("db") // takes the key
	e.mustPass("db") // grants x
	held := e.getClaim("x-db")
	if held.Status.Phase != locksv1alpha1.ClaimHeld {
		t.Fatalf("claim x-db: phase %q, want Held", held.Status.Phase)
	}

	e.claim("x-db-again", "db", ownedBy(x))
	e.claim("forged", "db", ownedBy(y), func(c *locksv1alpha1.LockClaim) { c.Spec.Holder.Identity = held.Status.HolderIdentity })
	e.mustPass("db")

	again := e.getClaim("x-db-again")
	if again.Status.Phase != locksv1alpha1.ClaimHeld || again.Status.FencingToken != held.Status.FencingToken {
		t.Fatalf("the holding pod's second claim: phase %q token %d, want Held with its hold's token %d",
			again.Status.Phase, again.Status.FencingToken, held.Status.FencingToken)
	}
	forged := e.getClaim("forged")
	if forged.Status.Phase != locksv1alpha1.ClaimPending || forged.Status.FencingToken != 0 {
		t.Fatalf("another pod's claim with the holder's identity: phase %q token %d, want Pending without a token",
			forged.Status.Phase, forged.Status.FencingToken)
	}
	if hs := e.getLock("db").Status.Holders; len(hs) != 1 || hs[0].Claim != "x-db" {
		t.Fatalf("lock record holders %+v, want claim x-db alone", hs)
	}
}

func TestSameHolder(t *testing.T) {
	pod := func(name, uid string) *locksv1alpha1.RecordedHolder {
		return &locksv1alpha1.RecordedHolder{APIVersion: "v1", Kind: "Pod", Name: name, UID: types.UID(uid)}
	}
	lease := &locksv1alpha1.RecordedHolder{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "worker"}
	job := &locksv1alpha1.RecordedHolder{APIVersion: "batch/v1", Kind: "Job", Name: "nightly", UID: "j1"}
	for name, c := range map[string]struct {
		a, b *locksv1alpha1.RecordedHolder
		want bool
	}{
		"both detached":                      {nil, nil, true},
		"the same pod":                       {pod("x", "u1"), pod("x", "u1"), true},
		"another pod":                        {pod("x", "u1"), pod("y", "u2"), false},
		"a new pod of the same name":         {pod("x", "u1"), pod("x", "u2"), false},
		"a pod whose UID the pass knows not": {pod("x", "u1"), pod("x", ""), false},
		"detached and a pod":                 {nil, pod("x", "u1"), false},
		"the same Lease":                     {lease, lease, true},
		"a Lease and a pod of its name":      {lease, pod("worker", ""), false},
		"the same Job":                       {job, job, true},
	} {
		if got := sameHolder(c.a, c.b); got != c.want {
			t.Errorf("%s: sameHolder = %v, want %v", name, got, c.want)
		}
		if got := sameHolder(c.b, c.a); got != c.want {
			t.Errorf("%s, the other way: sameHolder = %v, want %v", name, got, c.want)
		}
	}
}

// TestStepBackendErrorStaysInTheLog: a grant the backend fails leaves the claim waiting with a
// message that says where to look, without the driver's error (addresses, database names): that
// is the cluster admin's to read, in the controller's log, where the pass's error goes.
func TestStepBackendErrorStaysInTheLog(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db")
	e.claim("a", "db")
	e.mustPass("db") // takes the key
	e.store.SetUnavailable(errors.New("dial tcp 10.0.0.7:6379: connection refused"))
	_, err := e.pass("db")
	if err == nil || !strings.Contains(err.Error(), "10.0.0.7:6379") {
		t.Fatalf("the pass's error %v, want the backend's, for the controller's log", err)
	}
	c := e.getClaim("a")
	cond := meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionAcquired)
	if cond == nil || cond.Reason != locksv1alpha1.ReasonBackendUnavailable {
		t.Fatalf("claim a's Acquired condition %+v, want reason %s", cond, locksv1alpha1.ReasonBackendUnavailable)
	}
	if strings.Contains(cond.Message, "10.0.0.7") {
		t.Fatalf("claim a's message %q shows the backend's address", cond.Message)
	}
}

// TestStepSeveralLocksNeverJoin: a claim of several locks by the pod that holds one of them does
// not join that hold, as a second one-lock claim of the pod would: it is granted all its locks
// together or none, so it waits, and its wait is written by its first lock's pass alone.
func TestStepSeveralLocksNeverJoin(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("a")
	e.lock("b")
	x := e.pod("x")
	e.claim("x-b", "b", ownedBy(x))
	e.heldBy("b", "x-b")

	e.claim("x-ab", "", ownedBy(x), onLocks("a", "b"))
	e.mustPass("b") // b's pass: the claim's wait is not b's to write
	if got := e.getClaim("x-ab"); got.Status.Phase != "" {
		t.Fatalf("claim x-ab after its second lock's pass: phase %q, want no status (its first lock's pass writes its wait)", got.Status.Phase)
	}
	for range 2 {
		e.mustPass("a")
		e.mustPass("b")
	}
	got := e.getClaim("x-ab")
	if got.Status.Phase == locksv1alpha1.ClaimHeld {
		t.Fatalf("claim x-ab Held while claim x-b holds b: it joined the pod's hold")
	}
	if got.Status.Phase != locksv1alpha1.ClaimPending {
		t.Fatalf("claim x-ab: phase %q, want Pending behind x-b's hold of b", got.Status.Phase)
	}
	if e.recordNames("b", "x-ab") {
		t.Fatalf("lock b's record names claim x-ab beside x-b")
	}
}
