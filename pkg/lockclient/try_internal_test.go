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

package lockclient

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TryAcquire decides on the controller's answer, read from the claim's status; anything but a
// clear "taken" is no answer yet.
func TestIsBusy(t *testing.T) {
	claim := func(phase locksv1alpha1.ClaimPhase, status metav1.ConditionStatus, reason string, position int32) *locksv1alpha1.LockClaim {
		c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"},
			Status: locksv1alpha1.LockClaimStatus{Phase: phase, QueuePosition: position}}
		if reason != "" {
			c.Status.Conditions = []metav1.Condition{{Type: locksv1alpha1.ConditionAcquired, Status: status, Reason: reason}}
		}
		return c
	}
	exclusive := func(c *locksv1alpha1.LockClaim) *locksv1alpha1.LockClaim {
		c.Spec.Mode = locksv1alpha1.LockModeExclusive
		return c
	}
	// lock has places places and one holder per mode in holders, named "h0", "h1", ...
	lock := func(places int32, holders ...locksv1alpha1.LockMode) *locksv1alpha1.DistributedLock {
		l := &locksv1alpha1.DistributedLock{Spec: locksv1alpha1.DistributedLockSpec{MaxHolders: places}}
		for i, m := range holders {
			l.Status.Holders = append(l.Status.Holders, locksv1alpha1.LockHolder{Claim: fmt.Sprintf("h%d", i), Mode: m})
		}
		return l
	}
	named := func(l *locksv1alpha1.DistributedLock, i int, claim string) *locksv1alpha1.DistributedLock {
		l.Status.Holders[i].Claim = claim
		return l
	}
	shared, excl := locksv1alpha1.LockModeShared, locksv1alpha1.LockModeExclusive
	pending, f := locksv1alpha1.ClaimPending, metav1.ConditionFalse
	first := func() *locksv1alpha1.LockClaim { return claim(pending, f, locksv1alpha1.ReasonQueued, 1) }
	cases := []struct {
		name       string
		claim      *locksv1alpha1.LockClaim
		lock       *locksv1alpha1.DistributedLock
		busy       bool
		needHolder bool
	}{
		{name: "no status yet", claim: claim("", "", "", 0)},
		{name: "pending without conditions", claim: claim(pending, "", "", 0)},
		{name: "queued behind another waiter", claim: claim(pending, f, locksv1alpha1.ReasonQueued, 2), lock: lock(1, excl), busy: true, needHolder: true},
		{name: "queued first behind the holder", claim: first(), lock: lock(1, excl), busy: true, needHolder: true},
		{name: "first in line, lock free: the grant comes next", claim: first(), lock: lock(1), needHolder: true},
		{name: "first in line, the lock names this claim", claim: first(), lock: named(lock(1, excl), 0, "mine"), needHolder: true},
		{name: "first in line, a holder recorded before modes", claim: first(), lock: named(lock(3, ""), 0, "old"), busy: true, needHolder: true},
		{name: "semaphore: every place taken", claim: first(), lock: lock(2, shared, shared), busy: true, needHolder: true},
		{name: "semaphore: a place free, the grant comes next", claim: first(), lock: lock(3, shared, shared), needHolder: true},
		{name: "semaphore: the lock names this claim among others", claim: first(), lock: named(lock(2, shared, shared), 1, "mine"), needHolder: true},
		{name: "semaphore: lowered below its holders", claim: first(), lock: lock(1, shared, shared), busy: true, needHolder: true},
		{name: "read/write: a writer holds", claim: first(), lock: lock(5, excl), busy: true, needHolder: true},
		{name: "read/write: a writer waits for readers", claim: exclusive(first()), lock: lock(5, shared), busy: true, needHolder: true},
		{name: "read/write: a writer, the lock free", claim: exclusive(first()), lock: lock(5), needHolder: true},
		{name: "contended by a client outside lockwarden", claim: claim(pending, f, locksv1alpha1.ReasonContended, 1), busy: true},
		{name: "backend unavailable: waited out", claim: claim(pending, f, locksv1alpha1.ReasonBackendUnavailable, 1)},
		{name: "pod not found yet", claim: claim(pending, f, locksv1alpha1.ReasonPodNotFound, 1)},
		{name: "held", claim: claim(locksv1alpha1.ClaimHeld, metav1.ConditionTrue, locksv1alpha1.ReasonAcquired, 0)},
		{name: "timed out", claim: claim(locksv1alpha1.ClaimTimedOut, f, locksv1alpha1.ReasonWaitTimedOut, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := needsLockHolder(tc.claim); got != tc.needHolder {
				t.Errorf("needsLockHolder = %v, want %v", got, tc.needHolder)
			}
			if got := isBusy(tc.claim, tc.lock); got != tc.busy {
				t.Errorf("isBusy = %v, want %v", got, tc.busy)
			}
		})
	}
}

