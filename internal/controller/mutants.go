//go:build mutants

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
	"github.com/lockwarden/lockwarden/internal/mutant"
)

// In a build with the mutants tag, the pod lock and workload controllers' seams (seams.go) take the deliberate
// bugs that LOCKWARDEN_MUTANT lists. docs/reliability.md says which checker catches each.
func init() {
	if mutant.Active(mutant.KeepHolderLabel) {
		next := seams.takesHolderRole
		seams.takesHolderRole = func(pod *corev1.Pod) bool {
			// Only a terminating pod loses the label; one whose hold ended keeps it.
			return !pod.DeletionTimestamp.IsZero() && next(pod)
		}
	}
	if mutant.Active(mutant.TerminatingHolderLabel) {
		next := seams.takesHolderRole
		seams.takesHolderRole = func(pod *corev1.Pod) bool {
			// A terminating holder keeps the label until its pod is gone.
			return pod.DeletionTimestamp.IsZero() && next(pod)
		}
	}
	if mutant.Active(mutant.RecordAnyHolder) {
		next := seams.podHold
		seams.podHold = func(pod *corev1.Pod, claim *locksv1alpha1.LockClaim, lock *locksv1alpha1.DistributedLock) (podHoldOf, bool) {
			// A waiting pod takes the record's first hold for its own, whoever's it is.
			if hold, ok := next(pod, claim, lock); ok || claim.Status.Phase != locksv1alpha1.ClaimPending || lock == nil {
				return hold, ok
			}
			if holders := lock.Status.CurrentHolders(); len(holders) > 0 {
				return podHoldOf{token: holders[0].FencingToken, identity: holders[0].Identity}, true
			}
			return podHoldOf{}, false
		}
		// The same bug in the pod path's other reading of the record: any holder will do.
		seams.recordNames = func(lock *locksv1alpha1.DistributedLock, _ *locksv1alpha1.LockClaim) bool {
			return len(lock.Status.CurrentHolders()) > 0
		}
	}
	if mutant.Active(mutant.ResumeUnheld) {
		next := seams.resumesFor
		seams.resumesFor = func(claim *locksv1alpha1.LockClaim) bool {
			// A queued claim lets its object run before it holds.
			return claim.Status.Phase == locksv1alpha1.ClaimPending || next(claim)
		}
	}
}
