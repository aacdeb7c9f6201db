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
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
)

// A deposed leader lifts no pod's gate: once the stall guard has tripped, markHolder refuses the
// patch (the reliability harness's deposed-leader scenario has no gated pods; this is its pod
// half). The same call with a healthy guard lifts the gate, so the test can fail.
func TestTrippedGuardLiftsNoGate(t *testing.T) {
	stalled := leaderguard.New(time.Millisecond) // never started: its first Check sees a long gap
	time.Sleep(5 * time.Millisecond)
	for name, tc := range map[string]struct {
		guard     *leaderguard.Guard
		wantGated bool
	}{
		"healthy guard": {guard: leaderguard.New(time.Hour)},
		"tripped guard": {guard: stalled, wantGated: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "app", ResourceVersion: "7",
					Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "db"}},
				Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}},
					Containers: []corev1.Container{{Name: "app", Image: "app"}}},
			}
			c := fake.NewClientBuilder().WithObjects(pod.DeepCopy()).Build()
			r := &PodLockReconciler{Client: c, Recorder: events.NewFakeRecorder(10), Guard: tc.guard}
			claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "app-db"},
				Spec:   locksv1alpha1.LockClaimSpec{LockName: "db"},
				Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimHeld, FencingToken: 42, HolderIdentity: "uid-1"}}
			current := &corev1.Pod{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), current); err != nil {
				t.Fatal(err)
			}
			err := r.markHolder(t.Context(), current, claim, podHoldOf{token: 42, identity: "uid-1"})
			if tc.wantGated != errors.Is(err, leaderguard.ErrStalled) {
				t.Fatalf("markHolder: %v", err)
			}
			after := &corev1.Pod{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), after); err != nil {
				t.Fatal(err)
			}
			if gated := len(after.Spec.SchedulingGates) > 0; gated != tc.wantGated {
				t.Fatalf("gated = %v after markHolder, want %v", gated, tc.wantGated)
			}
			if tc.wantGated && after.Annotations[locksv1alpha1.PodFencingTokenAnnotation] != "" {
				t.Fatalf("a stalled leader wrote the token annotation %q", after.Annotations[locksv1alpha1.PodFencingTokenAnnotation])
			}
		})
	}
}
