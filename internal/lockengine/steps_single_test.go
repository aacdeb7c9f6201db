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
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
)

// These tests call one step alone, the way Cluster API tests its machine controller's phases:
// the scope is loaded as a pass loads it, the steps before the one under test run as they would,
// and the test asserts what that step alone left (on the scope, the objects and the backend) and
// what it asked of the pass (its stepResult).

// scopeOf loads lock's scope as a pass does and runs the steps given, in order, on it.
func (e *stepEnv) scopeOf(lock string, before ...lockStep) *lockScope {
	e.t.Helper()
	s, err := e.r.load(e.ctx(), types.NamespacedName{Namespace: stepNamespace, Name: lock})
	if err != nil || s == nil || s.lock == nil {
		e.t.Fatalf("load of %s: scope %v, error %v", lock, s, err)
	}
	for _, step := range before {
		if _, err := step(e.ctx(), s); err != nil {
			e.t.Fatalf("a step before the one under test failed: %v", err)
		}
	}
	return s
}

// claimOf is the scope's copy of claim name.
func claimOf(t *testing.T, s *lockScope, name string) *locksv1alpha1.LockClaim {
	t.Helper()
	for _, c := range s.claims {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the scope has no claim %s", name)
	return nil
}

// acquiredCondition is c's Acquired condition; nil when it has none.
func acquiredCondition(c *locksv1alpha1.LockClaim) *metav1.Condition {
	return meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionAcquired)
}

