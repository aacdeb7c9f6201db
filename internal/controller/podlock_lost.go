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
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// This file holds what the pod lock controller does for a pod that held its lock and whose claim
// is gone while it runs: confirm the claim is gone (claimGone), then tell the pod and, under
// lossPolicy Evict, evict it (claimLost). podlock_controller.go's Reconcile decides when; a pod
// whose claim ended but still exists is followClaim's.

// claimGone confirms on the API server that the claim called name, missing from the cache, is
// gone: the claim and pod caches are fed by separate watches, and a pod that carries its token
// while the cache does not show its claim yet (just after a restart, say) must not be told it lost
// the lock, let alone be evicted.
func (r *PodLockReconciler) claimGone(ctx context.Context, namespace, name string) (bool, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	return claimGoneFrom(ctx, reader, namespace, name)
}

// claimGoneFrom says whether reader (the API server) has no claim called name in namespace: a list
// by name, since the controllers list claims and never get them.
func claimGoneFrom(ctx context.Context, reader client.Reader, namespace, name string) (bool, error) {
	list := &locksv1alpha1.LockClaimList{}
	err := reader.List(ctx, list, client.InNamespace(namespace), client.MatchingFieldsSelector{
		Selector: fields.OneTermEqualSelector("metadata.name", name)})
	return err == nil && len(list.Items) == 0, err
}

// claimLost answers a pod that held its lock and whose claim was deleted while it ran: the pod
// no longer holds the lock (the lock's pass released it), and nothing inside the pod knows. It is
// told by a Warning event, never given a new claim (a pod that lost its lock must not quietly get
// a new token), and under lossPolicy Evict it is evicted, as a holder that lost its hold is.
func (r *PodLockReconciler) claimLost(ctx context.Context, pod *corev1.Pod, lockName, name string) (ctrl.Result, error) {
	r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, locksv1alpha1.ReasonClaimDeleted, "WaitForLock",
		"LockClaim %s was deleted while this pod held lock %s with fencing token %s: the pod no longer holds the lock and is not queued again; delete the pod to queue again",
		name, lockName, pod.Annotations[locksv1alpha1.PodFencingTokenAnnotation])
	evict := false
	for _, name := range lockNamesOf(lockName) {
		lock := &locksv1alpha1.DistributedLock{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, lock); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return ctrl.Result{}, err
		}
		// Of several locks, any one whose lossPolicy is Evict evicts the pod.
		evict = evict || lock.Spec.LossPolicy == locksv1alpha1.LossPolicyEvict
	}
	if !evict {
		return ctrl.Result{}, nil
	}
	if err := r.Guard.Check(); err != nil {
		return ctrl.Result{}, err
	}
	err := r.evictions.evict(ctx, pod, pod.UID)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return ctrl.Result{}, nil // gone or replaced meanwhile
	}
	cond, _, retry := evictionOutcome(pod.Name, err)
	if cond.Type == "" {
		return ctrl.Result{}, fmt.Errorf("evicting pod %s: %w", pod.Name, err)
	}
	r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, cond.Reason, "Evict", "%s", cond.Message)
	if retry {
		return ctrl.Result{RequeueAfter: evictionRetry}, nil
	}
	return ctrl.Result{}, nil
}
