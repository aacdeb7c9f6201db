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

package v1alpha1

import (
	"reflect"
	"testing"
)

func TestCurrentHolders(t *testing.T) {
	a := LockHolder{Claim: "a", Identity: "id-a", FencingToken: 7}
	b := LockHolder{Claim: "b", Identity: "id-b", FencingToken: 8, Mode: LockModeShared}
	legacy := a
	legacy.Mode = LockModeExclusive
	cases := []struct {
		name   string
		status DistributedLockStatus
		want   []LockHolder
	}{
		{"a free lock", DistributedLockStatus{}, nil},
		{"holders", DistributedLockStatus{Holders: []LockHolder{b}}, []LockHolder{b}},
		{"the one holder of an older lockwarden, which held exclusively", DistributedLockStatus{Holder: &a}, []LockHolder{legacy}},
		{"holders win over a stale old field", DistributedLockStatus{Holder: &a, Holders: []LockHolder{b}}, []LockHolder{b}},
	}
	for _, tc := range cases {
		if got := tc.status.CurrentHolders(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: CurrentHolders() = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if a.Mode != "" {
		t.Errorf("CurrentHolders changed the old field in place")
	}
}

func TestLockModeIsValid(t *testing.T) {
	for mode, want := range map[LockMode]bool{
		LockModeShared: true, LockModeExclusive: true, "": false, "shared": false, "EXCLUSIVE": false, "Read": false, " Shared": false,
	} {
		if got := mode.IsValid(); got != want {
			t.Errorf("LockMode(%q).IsValid() = %v, want %v", mode, got, want)
		}
	}
}
