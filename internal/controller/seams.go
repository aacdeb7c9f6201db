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
	corev1 "k8s.io/api/core/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// seams are the points where the reliability harness's deliberate bugs (package mutant) enter the
// pod lock and workload controllers, as they enter the lock engine (lockengine/seams.go): a
// decision the controller takes through this table instead of directly. A build with the mutants tag swaps in
// broken ones (mutants.go) for the bugs LOCKWARDEN_MUTANT names; every other build keeps these,
// and no decision holds a branch for a bug.
var seams = struct {
	// takesHolderRole says whether markStandby takes the role label holder from a pod that
	// carries it: always, since markStandby runs only for a pod that no longer holds its lock
	// or is terminating.
	takesHolderRole func(pod *corev1.Pod) bool
	// resumesFor says whether followClaim resumes a workload object for its claim: only while
	// the claim holds.
	resumesFor func(claim *locksv1alpha1.LockClaim) bool
	// podHold is the hold of a pod's claim that followClaim marks the pod with: podHold, by the
	// claim's status or the lock record naming that claim with that pod.
	podHold func(pod *corev1.Pod, claim *locksv1alpha1.LockClaim, lock *locksv1alpha1.DistributedLock) (podHoldOf, bool)
	// recordNames says whether the lock record names the claim, which followClaim requires
	// before it takes the holder label from the lock's other pods: recordNames.
	recordNames func(lock *locksv1alpha1.DistributedLock, claim *locksv1alpha1.LockClaim) bool
}{
	takesHolderRole: func(*corev1.Pod) bool { return true },
	podHold:         podHold,
	recordNames:     recordNames,
	resumesFor:      func(claim *locksv1alpha1.LockClaim) bool { return claim.Status.Phase == locksv1alpha1.ClaimHeld },
}
