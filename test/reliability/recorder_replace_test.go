//go:build reliability

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

package reliability

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestRecorderTellsAReplacedClaimFromOneHeldAgain: the pod controller replaces a Standby pod's
// ended claim with a new one of the same name; that new object's Held is a grant of its own, not
// the ended claim coming back, which the final-is-final checker must still catch.
func TestRecorderTellsAReplacedClaimFromOneHeldAgain(t *testing.T) {
	claim := func(uid types.UID, phase locksv1alpha1.ClaimPhase, token int64) *locksv1alpha1.LockClaim {
		return &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0-leader", UID: uid, ResourceVersion: "1"},
			Spec:   locksv1alpha1.LockClaimSpec{LockName: "leader"},
			Status: locksv1alpha1.LockClaimStatus{Phase: phase, FencingToken: token}}
	}
	now := time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		again     types.UID
		grants    int
		heldAgain bool
	}{
		{"a new claim under the ended one's name", "uid-2", 2, false},
		{"the ended claim itself Held again", "uid-1", 1, true},
	} {
		r := newRecorder()
		r.adopt = true
		r.observe(watch.Added, claim("uid-1", locksv1alpha1.ClaimHeld, 7), now)
		r.observe(watch.Modified, claim("uid-1", locksv1alpha1.ClaimReleased, 7), now.Add(time.Second))
		if tc.again == "uid-2" {
			r.observe(watch.Deleted, claim("uid-1", locksv1alpha1.ClaimReleased, 7), now.Add(2*time.Second))
			r.observe(watch.Added, claim("uid-2", locksv1alpha1.ClaimPending, 0), now.Add(3*time.Second))
		}
		r.observe(watch.Modified, claim(tc.again, locksv1alpha1.ClaimHeld, 9), now.Add(4*time.Second))
		grants := r.results()
		if len(grants) != tc.grants {
			t.Fatalf("%s: %d grants %+v, want %d", tc.name, len(grants), grants, tc.grants)
		}
		if got := len(CheckFinalIsFinal(grants)) > 0; got != tc.heldAgain {
			t.Errorf("%s: final-is-final found %v, want %v", tc.name, CheckFinalIsFinal(grants), tc.heldAgain)
		}
		if len(r.errs) > 0 {
			t.Errorf("%s: recorder errors %v", tc.name, r.errs)
		}
	}
}
