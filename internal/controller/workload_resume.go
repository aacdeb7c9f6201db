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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// This file holds how a workload object whose claim holds is resumed: its fencing token and
// holder identity written and its suspended state cleared, in one patch that internal/workloads
// makes for its kind (resume). workload_controller.go's followClaim decides when; podlock_holder.go
// is the same step for a pod.

// resume gives the object its claim's token and lets it run, in one UID-preconditioned patch
// (workloads.ResumePatch); an object that runs already (created running) only gets the token
// annotations. Nothing is written when the object carries the token already and runs.
func (r *WorkloadLockReconciler) resume(ctx context.Context, obj *unstructured.Unstructured, claim *locksv1alpha1.LockClaim) error {
	token := podTokenValue(claim, podHoldOf{token: claim.Status.FencingToken})
	suspended := workloads.Suspended(r.Kind, obj)
	if obj.GetAnnotations()[locksv1alpha1.PodFencingTokenAnnotation] == token && heldBefore(obj) {
		// Resumed with this hold's token already (the one patch writes both): a hold resumes its
		// object once. Suspended since, it was suspended by its owner (kubectl patch --suspend),
		// whose business that is; the hold lasts until the object finishes or is deleted.
		return nil
	}
	var patch []byte
	var err error
	if suspended {
		patch, err = workloads.ResumePatch(r.Kind, obj.GetUID(), token, claim.Status.HolderIdentity)
	} else {
		patch, err = workloads.TokenPatch(obj.GetUID(), token, claim.Status.HolderIdentity)
	}
	if err != nil {
		return err
	}
	if err := r.Guard.Check(); err != nil {
		return err
	}
	if err := r.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			// Refused (an admission policy that forbids template edits, a missing RBAC verb):
			// retried with backoff, and said where the object's owner looks, since its claim
			// holds the lock meanwhile and every claim behind it waits.
			r.Recorder.Eventf(obj, claim, corev1.EventTypeWarning, "ResumeFailed", "WaitForLock",
				"Could not resume the %s with its fencing token %s: %v; its LockClaim %s holds lock %s meanwhile and every claim queued behind it waits; retried",
				r.Kind.GVK.Kind, token, err, claim.Name, locksv1alpha1.LocksLabel(claim.Spec.Locks()))
		}
		return fmt.Errorf("resuming %s %s with its fencing token: %w", r.Kind.GVK.Kind, obj.GetName(), err)
	}
	msg := fmt.Sprintf("Lock %s held with fencing token %s", claim.Spec.LockName, token)
	if len(claim.Spec.LockNames) > 0 {
		msg = fmt.Sprintf("Locks %s held together with fencing tokens %s", locksv1alpha1.LocksLabel(claim.Spec.Locks()), token)
	}
	if suspended {
		msg += "; resumed"
	}
	r.Recorder.Eventf(obj, claim, corev1.EventTypeNormal, "LockAcquired", "WaitForLock", "%s", msg)
	return nil
}
