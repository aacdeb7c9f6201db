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

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// LockClaimReconciler adds the release finalizer to claims created without it (by hand or by
// kubectl apply; lockctl and the pod lock controller set it at creation), off the grant path.
// Everything else a claim goes through, its lock's pass decides and writes
// (DistributedLockReconciler): one writer per lock.
type LockClaimReconciler struct {
	client.Client
}

// Reconcile adds the finalizer, so that no lock is taken for a claim that could vanish without
// releasing it (the lock's pass also refuses to grant a claim without it).
func (r *LockClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &locksv1alpha1.LockClaim{}
	if err := r.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !claim.DeletionTimestamp.IsZero() || !controllerutil.AddFinalizer(claim, locksv1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, claim))
}

// SetupWithManager watches claims that lack the finalizer.
func (r *LockClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	lacksFinalizer := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(o, locksv1alpha1.Finalizer)
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&locksv1alpha1.LockClaim{}, builder.WithPredicates(lacksFinalizer, predicate.Funcs{
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Named("lockclaim").
		Complete(r)
}
