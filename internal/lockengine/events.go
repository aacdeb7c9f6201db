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
	corev1 "k8s.io/api/core/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// transitionEvent says which event, if any, a claim's change of phase deserves: one per
// transition, none for waiting in a queue (which is not news) and none for a refresh. Its reason
// is the Acquired condition's reason.
func transitionEvent(st *locksv1alpha1.LockClaimStatus) (eventType, reason, message string, ok bool) {
	for _, cond := range st.Conditions {
		if cond.Type == locksv1alpha1.ConditionAcquired {
			reason, message = cond.Reason, cond.Message
		}
	}
	switch st.Phase {
	case locksv1alpha1.ClaimLost, locksv1alpha1.ClaimFailed, locksv1alpha1.ClaimTimedOut:
		return corev1.EventTypeWarning, reason, message, true
	case locksv1alpha1.ClaimPending:
		if reason == locksv1alpha1.ReasonQueued || reason == locksv1alpha1.ReasonContended {
			return "", "", "", false
		}
		// The claim cannot proceed: lock, pod or backend missing.
		return corev1.EventTypeWarning, reason, message, true
	}
	return corev1.EventTypeNormal, reason, message, true
}

// recordTransition emits the event of claim's new phase, if it deserves one.
func (r *Reconciler) recordTransition(claim *locksv1alpha1.LockClaim) {
	if eventType, reason, message, ok := transitionEvent(&claim.Status); ok {
		r.Recorder.Eventf(claim, nil, eventType, reason, string(claim.Status.Phase), "%s", message)
	}
}
