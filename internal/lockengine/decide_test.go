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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/podliveness"
)

func TestHolderEnding(t *testing.T) {
	alive := podliveness.Verdict{Alive: true}
	dead := podliveness.Verdict{Reason: "pod p failed"}
	succeeded := podliveness.Verdict{Reason: "pod p succeeded", Completed: true}
	cases := []struct {
		name       string
		facts      holderFacts
		wantPhase  locksv1alpha1.ClaimPhase
		wantReason string
		// wantDelay: the hold ends without a release, so lockDelaySeconds applies.
		wantDelay bool
	}{
		{"keeps holding", holderFacts{holder: alive}, "", "", false},
		{"claim deleted", holderFacts{deleting: true, holder: alive}, locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonClaimDeleted, false},
		{"pod died", holderFacts{holder: dead}, locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonHolderTerminated, true},
		{"pod ran to completion", holderFacts{holder: succeeded}, locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonHolderTerminated, false},
		{"lock deleted wins over the rest", holderFacts{lockDeleting: true, deleting: true, holder: dead}, locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound, false},
		{"a dead holder ends ungracefully even when its claim was deleted in the same instant", holderFacts{deleting: true, holder: dead},
			locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonHolderTerminated, true},
		{"a completed holder whose claim was deleted: no delay", holderFacts{deleting: true, holder: succeeded},
			locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonHolderTerminated, false},
		{"a claim its pod's foreground deletion removes holds while the pod terminates", holderFacts{deleting: true, deletedWithHolder: true, holder: alive}, "", "", false},
		{"the foreground-deleted pod gone: ungraceful end", holderFacts{deleting: true, deletedWithHolder: true, holder: dead},
			locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonHolderTerminated, true},
	}
	for _, c := range cases {
		got := holderEnding(c.facts)
		switch {
		case c.wantPhase == "" && got != nil:
			t.Errorf("%s: ends with %+v, want no ending", c.name, *got)
		case c.wantPhase != "" && (got == nil || got.phase != c.wantPhase || got.reason != c.wantReason || got.unreleased != c.wantDelay):
			t.Errorf("%s: got %+v, want %s/%s unreleased=%v", c.name, got, c.wantPhase, c.wantReason, c.wantDelay)
		}
	}
	if lost := lostEnding("gone"); !lost.unreleased {
		t.Errorf("a lost hold must start the lock delay: %+v", lost)
	}
}

func TestLockDelay(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	cases := []struct {
		name    string
		seconds int32
		current *time.Time
		want    *time.Time
	}{
		{"no delay configured", 0, nil, nil},
		{"starts a delay", 30, nil, at(30 * time.Second)},
		{"a later end moves it on", 30, at(10 * time.Second), at(30 * time.Second)},
		{"never shortens one under way (the delay was lowered since)", 5, at(20 * time.Second), at(20 * time.Second)},
		{"delay turned off keeps one under way", 0, at(20 * time.Second), at(20 * time.Second)},
	}
	for _, c := range cases {
		got := lockDelayEnd(c.seconds, c.current, now)
		if (got == nil) != (c.want == nil) || got != nil && !got.Equal(*c.want) {
			t.Errorf("%s: lockDelayEnd = %v, want %v", c.name, got, c.want)
		}
	}

	waits := []struct {
		name  string
		until *time.Time
		want  time.Duration
	}{
		{"none", nil, 0},
		{"ahead", at(12 * time.Second), 12 * time.Second},
		{"just over", at(0), 0},
		{"past", at(-time.Minute), 0},
	}
	for _, c := range waits {
		if got := grantDelay(c.until, now); got != c.want {
			t.Errorf("%s: grantDelay = %s, want %s", c.name, got, c.want)
		}
	}
	if got, want := lockDelayMessage(now.Add(30*time.Second), 30), "The last hold ended without a release; no grant before 2026-12-02T10:00:30Z (lockDelaySeconds=30)"; got != want {
		t.Errorf("lockDelayMessage = %q, want %q", got, want)
	}
}

