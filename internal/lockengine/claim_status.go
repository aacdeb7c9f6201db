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
	"cmp"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
)

// This file holds the pure functions that compute a LockClaim's status. They never call the API:
// the reconciler decides, these functions describe the decision.

// isFinal says whether a claim's phase can no longer change.
func isFinal(p locksv1alpha1.ClaimPhase) bool {
	switch p {
	case locksv1alpha1.ClaimReleased, locksv1alpha1.ClaimLost, locksv1alpha1.ClaimTimedOut, locksv1alpha1.ClaimFailed:
		return true
	}
	return false
}

// isHeld says whether a claim holds its lock (a claim being deleted holds it until the finalizer
// has released it).
func isHeld(c *locksv1alpha1.LockClaim) bool { return c.Status.Phase == locksv1alpha1.ClaimHeld }

// queueOrder is FIFO: creation time, then name.
func queueOrder(a, b *locksv1alpha1.LockClaim) int {
	if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// setClaimConditions sets Acquired and Ready. Acquired is True exactly while held.
func setClaimConditions(c *locksv1alpha1.LockClaim, acquired, ready bool, reason, message string) {
	status := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
		Type: locksv1alpha1.ConditionAcquired, Status: status(acquired), Reason: reason, Message: message,
		ObservedGeneration: c.Generation,
	})
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
		Type: locksv1alpha1.ConditionReady, Status: status(ready), Reason: reason, Message: message,
		ObservedGeneration: c.Generation,
	})
	c.Status.ObservedGeneration = c.Generation
}

// markWaiting records a claim that waits for its lock: queued behind others, contended by a
// client outside lockwarden, or (ready=false) blocked by a missing lock, pod or backend.
func markWaiting(c *locksv1alpha1.LockClaim, position int32, ready bool, reason, message string) {
	c.Status.Phase = locksv1alpha1.ClaimPending
	c.Status.QueuePosition = position
	setClaimConditions(c, false, ready, reason, message)
}

// markHeld records a grant to the holder identity id (the lease's identity is the value on the
// backend, derived from it).
func markHeld(c *locksv1alpha1.LockClaim, id string, lease backends.Lease, token int64, now time.Time) {
	c.Status.Phase = locksv1alpha1.ClaimHeld
	c.Status.HolderIdentity = id
	c.Status.FencingToken = token
	c.Status.AcquireTime = micro(now)
	c.Status.RenewTime = micro(now)
	c.Status.ExpireTime = micro(lease.ExpireTime)
	c.Status.LeaseDurationSeconds = int32(lease.TTL / time.Second)
	c.Status.QueuePosition = 0
	c.Status.ReleaseTime = nil
	setClaimConditions(c, true, true, locksv1alpha1.ReasonAcquired,
		fmt.Sprintf("Held with fencing token %d", token))
}

// markRenewed moves a held claim's renew and expire times forward.
func markRenewed(c *locksv1alpha1.LockClaim, renewTime, expireTime time.Time) {
	c.Status.RenewTime = micro(renewTime)
	c.Status.ExpireTime = micro(expireTime)
}

// markEnded records the end of a claim in a final phase.
func markEnded(c *locksv1alpha1.LockClaim, phase locksv1alpha1.ClaimPhase, reason, message string, now time.Time) {
	if isHeld(c) {
		c.Status.ReleaseTime = micro(now)
	}
	c.Status.Phase = phase
	c.Status.QueuePosition = 0
	setClaimConditions(c, false, false, reason, message)
}

func micro(t time.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t)
	return &m
}
