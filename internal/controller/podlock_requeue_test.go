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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestQueueAgain: which pods whose claim ended queue again, and when.
func TestQueueAgain(t *testing.T) {
	now := time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC)
	standby := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{locksv1alpha1.PodLockWaitAnnotation: locksv1alpha1.PodLockWaitStandby}}}
	gated := &corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}}}
	ran := &corev1.Pod{} // gated once, ungated when it held
	ended := func(phase locksv1alpha1.ClaimPhase, reason string, ago time.Duration) *locksv1alpha1.LockClaim {
		return &locksv1alpha1.LockClaim{Status: locksv1alpha1.LockClaimStatus{Phase: phase, Conditions: []metav1.Condition{
			{Type: locksv1alpha1.ConditionAcquired, Status: metav1.ConditionFalse, Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}}}
	}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		claim       *locksv1alpha1.LockClaim
		locksExist  bool
		nodeReady   bool
		evictionDue bool
		again       bool
		wait        time.Duration
	}{
		{"Standby, lost long ago", standby, ended(locksv1alpha1.ClaimLost, locksv1alpha1.ReasonRenewFailed, time.Minute), true, true, false, true, 0},
		{"Standby, lost just now: in a while", standby, ended(locksv1alpha1.ClaimLost, locksv1alpha1.ReasonRenewFailed, 4*time.Second), true, true, false, true, 6 * time.Second},
		{"Standby, its lock deleted and back", standby, ended(locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound, time.Minute), true, true, false, true, 0},
		{"Standby, its lock still gone", standby, ended(locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound, time.Minute), false, true, false, false, 0},
		{"Standby, the queue was full", standby, ended(locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonQueueFull, time.Minute), true, true, false, true, 0},
		{"Standby, timed out: the owner's limit", standby, ended(locksv1alpha1.ClaimTimedOut, locksv1alpha1.ReasonWaitTimedOut, time.Minute), true, true, false, false, 0},
		{"Standby, lost, to be evicted (lossPolicy Evict)", standby, ended(locksv1alpha1.ClaimLost, locksv1alpha1.ReasonRenewFailed, time.Minute), true, true, true, false, 0},
		{"gated, its lock deleted and back", gated, ended(locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound, time.Minute), true, true, false, true, 0},
		{"gated, its lock still gone", gated, ended(locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound, time.Minute), false, true, false, false, 0},
		{"gated, the queue was full", gated, ended(locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonQueueFull, time.Minute), true, true, false, true, 0},
		{"Standby, its node lost, still not Ready: look again later", standby, ended(locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonHolderTerminated, time.Minute), true, false, false, true, 10 * time.Second},
		{"Standby, its node lost and Ready again", standby, ended(locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonHolderTerminated, time.Minute), true, true, false, true, 0},
		{"gated, timed out", gated, ended(locksv1alpha1.ClaimTimedOut, locksv1alpha1.ReasonWaitTimedOut, time.Minute), true, true, false, false, 0},
		{"a pod that ran on its token, lost", ran, ended(locksv1alpha1.ClaimLost, locksv1alpha1.ReasonRenewFailed, time.Minute), true, true, false, false, 0},
		{"a pod that ran on its token, its lock deleted", ran, ended(locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound, time.Minute), true, true, false, false, 0},
	} {
		again, wait := queueAgain(tc.pod, tc.claim, tc.locksExist, tc.nodeReady, tc.evictionDue, now)
		if again != tc.again || wait != tc.wait {
			t.Errorf("%s: queueAgain = %v, %s; want %v, %s", tc.name, again, wait, tc.again, tc.wait)
		}
	}
}
