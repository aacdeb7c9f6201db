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

package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// claim builds a claim of lock in phase with token, its Acquired condition's reason, and its
// renewTime.
func claim(name, lock, pod string, phase locksv1alpha1.ClaimPhase, token int64, reason string, renew time.Time) *locksv1alpha1.LockClaim {
	c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: locksv1alpha1.LockClaimSpec{LockName: lock}}
	if pod != "" {
		c.Spec.Holder = &locksv1alpha1.ClaimHolder{PodName: pod}
	}
	c.Status.Phase, c.Status.FencingToken = phase, token
	if reason != "" {
		c.Status.Conditions = []metav1.Condition{{Type: locksv1alpha1.ConditionAcquired, Status: metav1.ConditionFalse, Reason: reason}}
	}
	if !renew.IsZero() {
		r := metav1.NewMicroTime(renew)
		c.Status.RenewTime = &r
	}
	return c
}

func TestTrackerGrantsAndHandoffs(t *testing.T) {
	tr := newTracker(2, 3, 0)
	tr.observe(claim("a0", "a", "", "", 0, "", time.Time{}), at(0))
	tr.observe(claim("a1", "a", "", locksv1alpha1.ClaimPending, 0, "Queued", time.Time{}), at(0))
	if s := tr.snapshot(); s.withStatus != 1 || s.claims != 2 {
		t.Errorf("withStatus/claims = %d/%d, want 1/2: a claim without a phase has had no status yet", s.withStatus, s.claims)
	}
	g, ok := tr.observe(claim("a0", "a", "", locksv1alpha1.ClaimHeld, 10, "", at(1)), at(1))
	if !ok || g.claim != "a0" || g.lock != "a" {
		t.Fatalf("grant = %+v, %v; want a0 on a", g, ok)
	}
	if !tr.hasWaiters("a") {
		t.Error("a1 waits behind a0, but hasWaiters(a) is false")
	}
	// Seen Held again (a renewal): no second grant.
	if _, ok := tr.observe(claim("a0", "a", "", locksv1alpha1.ClaimHeld, 10, "", at(2)), at(2)); ok {
		t.Error("a renewal of a held claim counted as a grant")
	}
	if s := tr.snapshot(); s.heldLocks != 1 || !s.allHeldAt.IsZero() {
		t.Errorf("heldLocks = %d, allHeldAt = %v; want 1 and not yet all", s.heldLocks, s.allHeldAt)
	}
	tr.observe(claim("b0", "b", "", locksv1alpha1.ClaimHeld, 11, "", at(3)), at(3))
	if s := tr.snapshot(); s.heldLocks != 2 || !s.allHeldAt.Equal(at(3)) || !s.allClaimsAt.Equal(at(3)) {
		t.Errorf("after b0: heldLocks %d, allHeldAt %v, allClaimsAt %v; want 2 and both at 3 s", s.heldLocks, s.allHeldAt, s.allClaimsAt)
	}

	// The harness ends a0: its release is no loss, and a1's grant is a handoff timed from the end.
	tr.retire("a0", at(4))
	tr.observe(claim("a0", "a", "", locksv1alpha1.ClaimReleased, 10, locksv1alpha1.ReasonClaimDeleted, time.Time{}), at(4.1))
	tr.observeDelete("a0", at(4.2))
	tr.observe(claim("a1", "a", "", locksv1alpha1.ClaimHeld, 12, "", at(4.5)), at(4.5))
	if tr.hasWaiters("a") || tr.hasWaiters("b") {
		t.Error("no claim waits any more, but hasWaiters says one does")
	}
	lat, n := tr.handoffsSince(0)
	if n != 1 || lat[0] != 500*time.Millisecond {
		t.Errorf("handoffs = %v, want one of 500ms", lat)
	}
	if s := tr.snapshot(); s.losses != 0 || s.grants != 3 || s.heldLocks != 2 {
		t.Errorf("losses %d, grants %d, heldLocks %d; want 0, 3, 2", s.losses, s.grants, s.heldLocks)
	}
	if got := tr.holders(); len(got) != 2 {
		t.Errorf("holders = %+v, want a1 and b0", got)
	}
}

