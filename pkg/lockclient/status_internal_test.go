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
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

func TestLockStatusShowsEveryHolderPlacesAndModes(t *testing.T) {
	granted := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	holder := func(claim string, mode locksv1alpha1.LockMode, token int64) locksv1alpha1.LockHolder {
		return locksv1alpha1.LockHolder{Claim: claim, Mode: mode, Identity: "id-" + claim, FencingToken: token,
			AcquireTime: metav1.NewMicroTime(granted), ExpireTime: &metav1.MicroTime{Time: granted.Add(30 * time.Second)}}
	}
	lock := &locksv1alpha1.DistributedLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "reports"},
		Spec:       locksv1alpha1.DistributedLockSpec{MaxHolders: 3},
		Status: locksv1alpha1.DistributedLockStatus{FencingToken: 12, Holders: []locksv1alpha1.LockHolder{
			holder("reader-a", locksv1alpha1.LockModeShared, 11), holder("reader-b", locksv1alpha1.LockModeShared, 12),
		}},
	}
	claim := func(name, pod string, mode locksv1alpha1.LockMode, phase locksv1alpha1.ClaimPhase, created int) locksv1alpha1.LockClaim {
		c := locksv1alpha1.LockClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(granted.Add(time.Duration(created) * time.Second))},
			Spec:       locksv1alpha1.LockClaimSpec{LockName: "reports", Mode: mode},
			Status:     locksv1alpha1.LockClaimStatus{Phase: phase},
		}
		if pod != "" {
			c.Spec.Holder = &locksv1alpha1.ClaimHolder{PodName: pod}
		}
		return c
	}
	renewed := granted.Add(time.Minute)
	readerA := claim("reader-a", "report-0", locksv1alpha1.LockModeShared, locksv1alpha1.ClaimHeld, 0)
	readerA.Status.ExpireTime = &metav1.MicroTime{Time: renewed}
	claims := []locksv1alpha1.LockClaim{
		claim("reader-c", "report-2", locksv1alpha1.LockModeShared, locksv1alpha1.ClaimPending, 3),
		readerA,
		claim("migrate", "migrate-x", locksv1alpha1.LockModeExclusive, locksv1alpha1.ClaimPending, 2),
		claim("reader-b", "", locksv1alpha1.LockModeShared, locksv1alpha1.ClaimHeld, 1),
		claim("elsewhere", "", locksv1alpha1.LockModeShared, locksv1alpha1.ClaimPending, 0),
	}
	claims[4].Spec.LockName = "other"

	s := lockStatus(lock, claims)
	if s.MaxHolders != 3 || s.Holding != 2 || s.Waiting != 2 {
		t.Fatalf("maxHolders %d, holding %d, waiting %d; want 3, 2, 2", s.MaxHolders, s.Holding, s.Waiting)
	}
	if len(s.Holders) != 2 {
		t.Fatalf("holders = %+v; want reader-a and reader-b", s.Holders)
	}
	a, b := s.Holders[0], s.Holders[1]
	if a.Claim != "reader-a" || a.Pod != "report-0" || a.Mode != locksv1alpha1.LockModeShared || a.FencingToken != 11 ||
		a.ExpireTime == nil || !a.ExpireTime.Equal(renewed) {
		t.Errorf("first holder = %+v; want reader-a of pod report-0, Shared, token 11, expiring at the claim's %s", a, renewed)
	}
	if b.Claim != "reader-b" || b.Pod != "" || b.Mode != locksv1alpha1.LockModeShared || b.FencingToken != 12 ||
		b.ExpireTime == nil || !b.ExpireTime.Equal(granted.Add(30*time.Second)) {
		t.Errorf("second holder = %+v; want detached reader-b, Shared, token 12, expiring at the grant's expiry", b)
	}
	if s.Holder == nil || s.Holder.Claim != "reader-a" || s.Holder.Pod != "report-0" {
		t.Errorf("holder = %+v; want the first holder, for programs written before shared locks", s.Holder)
	}
	if len(s.Queue) != 2 || s.Queue[0].Claim != "migrate" || s.Queue[0].Mode != locksv1alpha1.LockModeExclusive ||
		s.Queue[1].Claim != "reader-c" || s.Queue[1].Mode != locksv1alpha1.LockModeShared || s.Queue[1].Position != 2 {
		t.Errorf("queue = %+v; want the writer, then reader-c", s.Queue)
	}
}