func TestJudgeWaiter(t *testing.T) {
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	failed := running.DeepCopy()
	failed.Status.Phase = corev1.PodFailed
	cases := []struct {
		name        string
		facts       waiterFacts
		wantEnd     string // reason, "" for none
		wantMissing bool
	}{
		{"detached claim waits", waiterFacts{}, "", false},
		{"lock being deleted", waiterFacts{lockDeleting: true, lockName: "db"}, locksv1alpha1.ReasonLockNotFound, false},
		{"pod not created yet", waiterFacts{podName: "p"}, "", true},
		{"pod running", waiterFacts{podName: "p", pod: running}, "", false},
		{"pod failed before the grant", waiterFacts{podName: "p", pod: failed}, locksv1alpha1.ReasonHolderTerminated, false},
		{"pod seen once, now gone", waiterFacts{podName: "p", podUID: "uid-1"}, locksv1alpha1.ReasonHolderTerminated, false},
		{"pod replaced", waiterFacts{podName: "p", pod: running, podUID: types.UID("uid-0")}, locksv1alpha1.ReasonHolderTerminated, false},
	}
	for _, c := range cases {
		got := judgeWaiter(c.facts)
		reason := ""
		if got.end != nil {
			reason = got.end.reason
		}
		missing := got.missing != nil
		if reason != c.wantEnd || missing != c.wantMissing {
			t.Errorf("%s: end %q, missing %v; want %q, %v", c.name, reason, missing, c.wantEnd, c.wantMissing)
		}
		if missing && got.missing.reason != locksv1alpha1.ReasonPodNotFound {
			t.Errorf("%s: missing reason %q, want %s", c.name, got.missing.reason, locksv1alpha1.ReasonPodNotFound)
		}
	}
}

func TestJudgeMissingHolder(t *testing.T) {
	created := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	m := missingHolder{reason: locksv1alpha1.ReasonPodNotFound, what: "Pod web-0 does not exist in namespace team", created: created}
	cases := []struct {
		name     string
		now      time.Time
		wantEnd  bool
		wantWait time.Duration
		wantMsg  string
	}{
		{"just created: waits aside until the limit", created, false, holderMissingLimit,
			"Pod web-0 does not exist in namespace team; the claim waits aside for it, behind no one and blocking no one, and fails at 2026-12-04T10:02:00Z if it is still missing"},
		{"a second before the limit: still waits", created.Add(holderMissingLimit - time.Second), false, time.Second, ""},
		{"at the limit: fails", created.Add(holderMissingLimit), true, 0, ""},
		{"long after: fails", created.Add(time.Hour), true, 0, ""},
	}
	for _, c := range cases {
		end, msg, wait := judgeMissingHolder(m, c.now)
		if (end != nil) != c.wantEnd || wait != c.wantWait {
			t.Errorf("%s: end %v, wait %s; want end %v, wait %s", c.name, end, wait, c.wantEnd, c.wantWait)
		}
		if c.wantMsg != "" && msg != c.wantMsg {
			t.Errorf("%s: message %q, want %q", c.name, msg, c.wantMsg)
		}
		if end != nil && (end.phase != locksv1alpha1.ClaimFailed || end.reason != m.reason || end.unreleased) {
			t.Errorf("%s: ending %+v, want Failed with reason %s", c.name, end, m.reason)
		}
	}
}