func TestTrackerLosses(t *testing.T) {
	for _, c := range []struct {
		name string
		// then is what happens to the held claim h (token 7) after its grant.
		then    func(tr *tracker)
		lost    bool
		howHave string
	}{
		{"renewal failed", func(tr *tracker) {
			tr.observe(claim("h", "l", "", locksv1alpha1.ClaimLost, 7, locksv1alpha1.ReasonRenewFailed, time.Time{}), at(2))
		}, true, "phase Lost, reason RenewFailed"},
		{"released without the harness", func(tr *tracker) {
			tr.observe(claim("h", "l", "p", locksv1alpha1.ClaimReleased, 7, locksv1alpha1.ReasonHolderTerminated, time.Time{}), at(2))
		}, true, "phase Released, reason HolderTerminated"},
		{"pod deleted by the harness", func(tr *tracker) {
			tr.retire("h", at(1.5))
			tr.observe(claim("h", "l", "p", locksv1alpha1.ClaimReleased, 7, locksv1alpha1.ReasonHolderTerminated, time.Time{}), at(2))
		}, false, ""},
		{"gone while held", func(tr *tracker) { tr.observeDelete("h", at(2)) }, true, "deleted while Held"},
		{"deleted by the harness while held", func(tr *tracker) {
			tr.retire("h", at(1.5))
			tr.observeDelete("h", at(2))
		}, false, ""},
		{"granted again with a new token", func(tr *tracker) {
			tr.observe(claim("h", "l", "", locksv1alpha1.ClaimHeld, 9, "", at(2)), at(2))
		}, true, "fencing token changed from 7 to 9"},
		{"renewed", func(tr *tracker) {
			tr.observe(claim("h", "l", "", locksv1alpha1.ClaimHeld, 7, "", at(5)), at(5))
		}, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := newTracker(1, 1, 0)
			tr.observe(claim("h", "l", "p", locksv1alpha1.ClaimHeld, 7, "", at(1)), at(1))
			c.then(tr)
			losses := tr.lossesSince(0)
			if got := len(losses) > 0; got != c.lost {
				t.Fatalf("losses = %v, want lost %v", losses, c.lost)
			}
			if c.lost && !strings.Contains(losses[0].how, c.howHave) {
				t.Errorf("loss says %q, want it to contain %q", losses[0].how, c.howHave)
			}
		})
	}
}

func TestTrackerFailoverProgress(t *testing.T) {
	tr := newTracker(3, 3, 0)
	for i, l := range []string{"a", "b", "c"} {
		tr.observe(claim(l+"0", l, "", locksv1alpha1.ClaimHeld, int64(i+1), "", at(0)), at(0))
	}
	kept := []heldClaim{{claim: "a0", lock: "a", token: 1}, {claim: "b0", lock: "b", token: 2}}
	kill := at(10)
	if renewed, gone := tr.renewedAfter(kept, kill); renewed != 0 || gone != 0 {
		t.Errorf("before any renewal: renewed %d, gone %d", renewed, gone)
	}
	tr.observe(claim("a0", "a", "", locksv1alpha1.ClaimHeld, 1, "", at(11)), at(11))
	// b0 renewed by the old leader just before the kill: not resumed yet.
	tr.observe(claim("b0", "b", "", locksv1alpha1.ClaimHeld, 2, "", at(9.9)), at(10.2))
	if renewed, gone := tr.renewedAfter(kept, kill); renewed != 1 || gone != 0 {
		t.Errorf("renewed %d, gone %d; want 1, 0", renewed, gone)
	}
	tr.observe(claim("b0", "b", "", locksv1alpha1.ClaimLost, 2, locksv1alpha1.ReasonRenewFailed, time.Time{}), at(12))
	if renewed, gone := tr.renewedAfter(kept, kill); renewed != 1 || gone != 1 {
		t.Errorf("renewed %d, gone %d; want 1, 1", renewed, gone)
	}

	// c0's holder ended at the kill; c1 granted after it drains c.
	tr.retire("c0", kill)
	tr.observeDelete("c0", at(10.5))
	if n := tr.grantedAfter([]string{"c"}, kill); n != 0 {
		t.Errorf("grantedAfter = %d before c1's grant", n)
	}
	tr.observe(claim("c1", "c", "", locksv1alpha1.ClaimHeld, 4, "", at(13)), at(13))
	if n := tr.grantedAfter([]string{"c"}, kill); n != 1 {
		t.Errorf("grantedAfter = %d after c1's grant, want 1", n)
	}
	if l := tr.lossesSince(0); len(l) != 1 || l[0].claim != "b0" {
		t.Errorf("losses = %v, want b0's only", l)
	}
}