func TestLockStatusOfAMutexAndOfAFreeLock(t *testing.T) {
	granted := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	// A lock written before maxHolders existed (0), whose one holder an older lockwarden recorded
	// in status.holder.
	lock := &locksv1alpha1.DistributedLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Status: locksv1alpha1.DistributedLockStatus{FencingToken: 4, Holder: &locksv1alpha1.LockHolder{ //nolint:staticcheck // SA1019: an old status, on purpose
			Claim: "a", Identity: "id-a", FencingToken: 4, AcquireTime: metav1.NewMicroTime(granted)}},
	}
	waiter := locksv1alpha1.LockClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
		Spec:       locksv1alpha1.LockClaimSpec{LockName: "db", Mode: locksv1alpha1.LockModeShared},
	}
	s := lockStatus(lock, []locksv1alpha1.LockClaim{waiter})
	if s.MaxHolders != 1 || len(s.Holders) != 1 || s.Holders[0].Mode != locksv1alpha1.LockModeExclusive || s.Holder == nil || s.Holder.Claim != "a" {
		t.Fatalf("status = %+v; want one place held exclusively by a", s)
	}
	if len(s.Queue) != 1 || s.Queue[0].Mode != locksv1alpha1.LockModeExclusive {
		t.Fatalf("queue = %+v; on a lock of one place a Shared claim will hold it alone", s.Queue)
	}

	free := lockStatus(&locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec: locksv1alpha1.DistributedLockSpec{MaxHolders: 4}}, nil)
	if free.Holder != nil || free.Holders == nil || len(free.Holders) != 0 || free.Holding != 0 || free.MaxHolders != 4 {
		t.Fatalf("free lock = %+v; want no holder and an empty (not null) holders list", free)
	}
}

func TestWithPodRoles(t *testing.T) {
	pod := func(name, lock, wait, role string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{locksv1alpha1.PodRoleLabel: role},
			Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: lock}}}
		if wait != "" {
			p.Annotations[locksv1alpha1.PodLockWaitAnnotation] = wait
		}
		return p
	}
	status := func() *LockStatus {
		return &LockStatus{Lock: "leader",
			Holders: []HolderStatus{{Claim: "a-c", Pod: "a"}, {Claim: "detached"}},
			Holder:  &HolderStatus{Claim: "a-c", Pod: "a"},
			Queue: []QueuedClaim{{Claim: "b-c", Pod: "b"}, {Claim: "c-c", Pod: "c"}, {Claim: "d-c", Pod: "d"},
				{Claim: "e-c", Pod: "e"}, {Claim: "lockctl", Pod: "f"}}}
	}
	pods := map[string]*corev1.Pod{
		"a": pod("a", "leader", locksv1alpha1.PodLockWaitStandby, locksv1alpha1.PodRoleStandby),
		"b": pod("b", "leader", locksv1alpha1.PodLockWaitStandby, locksv1alpha1.PodRoleStandby),
		"c": pod("c", "leader", "", locksv1alpha1.PodRoleStandby),
		"d": pod("d", "leader", locksv1alpha1.PodLockWaitGated, locksv1alpha1.PodRoleStandby),
		"e": pod("e", "other-lock", locksv1alpha1.PodLockWaitStandby, locksv1alpha1.PodRoleStandby),
	}

	s := status()
	withPodRoles(s, pods)
	if got := []string{s.Holders[0].Role, s.Holders[1].Role, s.Holder.Role}; got[0] != "standby" || got[1] != "" || got[2] != "standby" {
		t.Errorf("holder roles = %q, want the terminating pod's standby, none for a detached claim, and Holder as Holders[0]", got)
	}
	var waits []string
	for _, q := range s.Queue {
		waits = append(waits, q.Wait)
	}
	want := []string{"Standby", "Gated", "Gated", "", ""}
	if !slices.Equal(waits, want) {
		t.Errorf("waits = %q, want %q (absent means Gated; a pod annotated for another lock, or without the label, says nothing)", waits, want)
	}

	s = status()
	withPodRoles(s, nil)
	if s.Holders[0].Role != "" || s.Queue[0].Wait != "" {
		t.Errorf("without pods (list refused) nothing is filled in: %+v", s)
	}
}
