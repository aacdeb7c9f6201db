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

package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

func TestPlaceInQueue(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	claim := func(name string, created time.Time, phase locksv1alpha1.ClaimPhase, identity string) locksv1alpha1.LockClaim {
		return locksv1alpha1.LockClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
			Status:     locksv1alpha1.LockClaimStatus{Phase: phase, HolderIdentity: identity},
		}
	}
	deleting := func(c locksv1alpha1.LockClaim) locksv1alpha1.LockClaim {
		c.DeletionTimestamp = &metav1.Time{Time: t0}
		return c
	}
	claims := []locksv1alpha1.LockClaim{
		claim("holder", t0, locksv1alpha1.ClaimHeld, "id-holder"),
		claim("late", t0.Add(2*time.Second), locksv1alpha1.ClaimPending, ""),
		claim("b", t0.Add(time.Second), "", ""), // not reconciled yet: still waits
		claim("a", t0.Add(time.Second), locksv1alpha1.ClaimPending, ""),
		claim("gone", t0, locksv1alpha1.ClaimTimedOut, ""),
		deleting(claim("leaving", t0, locksv1alpha1.ClaimPending, "")),
	}
	cases := []struct {
		self         string
		identity     string
		wantPosition int32
		wantHolder   string
	}{
		{"a", "id-a", 1, "holder"}, // same second as b: the name decides
		{"b", "id-b", 2, "holder"},
		{"late", "id-late", 3, "holder"},
		{"a", "id-holder", 1, ""}, // the holder's own identity is not in its way (reentrancy)
	}
	for _, c := range cases {
		var self *locksv1alpha1.LockClaim
		for i := range claims {
			if claims[i].Name == c.self {
				self = &claims[i]
			}
		}
		got := placeInQueue(claims, self, c.identity)
		holder := ""
		if got.holder != nil {
			holder = got.holder.Name
		}
		if got.position != c.wantPosition || holder != c.wantHolder || got.waiting != 3 {
			t.Errorf("placeInQueue(%s, %s) = position %d, holder %q, waiting %d; want %d, %q, 3",
				c.self, c.identity, got.position, holder, got.waiting, c.wantPosition, c.wantHolder)
		}
	}
	if n := countWaiting(claims); n != 3 {
		t.Errorf("countWaiting = %d, want 3", n)
	}
}

func TestMarkEndedRecordsReleaseTimeOnlyForHolds(t *testing.T) {
	now := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	held := &locksv1alpha1.LockClaim{Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimHeld}}
	markEnded(held, locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonClaimDeleted, "bye", now)
	if held.Status.ReleaseTime == nil || !held.Status.ReleaseTime.Time.Equal(now) {
		t.Errorf("a released hold needs releaseTime, got %v", held.Status.ReleaseTime)
	}
	waiting := &locksv1alpha1.LockClaim{Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimPending, QueuePosition: 4}}
	markEnded(waiting, locksv1alpha1.ClaimTimedOut, locksv1alpha1.ReasonWaitTimedOut, "gave up", now)
	if waiting.Status.ReleaseTime != nil || waiting.Status.QueuePosition != 0 {
		t.Errorf("a claim that never held has no releaseTime and no queue position, got %+v", waiting.Status)
	}
	for _, cond := range waiting.Status.Conditions {
		if cond.Status != metav1.ConditionFalse || cond.Reason != locksv1alpha1.ReasonWaitTimedOut {
			t.Errorf("condition %s = %s/%s, want False/WaitTimedOut", cond.Type, cond.Status, cond.Reason)
		}
	}
}