func TestLowPriority(t *testing.T) {
	status := func(phase locksv1alpha1.ClaimPhase, reason string, position int32) *locksv1alpha1.LockClaimStatus {
		st := &locksv1alpha1.LockClaimStatus{Phase: phase, QueuePosition: position}
		if reason != "" {
			st.Conditions = []metav1.Condition{{Type: locksv1alpha1.ConditionAcquired, Reason: reason}}
		}
		return st
	}
	cases := []struct {
		name          string
		before, after *locksv1alpha1.LockClaimStatus
		want          bool
	}{
		{"a queued claim moves up", status("Pending", "Queued", 3), status("Pending", "Queued", 2), true},
		{"queued, then contended at the head: news", status("Pending", "Queued", 2), status("Pending", "Contended", 1), false},
		{"contended, with another word on the outside holder", status("Pending", "Contended", 1), status("Pending", "Contended", 1), true},
		{"a new claim's first status", status("", "", 0), status("Pending", "Queued", 4), false},
		{"the backend came back", status("Pending", "BackendUnavailable", 0), status("Pending", "Queued", 1), false},
		{"granted", status("Pending", "Queued", 1), status("Held", "Acquired", 0), false},
		{"timed out", status("Pending", "Queued", 1), status("TimedOut", "WaitTimedOut", 0), false},
	}
	for _, c := range cases {
		if got := lowPriority(c.before, c.after); got != c.want {
			t.Errorf("%s: lowPriority = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestShownPosition(t *testing.T) {
	cases := []struct {
		name         string
		written, now int32
		want         int32
	}{
		{"first place in the queue", 0, 5, 5},
		{"moved up within its band (4-7): unchanged", 7, 4, 7},
		{"moved up into the next band", 4, 3, 3},
		{"became the head", 2, 1, 1},
		{"the head stays the head", 1, 1, 1},
		{"within 2-3", 3, 2, 3},
		{"within 64-127", 120, 64, 120},
		{"out of the queue", 3, 0, 0},
	}
	for _, c := range cases {
		if got := shownPosition(c.written, c.now); got != c.want {
			t.Errorf("%s: shownPosition(%d, %d) = %d, want %d", c.name, c.written, c.now, got, c.want)
		}
	}
}

func TestLowPriorityDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		dirty     time.Time
		wantWrite bool
		wantWait  time.Duration
	}{
		{"first held back", time.Time{}, false, positionsDelay},
		{"held back a moment ago", now.Add(-500 * time.Millisecond), false, positionsDelay - 500*time.Millisecond},
		{"due", now.Add(-positionsDelay), true, 0},
		{"overdue", now.Add(-time.Hour), true, 0},
	}
	for _, c := range cases {
		write, wait := lowPriorityDue(c.dirty, now, positionsDelay)
		if write != c.wantWrite || wait != c.wantWait {
			t.Errorf("%s: (%v, %s), want (%v, %s)", c.name, write, wait, c.wantWrite, c.wantWait)
		}
	}
}

func TestRefreshDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	ttl := 30 * time.Second
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	cases := []struct {
		name   string
		expire *time.Time
		want   bool
	}{
		{"never written", nil, true},
		{"fresh", at(ttl), false},
		{"two thirds left", at(2 * ttl / 3), false},
		{"a sixth left: the renewal due now may not have landed", at(ttl / 6), false},
		{"an eighth left", at(ttl / 8), true},
		{"passed", at(-time.Second), true},
	}
	for _, c := range cases {
		if got := refreshDue(c.expire, ttl, now); got != c.want {
			t.Errorf("%s: refreshDue = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRefreshWait(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	const ttl = 30 * time.Second
	cases := []struct {
		name   string
		expire time.Time
		ttl    time.Duration
		want   time.Duration
	}{
		{"just written: the lease less the margin", now.Add(ttl), ttl, ttl - ttl/8},
		{"a moment before it falls due", now.Add(ttl/8 + time.Millisecond), ttl, time.Millisecond},
		{"due and not moved: a twenty-fourth of the lease", now.Add(ttl / 8), ttl, ttl / 24},
		{"passed and not moved", now.Add(-time.Second), ttl, ttl / 24},
		{"a tiny lease: no busy loop", now, time.Second, 100 * time.Millisecond},
	}
	for _, c := range cases {
		got := refreshWait(c.expire, c.ttl, now)
		if got != c.want {
			t.Errorf("%s: refreshWait = %s, want %s", c.name, got, c.want)
		}
	}
	// The pass woken when the wait ends finds the refresh due.
	expire := now.Add(ttl)
	woken := now.Add(refreshWait(expire, ttl, now))
	if !refreshDue(&expire, ttl, woken) {
		t.Errorf("the pass woken after refreshWait must find the refresh due")
	}
}

func TestAppearPriority(t *testing.T) {
	free := &locksv1alpha1.DistributedLock{}
	held := &locksv1alpha1.DistributedLock{Status: locksv1alpha1.DistributedLockStatus{Holders: []locksv1alpha1.LockHolder{{Claim: "c"}}}}
	if p := appearPriority(free); p != nil {
		t.Errorf("a free lock: priority %d, want the default", *p)
	}
	if p := appearPriority(held); p == nil || *p != resumePriority {
		t.Errorf("a held lock: priority %v, want %d", p, resumePriority)
	}
	if p := appearPriority(nil); p != nil {
		t.Errorf("nil: priority %d, want the default", *p)
	}
}

func TestInQueueOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	type spec struct {
		name     string
		priority int32
		rv       string    // resourceVersion as read
		arrival  int64     // status.arrival
		phase    string    // status.phase ("" before the first status write)
		created  time.Time // creationTimestamp
	}
	claim := func(s spec) *locksv1alpha1.LockClaim {
		return &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: s.name, ResourceVersion: s.rv, CreationTimestamp: metav1.NewTime(s.created)},
			Spec:   locksv1alpha1.LockClaimSpec{Priority: s.priority},
			Status: locksv1alpha1.LockClaimStatus{Arrival: s.arrival, Phase: locksv1alpha1.ClaimPhase(s.phase)}}
	}
	for _, tc := range []struct {
		name   string
		claims []spec
		want   []string
	}{
		{"arrival, not the name, within one second (s6 came 30 ms after x0)", []spec{
			{name: "s6", arrival: 120, phase: "Pending", created: t0}, {name: "x0", arrival: 110, phase: "Pending", created: t0},
		}, []string{"x0", "s6"}},
		{"a claim not yet written is placed by the resourceVersion it has", []spec{
			{name: "new", rv: "130", created: t0}, {name: "older", arrival: 125, phase: "Pending", created: t0.Add(time.Second)},
			{name: "newest", rv: "140", created: t0},
		}, []string{"older", "new", "newest"}},
		{"a higher priority goes first, whenever it came; a negative one last", []spec{
			{name: "a", arrival: 100, phase: "Pending"}, {name: "low", priority: -1, arrival: 90, phase: "Pending"},
			{name: "hotfix", priority: 10, rv: "900"}, {name: "b", arrival: 200, phase: "Pending"},
		}, []string{"hotfix", "a", "b", "low"}},
		{"claims an earlier version wrote come first among their priority, by creation time then name", []spec{
			{name: "stamped", arrival: 5, phase: "Pending", created: t0.Add(-time.Hour)},
			{name: "old-b", phase: "Pending", rv: "7000", created: t0}, {name: "old-a", phase: "Pending", rv: "9000", created: t0},
			{name: "old-first", phase: "Pending", rv: "9500", created: t0.Add(-time.Second)},
			{name: "urgent", priority: 1, arrival: 8000, phase: "Pending"},
		}, []string{"urgent", "old-first", "old-a", "old-b", "stamped"}},
		{"equal arrivals (a fake client's): the name decides", []spec{
			{name: "b", rv: "x"}, {name: "a", rv: "x"},
		}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var claims []*locksv1alpha1.LockClaim
			for _, s := range tc.claims {
				claims = append(claims, claim(s))
			}
			var names []string
			for _, c := range inQueueOrder(claims) {
				names = append(names, c.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("inQueueOrder = %v, want %v", names, tc.want)
			}
		})
	}
}