// TestStepWaitingVerdicts: queueOf sorts the waiting claims by their holders (in the queue, aside
// for a pod or heartbeat Lease that does not exist yet, ended for a pod that died) and writes
// nothing; queueClaims then applies exactly that.
func TestStepWaitingVerdicts(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db")
	e.mustPass("db") // the lock's finalizer and key
	web := e.pod("web-0")
	dead := e.pod("batch-0")
	dead.Status.Phase = corev1.PodFailed
	if err := e.client.Status().Update(e.ctx(), dead); err != nil {
		t.Fatal(err)
	}
	e.claim("live", "db", ownedBy(web))
	e.claim("ghost", "db", func(c *locksv1alpha1.LockClaim) { c.Spec.Holder = &locksv1alpha1.ClaimHolder{PodName: "web-9"} })
	e.claim("dead", "db", ownedBy(dead))
	e.claim("quiet", "db", func(c *locksv1alpha1.LockClaim) { c.Spec.Holder = &locksv1alpha1.ClaimHolder{LeaseName: "worker"} })
	s := e.scopeOf("db", e.r.settleParts, e.r.endHolds, e.r.writeEndedHolds)
	before := make([]*locksv1alpha1.LockClaim, len(s.claims))
	for i, c := range s.claims {
		before[i] = c.DeepCopy()
	}

	line := e.r.queueOf(s)
	for i, c := range s.claims {
		if !reflect.DeepEqual(before[i], c) {
			t.Fatalf("queueOf changed claim %s: %+v, was %+v", c.Name, c.Status, before[i].Status)
		}
	}
	if len(line.queue) != 1 || line.queue[0].claim.Name != "live" {
		t.Fatalf("queue %v, want [live]", queuedNames(line.queue))
	}
	want := map[string]struct {
		end, missing string
		seen         types.UID
	}{
		"live":  {seen: web.UID},
		"ghost": {missing: locksv1alpha1.ReasonPodNotFound},
		"dead":  {end: locksv1alpha1.ReasonHolderTerminated, seen: dead.UID},
		"quiet": {missing: locksv1alpha1.ReasonHeartbeatNotFound},
	}
	if len(line.judged) != len(want) {
		t.Fatalf("judged %d claims, want %d", len(line.judged), len(want))
	}
	for _, j := range line.judged {
		w := want[j.claim.Name]
		var end, missing string
		if j.verdict.end != nil {
			end = j.verdict.end.reason
		}
		if j.verdict.missing != nil {
			missing = j.verdict.missing.reason
		}
		if end != w.end || missing != w.missing || j.verdict.seen != w.seen {
			t.Errorf("%s: end %q missing %q seen %q; want %q %q %q", j.claim.Name, end, missing, j.verdict.seen, w.end, w.missing, w.seen)
		}
	}

	res, err := e.r.queueClaims(e.ctx(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got := claimOf(t, s, "live"); got.Status.PodUID != web.UID {
		t.Errorf("live's podUID %q, want the pod's %q, recorded when first seen", got.Status.PodUID, web.UID)
	}
	if got := claimOf(t, s, "dead"); got.Status.Phase != locksv1alpha1.ClaimFailed {
		t.Errorf("dead's phase %q, want Failed", got.Status.Phase)
	}
	for _, name := range []string{"ghost", "quiet"} {
		c := claimOf(t, s, name)
		if cond := acquiredCondition(c); cond == nil || c.Status.QueuePosition != 0 || !strings.Contains(cond.Message, "waits aside") {
			t.Errorf("%s: position %d, condition %+v; want aside (position 0)", name, c.Status.QueuePosition, cond)
		}
	}
	// The aside claims give up holderMissingLimit after their creation: the pass looks again then.
	if res.after <= 0 || res.after > holderMissingLimit {
		t.Errorf("queueClaims asked for the next pass in %v, want within %v", res.after, holderMissingLimit)
	}
	if s.ready != nil || len(s.line) != 1 || len(s.queue) != 1 {
		t.Errorf("line %v, queue %v, ready %v; want [live], [live], none", queuedNames(s.line), queuedNames(s.queue), s.ready)
	}
}

// queuedNames are the names of the queue's claims.
func queuedNames(queue []*queued) []string {
	names := make([]string, len(queue))
	for i, q := range queue {
		names[i] = q.claim.Name
	}
	return names
}

// TestStepResume: after a restart (no Renewer state), resume takes up a hold the backend still
// has for the record's identity, and says it is lost when another client took the key, when the
// backend let it go, or when the backend is unusable past its expiry; while the backend is
// unusable before that, it cannot tell and asks for a look before the expiry.
func TestStepResume(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fault is done to the world after the restart, before resume.
		fault func(e *stepEnv, s *lockScope)
		// lost is a word of the loss message; empty when the hold is resumed or undecided.
		lost      string
		resumed   bool
		undecided bool
	}{
		{name: "the backend still holds it", resumed: true},
		{name: "another client took the key", lost: "Another client took the lock",
			fault: func(e *stepEnv, s *lockScope) { e.store.Steal(s.use.key, "outsider") }},
		{name: "the backend let it go", lost: "no longer holds it",
			fault: func(e *stepEnv, s *lockScope) {
				rec := s.lock.Status.Holders[0]
				if err := e.store.Release(e.ctx(), leaseOf(s, &rec)); err != nil {
					e.t.Fatal(err)
				}
			}},
		{name: "the backend is unusable, the hold not expired", undecided: true,
			fault: func(_ *stepEnv, s *lockScope) { s.use.session = nil }},
		{name: "the backend is unusable past the hold's expiry", lost: "could renew it",
			fault: func(_ *stepEnv, s *lockScope) {
				s.use.session = nil
				s.now = s.now.Add(time.Hour)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newStepEnv(t, interceptor.Funcs{})
			e.lock("db")
			web := e.pod("web-0")
			e.claim("a", "db", ownedBy(web))
			e.mustPass("db") // the lock's finalizer and key
			e.mustPass("db") // the grant
			if c := e.getClaim("a"); c.Status.Phase != locksv1alpha1.ClaimHeld {
				t.Fatalf("a is %q before the restart, want Held", c.Status.Phase)
			}
			e.restart()
			s := e.scopeOf("db")
			if tc.fault != nil {
				tc.fault(e, s)
			}
			rec := &s.lock.Status.Holders[0]
			keep := []*locksv1alpha1.LockClaim{claimOf(t, s, "a")}
			v, err := e.r.resume(e.ctx(), s, rec, keep)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.resumed && (v.lease == nil || v.lease.Identity != recordBackendIdentity(rec) || v.lost != ""):
				t.Fatalf("resumed %+v, want the lease of %s", v, recordBackendIdentity(rec))
			case tc.lost != "" && (v.lease != nil || !strings.Contains(v.lost, tc.lost)):
				t.Fatalf("resumed %+v, want lost (%q)", v, tc.lost)
			case tc.undecided && (v.lease != nil || v.lost != "" || v.retryIn <= 0 || v.retryIn > 5*time.Second):
				t.Fatalf("resumed %+v, want undecided with a look within 5s", v)
			}
		})
	}
}

// leaseOf is the backend lease of record entry rec of the scope's lock.
func leaseOf(s *lockScope, rec *locksv1alpha1.LockHolder) backends.Lease {
	return backends.Lease{Key: s.use.key, Identity: recordBackendIdentity(rec), TTL: s.use.ttl}
}

