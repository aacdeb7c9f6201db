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
	"testing"

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
	pending, f := locksv1alpha1.ClaimPending, metav1.ConditionFalse
	cases := []struct {
		name       string
		claim      *locksv1alpha1.LockClaim
		holder     string
		busy       bool
		needHolder bool
	}{
		{name: "no status yet", claim: claim("", "", "", 0)},
		{name: "pending without conditions", claim: claim(pending, "", "", 0)},
		{name: "queued behind another waiter", claim: claim(pending, f, locksv1alpha1.ReasonQueued, 2), busy: true},
		{name: "queued first behind the holder", claim: claim(pending, f, locksv1alpha1.ReasonQueued, 1), holder: "theirs", busy: true, needHolder: true},
		{name: "first in line, lock free: the grant comes next", claim: claim(pending, f, locksv1alpha1.ReasonQueued, 1), needHolder: true},
		{name: "first in line, the lock names this claim", claim: claim(pending, f, locksv1alpha1.ReasonQueued, 1), holder: "mine", needHolder: true},
		{name: "contended by a client outside lockwarden", claim: claim(pending, f, locksv1alpha1.ReasonContended, 1), busy: true},
		{name: "backend unavailable: waited out", claim: claim(pending, f, locksv1alpha1.ReasonBackendUnavailable, 1)},
		{name: "pod not found yet", claim: claim(pending, f, locksv1alpha1.ReasonPodNotFound, 1)},
		{name: "held", claim: claim(locksv1alpha1.ClaimHeld, metav1.ConditionTrue, locksv1alpha1.ReasonAcquired, 0)},
		{name: "timed out", claim: claim(locksv1alpha1.ClaimTimedOut, f, locksv1alpha1.ReasonWaitTimedOut, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := isBusy(tc.claim, tc.holder); got != tc.busy {
				t.Errorf("isBusy = %v, want %v", got, tc.busy)
			}
			if got := needsLockHolder(tc.claim); got != tc.needHolder {
				t.Errorf("needsLockHolder = %v, want %v", got, tc.needHolder)
			}
		})
	}
}
