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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

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
