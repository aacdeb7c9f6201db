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
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// This file holds what becomes of a workload object that runs again after its hold ended: the
// hold ends when the object finishes, and some kinds can be sent back from finished to running on
// the same object (argo retry, argo resubmit --memoized). Such a run would go on beside the next
// holder, on a token that is no longer the lock's.

// ranAgain says whether obj runs again after its hold ended: it was resumed with a token once
// (heldBefore), its claim ended because it finished (HolderTerminated), and it is neither finished
// nor suspended now (the caller, past asksForLock, knows it has not finished).
func ranAgain(k workloads.Kind, obj *unstructured.Unstructured, claim *locksv1alpha1.LockClaim) bool {
	return (claim.Status.Phase == locksv1alpha1.ClaimReleased || claim.Status.Phase == locksv1alpha1.ClaimFailed) &&
		acquiredReason(claim) == locksv1alpha1.ReasonHolderTerminated &&
		heldBefore(obj) && !workloads.Suspended(k, obj)
}

// runsAgain answers an object that runs again after its hold ended, with a Warning
// RunningWithoutLock either way: a kind that can be held back again (an Argo Workflow) is
// suspended, its ended claim replaced by a new one, and it resumes with a new token once that
// holds; another (a PipelineRun, which is pending only before it starts) runs on without the
// lock, and its owner is told.
func (r *WorkloadLockReconciler) runsAgain(ctx context.Context, obj *unstructured.Unstructured, ended *locksv1alpha1.LockClaim) error {
	kind, lockName := r.Kind.GVK.Kind, locksv1alpha1.LocksLabel(ended.Spec.Locks())
	patch, ok, err := workloads.SuspendAgainPatch(r.Kind, obj.GetUID())
	if err != nil {
		return err
	}
	if !ok {
		r.Recorder.Eventf(obj, ended, corev1.EventTypeWarning, "RunningWithoutLock", "WaitForLock",
			"The %s runs again after its hold of lock %s ended (LockClaim %s, %s), and a %s cannot be held back once it has started: it runs without the lock; cancel it, and create a new %s to queue",
			kind, lockName, ended.Name, ended.Status.Phase, kind, kind)
		return nil
	}
	if err := r.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("suspending %s %s again: %w", kind, obj.GetName(), err))
	}
	r.Recorder.Eventf(obj, ended, corev1.EventTypeWarning, "RunningWithoutLock", "WaitForLock",
		"The %s runs again after its hold of lock %s ended (LockClaim %s, %s): it is suspended, queues again with a new claim, and resumes with a new fencing token once that claim holds",
		kind, lockName, ended.Name, ended.Status.Phase)
	return replaceOwnedClaim(ctx, r.Client, r.Recorder, r.owner(obj), ended)
}
