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
	"errors"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// DistributedLockReconciler reports whether a lock's backend can be used and how many claims
// wait, and holds a deleted lock until its claims are done and its tokens can never be reissued.
// The holder and fencing token in its status are written by the claim reconciler, with a
// compare-and-swap; this reconciler never touches them.
type DistributedLockReconciler struct {
	client.Client
	// Backends finds the lock's backend.
	Backends *BackendResolver
}

// Reconcile updates one lock's conditions and queue length, or finishes its deletion.
func (r *DistributedLockReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	lock := &locksv1alpha1.DistributedLock{}
	if err := r.Get(ctx, req.NamespacedName, lock); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if lock.DeletionTimestamp.IsZero() && controllerutil.AddFinalizer(lock, locksv1alpha1.Finalizer) {
		if err := r.Update(ctx, lock); err != nil {
			return ctrl.Result{}, err
		}
	}
	claims, err := claimsOfLock(ctx, r.Client, lock.Namespace, lock.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !lock.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, lock, claims)
	}

	before := lock.DeepCopy()
	defer func() {
		if equality.Semantic.DeepEqual(before.Status, lock.Status) {
			return
		}
		// A merge patch of only what this pass changed (conditions, waiting): the holder and the
		// token belong to the claim reconciler's compare-and-swap.
		if err := r.Status().Patch(ctx, lock, client.MergeFrom(before)); err != nil {
			retErr = errors.Join(retErr, client.IgnoreNotFound(err))
		}
	}()

	lock.Status.Waiting = countWaiting(claims)
	_, name, err := r.Backends.ForLock(ctx, lock)
	var unusable *UnusableError
	if err != nil && !errors.As(err, &unusable) {
		return ctrl.Result{}, err
	}
	setLockConditions(lock, unusable, name)
	return ctrl.Result{}, nil
}

// reconcileDelete lets a lock go once no claim holds or waits for it (the claim reconciler fails
// them and releases the hold). A lock re-created under the same name issues tokens above its
// predecessor's at once: they come from resourceVersions (package fencing).
func (r *DistributedLockReconciler) reconcileDelete(ctx context.Context, lock *locksv1alpha1.DistributedLock, claims []locksv1alpha1.LockClaim) (ctrl.Result, error) {
	for i := range claims {
		if !isFinal(claims[i].Status.Phase) && claims[i].DeletionTimestamp.IsZero() {
			return ctrl.Result{}, nil // the claim watch wakes us when it ends
		}
		if isHeld(&claims[i]) {
			return ctrl.Result{}, nil
		}
	}
	if controllerutil.RemoveFinalizer(lock, locksv1alpha1.Finalizer) {
		return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, lock))
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches locks, their claims (queue length, deletion) and their backends.
func (r *DistributedLockReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&locksv1alpha1.DistributedLock{}).
		Watches(&locksv1alpha1.LockClaim{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []ctrl.Request {
				c := o.(*locksv1alpha1.LockClaim)
				return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.LockName}}}
			})).
		Watches(&locksv1alpha1.LockBackend{}, handler.EnqueueRequestsFromMapFunc(r.locksOfBackend)).
		Named("distributedlock").
		Complete(r)
}

func (r *DistributedLockReconciler) locksOfBackend(ctx context.Context, o client.Object) []ctrl.Request {
	list := &locksv1alpha1.DistributedLockList{}
	if err := r.List(ctx, list, client.MatchingFields{indexLockBackend: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
