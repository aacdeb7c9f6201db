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
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
	"github.com/lockwarden/lockwarden/internal/testutil/fakepods"
)

// recordOf is a lock record entry naming claim (name, UID) held by the pod (name, UID) with token.
func recordOf(claim string, claimUID types.UID, pod string, podUID types.UID, token int64) locksv1alpha1.LockHolder {
	return locksv1alpha1.LockHolder{Claim: claim, ClaimUID: claimUID, Identity: string(podUID), FencingToken: token,
		Holder: &locksv1alpha1.RecordedHolder{APIVersion: "v1", Kind: "Pod", Name: pod, UID: podUID}}
}

func TestPodHold(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-0", UID: "pod-1"}}
	claimIn := func(phase locksv1alpha1.ClaimPhase) *locksv1alpha1.LockClaim {
		return &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-0-db", UID: "claim-1"},
			Spec:   locksv1alpha1.LockClaimSpec{LockName: "db"},
			Status: locksv1alpha1.LockClaimStatus{Phase: phase}}
	}
	held := claimIn(locksv1alpha1.ClaimHeld)
	held.Status.FencingToken, held.Status.HolderIdentity = 7, "pod-1"
	lockNaming := func(recs ...locksv1alpha1.LockHolder) *locksv1alpha1.DistributedLock {
		return &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db"},
			Status: locksv1alpha1.DistributedLockStatus{Holders: recs}}
	}
	mine := recordOf("web-0-db", "claim-1", "web-0", "pod-1", 9)
	for _, tc := range []struct {
		name     string
		claim    *locksv1alpha1.LockClaim
		lock     *locksv1alpha1.DistributedLock
		want     podHoldOf
		wantHeld bool
	}{
		{"claim Held: its own status, whatever the record says", held, lockNaming(), podHoldOf{7, "pod-1"}, true},
		{"claim Pending, record names it: the record's token", claimIn(locksv1alpha1.ClaimPending), lockNaming(mine), podHoldOf{9, "pod-1"}, true},
		{"claim without a phase yet, record names it", claimIn(""), lockNaming(recordOf("other", "claim-2", "web-1", "pod-2", 8), mine), podHoldOf{9, "pod-1"}, true},
		{"claim Pending, record names others", claimIn(locksv1alpha1.ClaimPending), lockNaming(recordOf("other", "claim-2", "web-1", "pod-2", 8)), podHoldOf{}, false},
		{"claim Pending, no lock in the cache", claimIn(locksv1alpha1.ClaimPending), nil, podHoldOf{}, false},
		{"record names a claim of that name with another UID (deleted and made again)", claimIn(locksv1alpha1.ClaimPending),
			lockNaming(recordOf("web-0-db", "claim-0", "web-0", "pod-1", 9)), podHoldOf{}, false},
		{"record names the claim for another pod of the same name", claimIn(locksv1alpha1.ClaimPending),
			lockNaming(recordOf("web-0-db", "claim-1", "web-0", "pod-0", 9)), podHoldOf{}, false},
		{"record names the claim without its UID (granted before records kept it)", claimIn(locksv1alpha1.ClaimPending),
			lockNaming(recordOf("web-0-db", "", "web-0", "pod-1", 9)), podHoldOf{}, false},
		{"record names the claim with a Lease holder", claimIn(locksv1alpha1.ClaimPending),
			lockNaming(locksv1alpha1.LockHolder{Claim: "web-0-db", ClaimUID: "claim-1", FencingToken: 9,
				Holder: &locksv1alpha1.RecordedHolder{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "web-0"}}), podHoldOf{}, false},
		{"claim Released, a cache behind still shows the record", claimIn(locksv1alpha1.ClaimReleased), lockNaming(mine), podHoldOf{}, false},
		{"claim Lost, a cache behind still shows the record", claimIn(locksv1alpha1.ClaimLost), lockNaming(mine), podHoldOf{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := podHold(pod, tc.claim, tc.lock)
			if ok != tc.wantHeld || got != tc.want {
				t.Fatalf("podHold = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantHeld)
			}
		})
	}
}