// A claim's arrival is recorded at its first status write, from the resourceVersion it was read
// at, and never again: not on a claim that has one, nor on one an earlier version wrote.
func TestStampArrival(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rv      string
		arrival int64
		phase   locksv1alpha1.ClaimPhase
		want    int64
	}{
		{"first write", "420", 0, "", 420},
		{"already recorded", "999", 420, locksv1alpha1.ClaimPending, 420},
		{"recorded by a write that set no phase (a holder pod's UID)", "999", 420, "", 420},
		{"written by an earlier version", "999", 0, locksv1alpha1.ClaimPending, 0},
		{"no number to record", "", 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{ResourceVersion: tc.rv},
				Status: locksv1alpha1.LockClaimStatus{Arrival: tc.arrival, Phase: tc.phase}}
			c := before.DeepCopy()
			markWaiting(c, 1, true, locksv1alpha1.ReasonQueued, "queued")
			stampArrival(before, c)
			if c.Status.Arrival != tc.want {
				t.Fatalf("arrival %d, want %d", c.Status.Arrival, tc.want)
			}
		})
	}
}

func TestSharesRecord(t *testing.T) {
	rec := &locksv1alpha1.LockHolder{Claim: "a", Identity: "id-a", FencingToken: 9}
	claim := func(name string, phase locksv1alpha1.ClaimPhase, identity string, token int64) *locksv1alpha1.LockClaim {
		return &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: locksv1alpha1.LockClaimStatus{Phase: phase, HolderIdentity: identity, FencingToken: token}}
	}
	cases := []struct {
		name  string
		rec   *locksv1alpha1.LockHolder
		claim *locksv1alpha1.LockClaim
		want  bool
	}{
		{"the recorded claim, held", rec, claim("a", "Held", "id-a", 9), true},
		{"the recorded claim, its grant's status not written yet", rec, claim("a", "Pending", "", 0), true},
		{"a reentrant claim of the same identity", rec, claim("b", "Held", "id-a", 9), true},
		{"held under an older token", rec, claim("b", "Held", "id-a", 8), false},
		{"held by another identity", rec, claim("c", "Held", "id-c", 9), false},
		{"the recorded claim, already ended", rec, claim("a", "Released", "id-a", 9), false},
		{"no record", nil, claim("a", "Held", "id-a", 9), false},
	}
	for _, c := range cases {
		if got := sharesRecord(c.rec, c.claim); got != c.want {
			t.Errorf("%s: sharesRecord = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTransitionEvent(t *testing.T) {
	status := func(phase locksv1alpha1.ClaimPhase, reason string) *locksv1alpha1.LockClaimStatus {
		return &locksv1alpha1.LockClaimStatus{Phase: phase, Conditions: []metav1.Condition{{Type: locksv1alpha1.ConditionAcquired, Reason: reason}}}
	}
	cases := []struct {
		st       *locksv1alpha1.LockClaimStatus
		wantType string
		wantOK   bool
	}{
		{status("Held", "Acquired"), corev1.EventTypeNormal, true},
		{status("Released", "ClaimDeleted"), corev1.EventTypeNormal, true},
		{status("Lost", "RenewFailed"), corev1.EventTypeWarning, true},
		{status("Pending", "Queued"), "", false},
		{status("Pending", "Contended"), "", false},
		{status("Pending", "LockNotFound"), corev1.EventTypeWarning, true},
	}
	for _, c := range cases {
		eventType, reason, _, ok := transitionEvent(c.st)
		if ok != c.wantOK || eventType != c.wantType || (ok && reason != c.st.Conditions[0].Reason) {
			t.Errorf("%s/%s: event (%q, %q, %v), want (%q, reason = condition reason, %v)",
				c.st.Phase, c.st.Conditions[0].Reason, eventType, reason, ok, c.wantType, c.wantOK)
		}
	}
}

func TestUnusableReason(t *testing.T) {
	cases := map[string]string{
		locksv1alpha1.ReasonBackendNotFound:     locksv1alpha1.ReasonBackendNotFound,
		locksv1alpha1.ReasonNamespaceNotAllowed: locksv1alpha1.ReasonNamespaceNotAllowed,
		locksv1alpha1.ReasonBackendUnreachable:  locksv1alpha1.ReasonBackendUnavailable,
		locksv1alpha1.ReasonSecretNotFound:      locksv1alpha1.ReasonBackendUnavailable,
	}
	for in, want := range cases {
		if got := unusableReason(&registry.UnusableError{Reason: in}); got != want {
			t.Errorf("unusableReason(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestBridgeTimings(t *testing.T) {
	shorter := map[string]struct{ a, b, want time.Duration }{
		"first lease":   {0, 10 * time.Second, 10 * time.Second},
		"shorter lease": {10 * time.Second, 5 * time.Second, 5 * time.Second},
		"longer lease":  {5 * time.Second, 30 * time.Second, 5 * time.Second},
		"no lease":      {5 * time.Second, 0, 5 * time.Second},
	}
	for name, tc := range shorter {
		if got := shorterTTL(tc.a, tc.b); got != tc.want {
			t.Errorf("shorterTTL, %s: got %s, want %s", name, got, tc.want)
		}
	}
	interval := map[string]struct {
		ttl    time.Duration
		failed bool
		want   time.Duration
	}{
		"a sixth of the lease":       {30 * time.Second, false, 5 * time.Second},
		"at least a second":          {5 * time.Second, false, time.Second},
		"a second after a failure":   {30 * time.Second, true, time.Second},
		"no lease known: one second": {0, false, time.Second},
	}
	for name, tc := range interval {
		if got := bridgeInterval(tc.ttl, tc.failed); got != tc.want {
			t.Errorf("bridgeInterval, %s: got %s, want %s", name, got, tc.want)
		}
	}
}

func TestHoldExpiryAndJudgeExpiry(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(now.Add(d)); return &m }
	claim := func(expire *metav1.MicroTime) *locksv1alpha1.LockClaim {
		return &locksv1alpha1.LockClaim{Status: locksv1alpha1.LockClaimStatus{ExpireTime: expire}}
	}
	cases := []struct {
		name   string
		rec    *metav1.MicroTime
		claims []*locksv1alpha1.LockClaim
		want   expiry
	}{
		{"no expiry ever written", nil, []*locksv1alpha1.LockClaim{claim(nil)}, expiryUnknown},
		{"the record's expiry passed", at(-time.Second), nil, expiryPassed},
		{"exactly now counts as passed", at(0), nil, expiryPassed},
		{"the record's expiry ahead", at(time.Second), nil, expiryAhead},
		{"a claim was told a later expiry than the record's", at(-time.Second), []*locksv1alpha1.LockClaim{claim(at(3 * time.Second))}, expiryAhead},
		{"a claim's earlier expiry does not shorten the record's", at(3 * time.Second), []*locksv1alpha1.LockClaim{claim(at(-time.Second))}, expiryAhead},
		{"only a claim's expiry is known", nil, []*locksv1alpha1.LockClaim{claim(at(-time.Second))}, expiryPassed},
	}
	for _, c := range cases {
		got := judgeExpiry(holdExpiry(&locksv1alpha1.LockHolder{ExpireTime: c.rec}, c.claims), now)
		if got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestContention(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	until := func(d time.Duration) *backends.LockedError {
		return &backends.LockedError{Key: "k", Holder: "someone", ExpireTime: now.Add(d)}
	}
	cases := []struct {
		name      string
		locked    *backends.LockedError
		watched   bool
		wantMsg   string
		wantRetry time.Duration
	}{
		{"no expiry known, no watch: the retry cap", nil, false, "The key is held on the backend by another client", maxRetryDelay},
		{"no expiry known, a free watch: the fallback only", &backends.LockedError{Key: "k"}, true, "The key is held on the backend by another client", freeWatchFallback},
		{"an expiry: look again then", until(3 * time.Second), true, "The key is held on the backend by another client", 3 * time.Second},
		{"an expiry past or at hand: at least 100 ms on", until(-time.Second), false, "The key is held on the backend by another client", 100 * time.Millisecond},
	}
	for _, c := range cases {
		msg, retry := contention(c.locked, c.watched, now)
		if msg != c.wantMsg || retry != c.wantRetry {
			t.Errorf("%s: %q, %s; want %q, %s", c.name, msg, retry, c.wantMsg, c.wantRetry)
		}
		if strings.Contains(msg, "someone") {
			t.Errorf("%s: the message names the key's holder: %q", c.name, msg)
		}
	}
}

func TestHolderRecord(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	lease := backends.Lease{Identity: "lockwarden/lock-uid/id", ExpireTime: now.Add(30 * time.Second)}
	for _, c := range []struct {
		mode grantMode
		want locksv1alpha1.LockMode
	}{{grantExclusive, locksv1alpha1.LockModeExclusive}, {grantShared, locksv1alpha1.LockModeShared}} {
		claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "claim-uid"}}
		holder := &locksv1alpha1.RecordedHolder{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "pod-uid"}
		rec := holderRecord(claim, holder, "id", lease, c.mode, now)
		if rec.Claim != "a" || rec.ClaimUID != "claim-uid" || rec.Holder != holder || rec.Identity != "id" || rec.BackendIdentity != lease.Identity || rec.Mode != c.want ||
			!rec.AcquireTime.Time.Equal(now) || !rec.ExpireTime.Time.Equal(lease.ExpireTime) || rec.FencingToken != 0 {
			t.Errorf("mode %v: %+v", c.mode, rec)
		}
	}
}

func TestWaitingStatus(t *testing.T) {
	until := metav1.NewMicroTime(time.Date(2026, 12, 4, 10, 0, 30, 0, time.UTC))
	held := []locksv1alpha1.LockHolder{{Claim: "a"}}
	unusable := &registry.UnusableError{Reason: locksv1alpha1.ReasonBackendUnreachable, Message: "LockBackend redis is not ready: down"}
	conflict := &registry.UnusableError{Reason: locksv1alpha1.ReasonKeyConflict, Message: "Another DistributedLock ..."}
	cases := []struct {
		name  string
		place waiterPlace
		want  waiting
	}{
		{"queued behind a holder", waiterPlace{position: 2, holders: held},
			waiting{2, true, locksv1alpha1.ReasonQueued, "Waiting in the queue while the lock is held (the DistributedLock's status.holders names the holders); status.queuePosition is the place, in bands"}},
		{"head of a free lock", waiterPlace{position: 1},
			waiting{1, true, locksv1alpha1.ReasonQueued, "Waiting in the queue for the claims ahead to be served; status.queuePosition is the place, in bands"}},
		{"an unusable backend comes first, as an outage", waiterPlace{position: 1, unusable: unusable, conflict: conflict},
			waiting{0, false, locksv1alpha1.ReasonBackendUnavailable, unusable.Message}},
		{"a key conflict keeps its reason", waiterPlace{position: 3, conflict: conflict},
			waiting{0, false, locksv1alpha1.ReasonKeyConflict, conflict.Message}},
		{"the head of a free lock waits out the lock delay", waiterPlace{position: 1, delayed: true, delayUntil: &until, delaySeconds: 30},
			waiting{1, true, locksv1alpha1.ReasonLockDelay, "The last hold ended without a release; no grant before 2026-12-04T10:00:30Z (lockDelaySeconds=30)"}},
		{"behind the head, a delay is just a queue", waiterPlace{position: 2, delayed: true, delayUntil: &until, delaySeconds: 30},
			waiting{2, true, locksv1alpha1.ReasonQueued, "Waiting in the queue for the claims ahead to be served; status.queuePosition is the place, in bands"}},
	}
	for _, c := range cases {
		if got := waitingStatus(c.place); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestClassifyWrite(t *testing.T) {
	claim := func(phase locksv1alpha1.ClaimPhase, reason string, position int32) *locksv1alpha1.LockClaim {
		c := &locksv1alpha1.LockClaim{Status: locksv1alpha1.LockClaimStatus{Phase: phase, QueuePosition: position}}
		if reason != "" {
			c.Status.Conditions = []metav1.Condition{{Type: locksv1alpha1.ConditionAcquired, Reason: reason}}
		}
		return c
	}
	deleting := func(c *locksv1alpha1.LockClaim) *locksv1alpha1.LockClaim {
		now := metav1.Now()
		c.DeletionTimestamp = &now
		return c
	}
	queued := claim(locksv1alpha1.ClaimPending, locksv1alpha1.ReasonQueued, 2)
	held := claim(locksv1alpha1.ClaimHeld, locksv1alpha1.ReasonAcquired, 0)
	released := claim(locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonClaimDeleted, 0)
	cases := []struct {
		name          string
		before, after *locksv1alpha1.LockClaim
		want          writeClass
	}{
		{"unchanged", queued, queued, writeNothing},
		{"granted", queued, held, writeGranted},
		{"a hold ended", held, released, writeEnded},
		{"a waiter moved up", queued, claim(locksv1alpha1.ClaimPending, locksv1alpha1.ReasonQueued, 1), writeLow},
		{"a new claim's first status", claim("", "", 0), queued, writeRest},
		{"a waiter became contended: news, written at once", queued, claim(locksv1alpha1.ClaimPending, locksv1alpha1.ReasonContended, 1), writeRest},
		{"a waiter's backend failed", queued, claim(locksv1alpha1.ClaimPending, locksv1alpha1.ReasonBackendUnavailable, 0), writeRest},
		{"a deleted claim that holds nothing", queued, deleting(released.DeepCopy()), writeGone},
		{"a deleted claim that still holds is written as any other", held, deleting(held.DeepCopy()), writeNothing},
	}
	for _, c := range cases {
		if got := classifyWrite(c.before, c.after); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestOverQueue(t *testing.T) {
	waiting := func(name string) *queued {
		return &queued{claim: &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimPending}}}
	}
	fresh := func(name string) *queued {
		return &queued{claim: &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	}
	names := func(qs []*queued) string {
		var out []string
		for _, q := range qs {
			out = append(out, q.claim.Name)
		}
		return strings.Join(out, ",")
	}
	for name, c := range map[string]struct {
		queue        []*queued
		max          *int32
		wait, refuse string
	}{
		"no limit":                               {[]*queued{waiting("a"), fresh("b"), fresh("c")}, nil, "a,b,c", ""},
		"room for all":                           {[]*queued{waiting("a"), fresh("b")}, ptr.To[int32](2), "a,b", ""},
		"newcomers beyond the limit":             {[]*queued{waiting("a"), fresh("b"), fresh("c")}, ptr.To[int32](2), "a,b", "c"},
		"a lowered limit keeps those waiting":    {[]*queued{waiting("a"), waiting("b"), waiting("c"), fresh("d")}, ptr.To[int32](1), "a,b,c", "d"},
		"a newcomer sorted ahead of one waiting": {[]*queued{fresh("a"), waiting("b")}, ptr.To[int32](1), "b", "a"},
		"every newcomer of a full queue":         {[]*queued{fresh("a"), fresh("b"), fresh("c")}, ptr.To[int32](1), "a", "b,c"},
	} {
		w, r := overQueue(c.queue, c.max)
		if names(w) != c.wait || names(r) != c.refuse {
			t.Errorf("%s: waiting %q refused %q, want %q and %q", name, names(w), names(r), c.wait, c.refuse)
		}
	}
}
