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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
)

// Pure functions computing a DistributedLock's status from what a pass observed.

// setLockConditions sets BackendReady from the backend check (nil problem = usable) and Ready:
// claims on it can be granted, which takes a usable backend and a key no other lock took first
// (nil conflict).
func setLockConditions(lock *locksv1alpha1.DistributedLock, problem, conflict *registry.UnusableError, backendName string) {
	cond := metav1.Condition{
		Type:               locksv1alpha1.ConditionBackendReady,
		Status:             metav1.ConditionTrue,
		Reason:             locksv1alpha1.ReasonBackendReachable,
		Message:            "Backend " + backendName + " is ready",
		ObservedGeneration: lock.Generation,
	}
	if problem != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, problem.Reason, problem.Message
	}
	meta.SetStatusCondition(&lock.Status.Conditions, cond)
	cond.Type = locksv1alpha1.ConditionReady
	if problem == nil && conflict != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, conflict.Reason, conflict.Message
	}
	meta.SetStatusCondition(&lock.Status.Conditions, cond)
	lock.Status.ObservedGeneration = lock.Generation
}
