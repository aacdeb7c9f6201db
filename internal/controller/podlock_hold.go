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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// A pod learns of its grant from the lock record, as lockctl does (docs/design.md §3 Pods): the lock's
// pass names the claim in its DistributedLock's status.holders, with the pod's UID and the token,
// in the write that grants it, and writes the claim's Held status one write later. Lifting the
// gate on the record saves that write's wait (about 20 ms of a gated pod's handoff on the bench).
// The record names a claim only after the backend took the lock for it, and a deposed
// controller's record write fails its precondition, so it proves the grant as well as the claim's
// status does.

// podHoldOf is what marking a pod as the holder writes onto it: the hold's token and identity.
type podHoldOf struct {
	token    int64
	identity string
}

// podHold is the hold of pod's claim, if it holds: as the claim's status says once it is Held,
// and, while the claim's status still says Pending, as the lock record says when it names this
// claim by name and UID with this pod by name and UID as its holder. A claim in a final phase
// (Lost, Released, TimedOut, Failed) never holds, whatever a record in a cache behind it says,
// and neither does a claim the record names for another pod, or without its UID (a hold granted
// before the record kept claim UIDs is told by the claim's status alone).
func podHold(pod *corev1.Pod, claim *locksv1alpha1.LockClaim, lock *locksv1alpha1.DistributedLock) (podHoldOf, bool) {
	switch claim.Status.Phase {
	case locksv1alpha1.ClaimHeld:
		return podHoldOf{token: claim.Status.FencingToken, identity: claim.Status.HolderIdentity}, true
	case locksv1alpha1.ClaimPending, "":
	default:
		return podHoldOf{}, false
	}
	if lock == nil || claim.UID == "" || pod.UID == "" {
		return podHoldOf{}, false
	}
	for _, h := range lock.Status.CurrentHolders() {
		if h.Claim == claim.Name && h.ClaimUID == claim.UID && isPodHolder(h.Holder, pod.Name, pod.UID) {
			return podHoldOf{token: h.FencingToken, identity: h.Identity}, true
		}
	}
	return podHoldOf{}, false
}

// isPodHolder says whether a record's holder is the pod called name with that UID.
func isPodHolder(h *locksv1alpha1.RecordedHolder, name string, uid types.UID) bool {
	return h != nil && h.APIVersion == "v1" && h.Kind == "Pod" && h.Name == name && h.UID == uid
}

// recordNames says whether lock's record names claim (by name, and by UID where it has one).
func recordNames(lock *locksv1alpha1.DistributedLock, claim *locksv1alpha1.LockClaim) bool {
	for _, h := range lock.Status.CurrentHolders() {
		if h.Claim == claim.Name && (h.ClaimUID == "" || h.ClaimUID == claim.UID) {
			return true
		}
	}
	return false
}

// newPodHolders are the pods that the record now names as holders and the record before did not
// (by claim UID, so that a claim granted again is new): the pods a lock's status write may have
// just granted. before is nil for a lock seen for the first time.
func newPodHolders(namespace string, before, now []locksv1alpha1.LockHolder) []types.NamespacedName {
	had := make(map[types.UID]bool, len(before))
	for _, h := range before {
		had[h.ClaimUID] = true
	}
	var pods []types.NamespacedName
	for _, h := range now {
		if h.Holder == nil || h.Holder.APIVersion != "v1" || h.Holder.Kind != "Pod" || (h.ClaimUID != "" && had[h.ClaimUID]) {
			continue
		}
		pods = append(pods, types.NamespacedName{Namespace: namespace, Name: h.Holder.Name})
	}
	return pods
}

// recordedPods is the event handler that wakes the pods a lock record has just granted
// (newPodHolders), so that their gate is lifted from the record's write rather than the claim's
// Held write one write later.
func recordedPods() handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], pods []types.NamespacedName) {
		for _, p := range pods {
			q.Add(reconcile.Request{NamespacedName: p})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if lock, ok := e.Object.(*locksv1alpha1.DistributedLock); ok {
				enqueue(q, newPodHolders(lock.Namespace, nil, lock.Status.CurrentHolders()))
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			before, ok1 := e.ObjectOld.(*locksv1alpha1.DistributedLock)
			now, ok2 := e.ObjectNew.(*locksv1alpha1.DistributedLock)
			if ok1 && ok2 {
				enqueue(q, newPodHolders(now.Namespace, before.Status.CurrentHolders(), now.Status.CurrentHolders()))
			}
		},
	}
}
