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
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// This file maps the objects the engine watches to the locks that care (SetupWithManager wires
// the watches): a claim to its locks, a pod, Node, heartbeat Lease or LockBackend to the locks of
// the claims that name it, through the field indexes of indexes.go. Workload objects map in
// holder_object.go.

// lockOfClaim maps a claim to the locks it names: one, or each of a several-lock claim's.
func (r *Reconciler) lockOfClaim(_ context.Context, o client.Object) []ctrl.Request {
	c, ok := o.(*locksv1alpha1.LockClaim)
	if !ok {
		return nil
	}
	names := claimLocks(c)
	reqs := make([]ctrl.Request, 0, len(names))
	for _, name := range names {
		lock := types.NamespacedName{Namespace: c.Namespace, Name: name}
		r.trace(TraceClaimEvent, lock, c.Name)
		reqs = append(reqs, ctrl.Request{NamespacedName: lock})
	}
	return reqs
}

// locksOfPod maps a pod to the locks of the claims held or queued for it.
func (r *Reconciler) locksOfPod(ctx context.Context, o client.Object) []ctrl.Request {
	return r.locksOfClaimsNaming(ctx, o, indexClaimPod, o.GetName(), podRecordKey(o.GetName()))
}

// locksOfNode maps a Node to the locks that judge holders by their node (holderNodeLossSeconds)
// and have claims for the pods bound to it, each lock once. Other locks' holders do not care.
func (r *Reconciler) locksOfNode(ctx context.Context, o client.Object) []ctrl.Request {
	pods, err := r.Pods.ListOnNode(o.GetName())
	if err != nil {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var reqs []ctrl.Request
	for i := range pods {
		for _, req := range r.locksOfPod(ctx, &pods[i]) {
			if seen[req.NamespacedName] {
				continue
			}
			seen[req.NamespacedName] = true
			lock := &locksv1alpha1.DistributedLock{}
			if err := r.Get(ctx, req.NamespacedName, lock); err == nil && lock.Spec.HolderNodeLossSeconds != nil {
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// locksOfClaimsNaming maps o to the locks of the claims whose field index holds key, and to the
// locks whose record names recordKey (indexLockRecord: a holder whose claim is already gone),
// each lock once.
func (r *Reconciler) locksOfClaimsNaming(ctx context.Context, o client.Object, index, key, recordKey string) []ctrl.Request {
	seen := map[string]bool{}
	var reqs []ctrl.Request
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
		}
	}
	claims := &locksv1alpha1.LockClaimList{}
	// Only the lock names are read: the cache's own objects will do, uncopied.
	if err := r.List(ctx, claims, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: key}, client.UnsafeDisableDeepCopy); err == nil {
		for i := range claims.Items {
			for _, name := range claimLocks(&claims.Items[i]) {
				add(name)
			}
		}
	}
	for _, req := range r.locksRecording(ctx, o.GetNamespace(), recordKey) {
		add(req.Name)
	}
	return reqs
}

// locksRecording maps recordKey (recordIndexKeys) to the locks of namespace ns whose record names it.
func (r *Reconciler) locksRecording(ctx context.Context, ns, recordKey string) []ctrl.Request {
	locks := &locksv1alpha1.DistributedLockList{}
	if err := r.List(ctx, locks, client.InNamespace(ns), client.MatchingFields{indexLockRecord: recordKey}); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(locks.Items))
	for i := range locks.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&locks.Items[i])})
	}
	return reqs
}

// locksOfBackend maps a LockBackend to the locks that use it.
func (r *Reconciler) locksOfBackend(ctx context.Context, o client.Object) []ctrl.Request {
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

// locksOfLease maps a heartbeat Lease to the locks of the claims that name it.
func (r *Reconciler) locksOfLease(ctx context.Context, o client.Object) []ctrl.Request {
	return r.locksOfClaimsNaming(ctx, o, indexClaimLease, o.GetName(), leaseRecordKey(o.GetName()))
}