// TestStepServeJoint: the joint grant, called alone in the home lock's pass, takes both keys for
// the claim of two locks first in line on each (recorded by nothing yet: giveBack and endJoint
// return them); with the other lock's pass running, it takes nothing and asks for a look soon.
func TestStepServeJoint(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("a")
	e.lock("b")
	e.mustPass("a")
	e.mustPass("b")
	e.claim("m", "", onLocks("a", "b"))
	before := []lockStep{e.r.settleParts, e.r.endHolds, e.r.writeEndedHolds, e.r.queueClaims}

	busy := e.r.memory.passes.lock(types.NamespacedName{Namespace: stepNamespace, Name: "b"})
	s := e.scopeOf("a", before...)
	if s.ready == nil || s.ready.claim.Name != "m" {
		t.Fatalf("ready %v, want m first in line", s.ready)
	}
	res, err := e.r.serveJoint(e.ctx(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.grants) != 0 || res.after != jointBusyRetry || len(e.backendHolders(stepKey("a"))) != 0 {
		t.Fatalf("with b's pass running: grants %d, next look %v, a held by %v; want none, %v, none",
			len(s.grants), res.after, e.backendHolders(stepKey("a")), jointBusyRetry)
	}
	if err := e.r.endJoint(e.ctx(), s); err != nil {
		t.Fatal(err)
	}
	busy()

	s = e.scopeOf("a", before...)
	if _, err := e.r.serveJoint(e.ctx(), s); err != nil {
		t.Fatal(err)
	}
	if s.joint == nil || !s.joint.granted || len(s.grants) != 1 || len(s.joint.scopes) != 1 || len(s.joint.scopes[0].grants) != 1 {
		t.Fatalf("joint %+v, grants %d: want both locks taken", s.joint, len(s.grants))
	}
	for _, lock := range []string{"a", "b"} {
		if got := e.backendHolders(stepKey(lock)); len(got) != 1 {
			t.Fatalf("%s's key held by %v, want the claim alone", lock, got)
		}
	}
	// Nothing recorded the grant: the pass's deferred give-backs return both keys.
	if err := errors.Join(e.r.giveBack(e.ctx(), s), e.r.endJoint(e.ctx(), s)); err != nil {
		t.Fatal(err)
	}
	for _, lock := range []string{"a", "b"} {
		if got := e.backendHolders(stepKey(lock)); len(got) != 0 {
			t.Fatalf("%s's key still held by %v after the give-back", lock, got)
		}
	}
}

// TestStepSettleParts: a joint grant that stopped half way left a's record naming m, which waits.
// settleParts alone first lists the entry in m's status (PartialGrant), sets it aside and asks
// for a look soon; once that write has landed, settleParts gives the entry back and m waits for
// all its locks again.
func TestStepSettleParts(t *testing.T) {
	refused := errors.New("the API server refused the write")
	var refuse atomic.Bool
	e := newStepEnv(t, refusingRecordOf("b", &refuse, refused))
	e.lock("a")
	e.lock("b")
	e.mustPass("a")
	e.mustPass("b")
	m := e.claim("m", "", onLocks("a", "b"))
	refuse.Store(true)
	if _, err := e.pass("a"); !errors.Is(err, refused) {
		t.Fatalf("pass error %v, want the refused write of b's record", err)
	}
	refuse.Store(false)

	s := e.scopeOf("a")
	res, err := e.r.settleParts(e.ctx(), s)
	if err != nil {
		t.Fatal(err)
	}
	part := claimOf(t, s, "m")
	if aside, settled := s.settled[m.UID]; !settled || !aside || res.after != staleRetry {
		t.Fatalf("settled %v (aside %v), next look %v; want set aside, %v", settled, aside, res.after, staleRetry)
	}
	if cond := acquiredCondition(part); cond == nil || cond.Reason != locksv1alpha1.ReasonPartialGrant || partOf(&part.Status, "a") == nil {
		t.Fatalf("m's part on a: condition %+v, locks %+v; want PartialGrant listing a", cond, part.Status.Locks)
	}

	e.mustPass("a") // the whole pass writes m, listing the entry
	s = e.scopeOf("a")
	if _, err := e.r.settleParts(e.ctx(), s); err != nil {
		t.Fatal(err)
	}
	part = claimOf(t, s, "m")
	if aside, settled := s.settled[m.UID]; !settled || aside {
		t.Fatalf("settled %v (aside %v), want given back", settled, aside)
	}
	if cond := acquiredCondition(part); cond == nil || cond.Reason != locksv1alpha1.ReasonQueued || len(part.Status.Locks) != 0 {
		t.Fatalf("m's part: condition %+v, locks %+v; want Queued with none", cond, part.Status.Locks)
	}
}
