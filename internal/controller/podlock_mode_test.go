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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

func TestAnnotatedMode(t *testing.T) {
	cases := []struct {
		name      string
		annotated *string
		mode      locksv1alpha1.LockMode
		ok        bool
		// claim is the mode of the pod's existing claim ("" for a claim without one); changed says
		// whether the annotation no longer matches it.
		claim   locksv1alpha1.LockMode
		changed bool
	}{
		{name: "absent: the API default", claim: locksv1alpha1.LockModeShared, ok: true},
		{name: "absent, claim without a mode", claim: "", ok: true},
		{name: "absent, but the claim is Exclusive", claim: locksv1alpha1.LockModeExclusive, ok: true, changed: true},
		{name: "Shared", annotated: ptr.To("Shared"), mode: locksv1alpha1.LockModeShared, ok: true, claim: locksv1alpha1.LockModeShared},
		{name: "Exclusive", annotated: ptr.To("Exclusive"), mode: locksv1alpha1.LockModeExclusive, ok: true, claim: locksv1alpha1.LockModeExclusive},
		{name: "Exclusive, claim Shared", annotated: ptr.To("Exclusive"), mode: locksv1alpha1.LockModeExclusive, ok: true,
			claim: locksv1alpha1.LockModeShared, changed: true},
		{name: "Shared, claim without a mode", annotated: ptr.To("Shared"), mode: locksv1alpha1.LockModeShared, ok: true, claim: ""},
		{name: "lower case is not a mode", annotated: ptr.To("exclusive"), mode: "exclusive", claim: locksv1alpha1.LockModeShared, changed: true},
		{name: "empty is not a mode", annotated: ptr.To(""), mode: "", claim: locksv1alpha1.LockModeShared, changed: true},
		{name: "a word that is not a mode", annotated: ptr.To("Read"), mode: "Read", claim: locksv1alpha1.LockModeExclusive, changed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "db"}}}
			if tc.annotated != nil {
				pod.Annotations[locksv1alpha1.PodLockModeAnnotation] = *tc.annotated
			}
			mode, ok := annotatedMode(pod.Annotations)
			if mode != tc.mode || ok != tc.ok {
				t.Errorf("annotatedMode = %q, %v; want %q, %v", mode, ok, tc.mode, tc.ok)
			}
			claim := &locksv1alpha1.LockClaim{Spec: locksv1alpha1.LockClaimSpec{Mode: tc.claim}}
			if _, changed := modeChanged(pod.Annotations, claim); changed != tc.changed {
				t.Errorf("modeChanged = %v, want %v", changed, tc.changed)
			}
		})
	}
}

func TestStaleHolders(t *testing.T) {
	pod := func(name, uid, lock, role string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid),
			Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: lock},
			Labels:      map[string]string{locksv1alpha1.PodRoleLabel: role}}}
	}
	claimOf := func(name, uid, lock string) string { return locksv1alpha1.PodClaimName(name, types.UID(uid), lock) }
	pods := []corev1.Pod{
		pod("new", "u-new", "leader", locksv1alpha1.PodRoleHolder),       // the pod about to be labelled
		pod("old", "u-old", "leader", locksv1alpha1.PodRoleHolder),       // its hold ended: stale
		pod("peer", "u-peer", "leader", locksv1alpha1.PodRoleHolder),     // holds a place beside it
		pod("other", "u-other", "reports", locksv1alpha1.PodRoleHolder),  // another lock's holder
		pod("waiting", "u-wait", "leader", locksv1alpha1.PodRoleStandby), // not labelled holder
	}
	recorded := map[string]bool{claimOf("new", "u-new", "leader"): true, claimOf("peer", "u-peer", "leader"): true}
	var names []string
	for _, p := range staleHolders(pods, "u-new", "leader", recorded) {
		names = append(names, p.Name)
	}
	if len(names) != 1 || names[0] != "old" {
		t.Errorf("staleHolders = %v, want [old]: not the pod itself, not a recorded peer, not another lock's, not a standby", names)
	}
	if got := staleHolders(pods, "u-new", "leader", map[string]bool{}); len(got) != 2 {
		t.Errorf("with an empty record every other holder of the lock is stale, got %d", len(got))
	}
}