func TestNewPodHolders(t *testing.T) {
	a := recordOf("a-db", "claim-a", "a", "pod-a", 1)
	b := recordOf("b-db", "claim-b", "b", "pod-b", 2)
	lease := locksv1alpha1.LockHolder{Claim: "job-db", ClaimUID: "claim-l", FencingToken: 3,
		Holder: &locksv1alpha1.RecordedHolder{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "job"}}
	detached := locksv1alpha1.LockHolder{Claim: "x-db", ClaimUID: "claim-x", FencingToken: 4}
	aAgain := recordOf("a-db", "claim-a2", "a", "pod-a", 5)
	for _, tc := range []struct {
		name        string
		before, now []locksv1alpha1.LockHolder
		want        []string
	}{
		{"first sight: every pod holder", nil, []locksv1alpha1.LockHolder{a, b}, []string{"a", "b"}},
		{"a handoff: the new holder only", []locksv1alpha1.LockHolder{a}, []locksv1alpha1.LockHolder{b}, []string{"b"}},
		{"a status write that grants nothing", []locksv1alpha1.LockHolder{a, b}, []locksv1alpha1.LockHolder{a, b}, nil},
		{"a release: nobody", []locksv1alpha1.LockHolder{a, b}, []locksv1alpha1.LockHolder{a}, nil},
		{"a claim of the same name granted again", []locksv1alpha1.LockHolder{a}, []locksv1alpha1.LockHolder{aAgain}, []string{"a"}},
		{"Lease and detached holders are no pods", nil, []locksv1alpha1.LockHolder{lease, detached, b}, []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range newPodHolders("team", tc.before, tc.now) {
				if p.Namespace != "team" {
					t.Fatalf("namespace %q", p.Namespace)
				}
				got = append(got, p.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("newPodHolders = %q, want %q", got, tc.want)
			}
		})
	}
}

// A gated pod whose claim's status still says Pending is ungated, with the record's token, once
// its lock's record names that claim and that pod; a record naming its claim for another pod of
// the same name (or a claim of its name with another UID) leaves it gated.
func TestGateLiftedFromTheRecord(t *testing.T) {
	scheme := unitScheme(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-0", UID: "pod-1",
		Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "db"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}}}
	claimName := locksv1alpha1.PodClaimName(pod.Name, pod.UID, "db")
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: claimName, UID: "claim-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}},
		Spec:   locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: pod.Name}},
		Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimPending}}
	for _, tc := range []struct {
		name      string
		record    locksv1alpha1.LockHolder
		wantToken string
	}{
		{"the record names the pod's claim", recordOf(claimName, "claim-1", "web-0", "pod-1", 12), "12"},
		{"the record names the claim for an earlier pod of that name", recordOf(claimName, "claim-1", "web-0", "pod-0", 12), ""},
		{"the record names an earlier claim of that name", recordOf(claimName, "claim-0", "web-0", "pod-1", 12), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db"},
				Status: locksv1alpha1.DistributedLockStatus{Holders: []locksv1alpha1.LockHolder{tc.record}}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod.DeepCopy(), claim.DeepCopy(), lock).Build()
			r := &PodLockReconciler{Client: c, Pods: fakepods.Reader{C: c}, Recorder: events.NewFakeRecorder(10),
				Guard: leaderguard.New(time.Hour)}
			if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			after := &corev1.Pod{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), after); err != nil {
				t.Fatal(err)
			}
			gated := len(after.Spec.SchedulingGates) > 0
			if token := after.Annotations[locksv1alpha1.PodFencingTokenAnnotation]; token != tc.wantToken || gated != (tc.wantToken == "") {
				t.Fatalf("token %q, gated %v; want token %q", token, gated, tc.wantToken)
			}
			if tc.wantToken != "" && after.Labels[locksv1alpha1.PodRoleLabel] != locksv1alpha1.PodRoleHolder {
				t.Fatalf("role %q, want %s", after.Labels[locksv1alpha1.PodRoleLabel], locksv1alpha1.PodRoleHolder)
			}
		})
	}
}
