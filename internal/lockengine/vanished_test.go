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
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

func TestVanishedEntries(t *testing.T) {
	entry := func(claim string, uid types.UID) locksv1alpha1.LockHolder {
		return locksv1alpha1.LockHolder{Claim: claim, ClaimUID: uid, Identity: "id-" + claim, FencingToken: 7}
	}
	claim := func(name string, uid types.UID, phase locksv1alpha1.ClaimPhase) *locksv1alpha1.LockClaim {
		c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
		c.Status.Phase = phase
		if phase == locksv1alpha1.ClaimHeld {
			c.Status.HolderIdentity, c.Status.FencingToken = "id-"+name, 7
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		recs   []locksv1alpha1.LockHolder
		claims []*locksv1alpha1.LockClaim
		want   []int
	}{
		{"the claim is there and holds", []locksv1alpha1.LockHolder{entry("a", "ua")}, []*locksv1alpha1.LockClaim{claim("a", "ua", locksv1alpha1.ClaimHeld)}, nil},
		{"granted, its status not written yet", []locksv1alpha1.LockHolder{entry("a", "ua")}, []*locksv1alpha1.LockClaim{claim("a", "ua", locksv1alpha1.ClaimPending)}, nil},
		{"gone", []locksv1alpha1.LockHolder{entry("a", "ua")}, nil, []int{0}},
		{"gone, and created again under its name", []locksv1alpha1.LockHolder{entry("a", "ua")}, []*locksv1alpha1.LockClaim{claim("a", "ua2", locksv1alpha1.ClaimPending)}, []int{0}},
		{"an entry from before claim UIDs", []locksv1alpha1.LockHolder{entry("a", "")}, nil, nil},
		{"there, but ended", []locksv1alpha1.LockHolder{entry("a", "ua")}, []*locksv1alpha1.LockClaim{claim("a", "ua", locksv1alpha1.ClaimReleased)}, nil},
		{"one of two places gone", []locksv1alpha1.LockHolder{entry("a", "ua"), entry("b", "ub")}, []*locksv1alpha1.LockClaim{claim("b", "ub", locksv1alpha1.ClaimHeld)}, []int{0}},
	} {
		if got := vanishedEntries(tc.recs, tc.claims); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A claim's holder survives the trip through the record: the vanished claim rebuilt from it is
// judged by the same holder, with the same UID, owned by it.
func TestVanishedClaimKeepsItsHolder(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	lock := types.NamespacedName{Namespace: "apps", Name: "db"}
	for _, tc := range []struct {
		name      string
		holder    *locksv1alpha1.ClaimHolder
		uid       types.UID
		wantOwner bool
	}{
		{"a pod", &locksv1alpha1.ClaimHolder{PodName: "web-0"}, "pod-uid", true},
		{"a heartbeat Lease", &locksv1alpha1.ClaimHolder{LeaseName: "worker"}, "", false},
		{"a Job", &locksv1alpha1.ClaimHolder{Object: &locksv1alpha1.HolderObject{APIVersion: "batch/v1", Kind: "Job", Name: "nightly"}}, "job-uid", true},
		{"a Tekton run", &locksv1alpha1.ClaimHolder{Object: &locksv1alpha1.HolderObject{APIVersion: "tekton.dev/v1", Kind: "PipelineRun", Name: "deploy"}}, "run-uid", true},
		{"detached", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "claim-uid"}, Spec: locksv1alpha1.LockClaimSpec{Holder: tc.holder}}
			rec := locksv1alpha1.LockHolder{Claim: "a", ClaimUID: "claim-uid", Identity: "id", FencingToken: 9,
				AcquireTime: metav1.NewMicroTime(now), Holder: holderOf(c).record(tc.uid)}
			v := vanishedClaim(&rec, lock, now.Add(time.Second))
			if !reflect.DeepEqual(v.Spec.Holder, tc.holder) {
				t.Fatalf("holder %+v, want %+v", v.Spec.Holder, tc.holder)
			}
			if v.Name != "a" || v.UID != "claim-uid" || v.Namespace != "apps" || v.Spec.LockName != "db" || v.DeletionTimestamp == nil ||
				!isHeld(v) || v.Status.HolderIdentity != "id" || v.Status.FencingToken != 9 {
				t.Fatalf("vanished claim %+v", v)
			}
			owner := metav1.GetControllerOf(v)
			if (owner != nil) != tc.wantOwner || (owner != nil && owner.UID != tc.uid) {
				t.Fatalf("controller %+v, want one with UID %q: %v", owner, tc.uid, tc.wantOwner)
			}
			if tc.holder != nil && tc.holder.PodName != "" && v.Status.PodUID != tc.uid {
				t.Fatalf("podUID %q, want %q", v.Status.PodUID, tc.uid)
			}
		})
	}
}

func TestRecordIndexKeys(t *testing.T) {
	recs := []locksv1alpha1.LockHolder{
		{Claim: "a", Holder: &locksv1alpha1.RecordedHolder{APIVersion: "v1", Kind: "Pod", Name: "web-0"}},
		{Claim: "b", Holder: &locksv1alpha1.RecordedHolder{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "worker"}},
		{Claim: "c", Holder: &locksv1alpha1.RecordedHolder{APIVersion: "batch/v1", Kind: "Job", Name: "nightly"}},
		{Claim: "d"},
	}
	want := []string{"LockClaim.locks.lockwarden.io/a", "Pod/web-0", "LockClaim.locks.lockwarden.io/b", "Lease.coordination.k8s.io/worker",
		"LockClaim.locks.lockwarden.io/c", "Job.batch/nightly", "LockClaim.locks.lockwarden.io/d"}
	if got := recordIndexKeys(recs); !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if podRecordKey("web-0") != want[1] || leaseRecordKey("worker") != want[3] || claimRecordKey("a") != want[0] {
		t.Fatal("the keys the watches look up differ from the keys the index files")
	}
}