func TestCountExpired(t *testing.T) {
	exp := func(name string, phase locksv1alpha1.ClaimPhase, s float64) locksv1alpha1.LockClaim {
		c := claim(name, "l", "", phase, 1, "", time.Time{})
		e := metav1.NewMicroTime(at(s))
		c.Status.ExpireTime = &e
		return *c
	}
	claims := []locksv1alpha1.LockClaim{
		exp("fresh", locksv1alpha1.ClaimHeld, 20),
		exp("late", locksv1alpha1.ClaimHeld, 8),
		exp("later", locksv1alpha1.ClaimHeld, 5),
		exp("released long ago", locksv1alpha1.ClaimReleased, 1),
	}
	held, expired, worst, late := countExpired(claims, at(10))
	if held != 3 || expired != 2 || worst == nil || worst.Name != "later" || late != 5*time.Second {
		t.Errorf("countExpired = %d held, %d expired, worst %v by %s; want 3, 2, later by 5s", held, expired, worst, late)
	}
	if d := describe(worst); !strings.Contains(d, "claim later of lock") {
		t.Errorf("describe = %q, want the claim and its lock named", d)
	}
}

func TestTrackerWaitersSkipRetiredAndFinal(t *testing.T) {
	tr := newTracker(1, 3, 0)
	tr.observe(claim("h", "l", "", locksv1alpha1.ClaimHeld, 1, "", at(0)), at(0))
	tr.observe(claim("w1", "l", "", locksv1alpha1.ClaimPending, 0, "Queued", time.Time{}), at(0))
	tr.observe(claim("w2", "l", "", locksv1alpha1.ClaimPending, 0, "Queued", time.Time{}), at(0))
	tr.retire("w1", at(1))
	if !tr.hasWaiters("l") {
		t.Error("w2 still waits")
	}
	tr.observe(claim("w2", "l", "", locksv1alpha1.ClaimTimedOut, 0, "WaitTimedOut", time.Time{}), at(2))
	if tr.hasWaiters("l") {
		t.Error("w1 was ended by the harness and w2 timed out: nobody waits")
	}
	tr.observeDelete("w1", at(3))
	tr.observeDelete("w2", at(3))
	if tr.hasWaiters("l") || tr.locks["l"].pending != 0 {
		t.Errorf("pending = %d after the deletes, want 0", tr.locks["l"].pending)
	}
}

func TestTrackerExpiredCandidates(t *testing.T) {
	tr := newTracker(3, 3, 0)
	held := func(name string, token int64, expire float64) *locksv1alpha1.LockClaim {
		c := claim(name, name, "", locksv1alpha1.ClaimHeld, token, "", at(0))
		e := metav1.NewMicroTime(at(expire))
		c.Status.ExpireTime = &e
		return c
	}
	tr.observe(held("fresh", 1, 20), at(1))
	tr.observe(held("stale", 2, 8), at(1))
	tr.observe(held("renewed", 3, 8), at(1))
	tr.observe(held("renewed", 3, 18), at(9))
	if got := tr.expiredCandidates(at(10)); len(got) != 1 || got[0] != "stale" {
		t.Errorf("expiredCandidates = %v, want [stale]", got)
	}
	tr.observe(claim("stale", "stale", "", locksv1alpha1.ClaimLost, 2, locksv1alpha1.ReasonRenewFailed, time.Time{}), at(11))
	if got := tr.expiredCandidates(at(12)); len(got) != 0 {
		t.Errorf("expiredCandidates = %v after the claim was Lost, want none: only Held claims count", got)
	}
}
