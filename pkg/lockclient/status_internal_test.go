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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The lock record keeps the expiry of the grant (renewal does not rewrite the lock); the holder
// claim's status.expireTime follows renewals, so that is the one status shows.
func TestLockStatusShowsTheHolderClaimsExpiry(t *testing.T) {
	granted := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	renewed := granted.Add(time.Minute)
	lock := &locksv1alpha1.DistributedLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Status: locksv1alpha1.DistributedLockStatus{Holders: []locksv1alpha1.LockHolder{{
			Claim: "a", Identity: "id-a", FencingToken: 7, AcquireTime: metav1.NewMicroTime(granted),
			ExpireTime: &metav1.MicroTime{Time: granted.Add(30 * time.Second)},
		}}},
	}
	claim := locksv1alpha1.LockClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"},
		Spec:       locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: "p"}},
		Status:     locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimHeld, ExpireTime: &metav1.MicroTime{Time: renewed}},
	}
	s := lockStatus(lock, []locksv1alpha1.LockClaim{claim})
	if s.Holder == nil || s.Holder.ExpireTime == nil || !s.Holder.ExpireTime.Equal(renewed) || s.Holder.Pod != "p" {
		t.Fatalf("holder = %+v; want the claim's expireTime %s and pod p", s.Holder, renewed)
	}
	claim.Status.Phase = locksv1alpha1.ClaimReleased
	if s := lockStatus(lock, []locksv1alpha1.LockClaim{claim}); !s.Holder.ExpireTime.Equal(granted.Add(30 * time.Second)) {
		t.Fatalf("a claim that no longer holds lent its expiry: %s", s.Holder.ExpireTime)
	}
}
