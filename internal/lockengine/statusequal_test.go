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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// fullClaimStatus is a status with every field set.
func fullClaimStatus() locksv1alpha1.LockClaimStatus {
	at := metav1.NewMicroTime(time.Date(2026, 12, 4, 9, 0, 0, 123456000, time.UTC))
	return locksv1alpha1.LockClaimStatus{
		Phase: locksv1alpha1.ClaimHeld,
		Conditions: []metav1.Condition{{Type: locksv1alpha1.ConditionAcquired, Status: metav1.ConditionTrue, ObservedGeneration: 1,
			LastTransitionTime: metav1.NewTime(at.Time), Reason: "Acquired", Message: "Held with fencing token 7"}},
		HolderIdentity: "web-0", PodUID: "pod-uid", ObjectUID: "object-uid", FencingToken: 7,
		AcquireTime: &at, RenewTime: &at, ExpireTime: &at, ReleaseTime: &at,
		LeaseDurationSeconds: 30, QueuePosition: 1, ObservedGeneration: 1,
		Locks: []locksv1alpha1.ClaimLock{{LockName: "a", FencingToken: 7, ExpireTime: &at}},
	}
}

// TestSameClaimStatusComparesEveryField: a change of any field of LockClaimStatus, or of any
// field of its conditions, is a difference. A field added to the API and not compared fails here.
func TestSameClaimStatusComparesEveryField(t *testing.T) {
	base := fullClaimStatus()
	st := reflect.TypeFor[locksv1alpha1.LockClaimStatus]()
	for i := range st.NumField() {
		f := st.Field(i)
		changed := fullClaimStatus()
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Name {
		case "Conditions":
			cond := reflect.ValueOf(&changed.Conditions[0]).Elem()
			for j := range cond.NumField() {
				again := fullClaimStatus()
				perturb(t, reflect.ValueOf(&again.Conditions[0]).Elem().Field(j), cond.Type().Field(j).Name)
				if sameClaimStatus(&base, &again) {
					t.Errorf("a change of the condition's %s is not seen", cond.Type().Field(j).Name)
				}
			}
			changed.Conditions = nil
		case "Locks":
			part := reflect.ValueOf(&changed.Locks[0]).Elem()
			for j := range part.NumField() {
				again := fullClaimStatus()
				perturb(t, reflect.ValueOf(&again.Locks[0]).Elem().Field(j), part.Type().Field(j).Name)
				if sameClaimStatus(&base, &again) {
					t.Errorf("a change of the part's %s is not seen", part.Type().Field(j).Name)
				}
			}
			changed.Locks = nil
		default:
			perturb(t, v, f.Name)
		}
		if sameClaimStatus(&base, &changed) {
			t.Errorf("a change of %s is not seen", f.Name)
		}
	}
	same := fullClaimStatus()
	if !sameClaimStatus(&base, &same) {
		t.Fatal("equal statuses differ")
	}
}

// perturb changes the value v of the field named name.
func perturb(t *testing.T, v reflect.Value, name string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Pointer: // *metav1.MicroTime
		v.Set(reflect.Zero(v.Type()))
	case reflect.Struct: // metav1.Time
		v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))))
	default:
		t.Fatalf("field %s of kind %s: teach perturb to change it", name, v.Kind())
	}
}

// TestSameClaimStatusAgreesWithSemantic: where equality.Semantic finds two statuses equal that
// differ in representation only (a time in another zone, an empty list for none), so does
// sameClaimStatus, and both see the same differences.
func TestSameClaimStatusAgreesWithSemantic(t *testing.T) {
	base := fullClaimStatus()
	berlin := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		name   string
		mutate func(*locksv1alpha1.LockClaimStatus)
	}{
		{"copy", func(*locksv1alpha1.LockClaimStatus) {}},
		{"times in another zone", func(s *locksv1alpha1.LockClaimStatus) {
			at := metav1.NewMicroTime(s.AcquireTime.In(berlin))
			s.AcquireTime, s.ExpireTime = &at, &at
			s.Conditions[0].LastTransitionTime = metav1.NewTime(s.Conditions[0].LastTransitionTime.In(berlin))
		}},
		{"a later expiry", func(s *locksv1alpha1.LockClaimStatus) {
			at := metav1.NewMicroTime(s.ExpireTime.Add(time.Microsecond))
			s.ExpireTime = &at
		}},
		{"no conditions, empty", func(s *locksv1alpha1.LockClaimStatus) { s.Conditions = []metav1.Condition{} }},
		{"a part's expiry in another zone", func(s *locksv1alpha1.LockClaimStatus) {
			at := metav1.NewMicroTime(s.Locks[0].ExpireTime.In(berlin))
			s.Locks[0].ExpireTime = &at
		}},
		{"a second condition", func(s *locksv1alpha1.LockClaimStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: "Other"})
		}},
		{"waiting", func(s *locksv1alpha1.LockClaimStatus) {
			s.Phase, s.QueuePosition, s.AcquireTime = locksv1alpha1.ClaimPending, 2, nil
		}},
	} {
		other := *base.DeepCopy()
		tc.mutate(&other)
		want := equality.Semantic.DeepEqual(base, other)
		if got := sameClaimStatus(&base, &other); got != want {
			t.Errorf("%s: sameClaimStatus %v, equality.Semantic %v", tc.name, got, want)
		}
	}
	none := base.DeepCopy()
	none.Conditions = nil
	empty := base.DeepCopy()
	empty.Conditions = []metav1.Condition{}
	if !sameClaimStatus(none, empty) || !equality.Semantic.DeepEqual(*none, *empty) {
		t.Error("no conditions and an empty list differ")
	}
}