// The busy error says who holds the lock, from its record, and how many claims are ahead.
func TestBusyDetail(t *testing.T) {
	queued := func(position int32) *locksv1alpha1.LockClaim {
		return &locksv1alpha1.LockClaim{Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimPending, QueuePosition: position,
			Conditions: []metav1.Condition{{Type: locksv1alpha1.ConditionAcquired, Status: metav1.ConditionFalse, Reason: locksv1alpha1.ReasonQueued, Message: "Waiting in the queue"}}}}
	}
	held := func(claims ...string) *locksv1alpha1.DistributedLock {
		l := &locksv1alpha1.DistributedLock{}
		for _, c := range claims {
			l.Status.Holders = append(l.Status.Holders, locksv1alpha1.LockHolder{Claim: c})
		}
		return l
	}
	contended := &locksv1alpha1.LockClaim{Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimPending, QueuePosition: 1,
		Conditions: []metav1.Condition{{Type: locksv1alpha1.ConditionAcquired, Status: metav1.ConditionFalse, Reason: locksv1alpha1.ReasonContended,
			Message: "Held by another client of the backend"}}}}
	for _, tc := range []struct {
		name  string
		claim *locksv1alpha1.LockClaim
		lock  *locksv1alpha1.DistributedLock
		want  string
	}{
		{"next, behind one holder", queued(1), held("web-0-db"), "held by claim web-0-db"},
		{"behind a holder and two claims", queued(3), held("web-0-db"), "held by claim web-0-db; 2 claim(s) ahead in the queue"},
		{"behind the places of a semaphore", queued(2), held("a", "b", "c"), "held by 3 claims; 1 claim(s) ahead in the queue"},
		{"behind claims of a free lock", queued(2), held(), "not held; 1 claim(s) ahead in the queue"},
		{"contended: the claim's own word", contended, nil, "Contended: Held by another client of the backend"},
	} {
		if got := busyDetail(tc.claim, tc.lock); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A waiter takes its grant from the lock record only when the record names its very claim.
func TestRecordedHold(t *testing.T) {
	acquired := metav1.NewMicroTime(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	expires := metav1.NewMicroTime(acquired.Add(30 * time.Second))
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0-db", UID: "claim-uid"},
		Spec: locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: "web-0"}}}
	record := func(holders ...locksv1alpha1.LockHolder) *locksv1alpha1.DistributedLock {
		return &locksv1alpha1.DistributedLock{Status: locksv1alpha1.DistributedLockStatus{Holders: holders}}
	}
	mine := locksv1alpha1.LockHolder{Claim: "web-0-db", ClaimUID: "claim-uid", Identity: "pod-uid", FencingToken: 42, AcquireTime: acquired, ExpireTime: &expires}
	other := mine
	other.ClaimUID = "earlier-claim-uid"
	for _, tc := range []struct {
		name string
		lock *locksv1alpha1.DistributedLock
		want *Result
	}{
		{"named by name and UID", record(mine), &Result{Namespace: "ns", Lock: "db", Claim: "web-0-db", uid: "claim-uid", Identity: "pod-uid",
			Mode: locksv1alpha1.LockModeShared, FencingToken: 42, Pod: "web-0", AcquireTime: acquired.Time, ExpireTime: expires.Time}},
		{"an earlier claim of the same name", record(other), nil},
		{"a record from before claim UIDs", record(locksv1alpha1.LockHolder{Claim: "web-0-db", FencingToken: 42}), nil},
		{"another holder", record(locksv1alpha1.LockHolder{Claim: "web-1-db", ClaimUID: "x"}), nil},
		{"free", record(), nil},
		{"no lock", nil, nil},
	} {
		got := recordedHold(claim, tc.lock)
		if (got == nil) != (tc.want == nil) || (got != nil && !reflect.DeepEqual(*got, *tc.want)) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
