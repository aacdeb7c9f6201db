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
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// This file holds when a pod whose claim ended queues again with a new claim (queueAgain) and how
// (requeue). An ended claim used to be final for its pod, since a pod that lost its lock must not
// quietly get a new token. That holds for a pod the lock let start (gated, then ungated), which
// acts on its token with nothing to tell it otherwise. It does not hold for the two kinds of pod
// below, and keeping them out for good turned each outage longer than a lease, each lost node and
// each re-created lock (a GitOps replace) into one candidate fewer, until no replica could lead:
//   - a Standby pod learns that it lost from its role label, which moves at once (the Service
//     follows it); it queues again and, if granted, gets a new token;
//   - a pod still gated never ran, whatever ended its claim (its lock deleted, the queue full).
// A wait that timed out stays over: its limit was the owner's choice. A claim whose lock was
// deleted is replaced once the lock exists again: a new claim would fail as long as the old lock
// is still being deleted.

// requeueAfterEnd is how long after its claim ended a pod queues again, at least: a claim that
// ends again at once (the queue full, the pod's node still lost) then costs a claim per this
// long, not a loop. The lock's own lockDelaySeconds holds the new claim back further if set.
const requeueAfterEnd = 10 * time.Second

// queueAgain says whether pod queues again after its claim ended, and how long from now until it
// may: a Standby or still-gated pod after any end but a timeout; after its lock was deleted, only
// once the lock exists again (locksExist); after its node was lost, only once the node is Ready
// again (nodeReady), or it would be granted, and labelled holder, on a node nobody reaches. A pod
// that one of its locks' lossPolicy Evict is to stop (evictionDue) waits for that instead: queued
// again, it would run on.
func queueAgain(pod *corev1.Pod, claim *locksv1alpha1.LockClaim, locksExist, nodeReady, evictionDue bool, now time.Time) (again bool, wait time.Duration) {
	reason := acquiredReason(claim)
	standby := pod.Annotations[locksv1alpha1.PodLockWaitAnnotation] == locksv1alpha1.PodLockWaitStandby
	switch {
	case claim.Status.Phase == locksv1alpha1.ClaimTimedOut, evictionDue, !standby && !hasLockGate(pod):
		return false, 0
	case reason == locksv1alpha1.ReasonLockNotFound && !locksExist:
		return false, 0
	case reason == locksv1alpha1.ReasonHolderTerminated && !nodeReady:
		// The pod is alive (the caller knows), so its node ended the hold: look again later.
		return true, max(requeueAfterEnd, claimEnded(claim).Add(requeueAfterEnd).Sub(now))
	}
	return true, max(0, claimEnded(claim).Add(requeueAfterEnd).Sub(now))
}

// claimEnded is when claim ended, as near as its status tells: its release, else the last change
// of its conditions.
func claimEnded(claim *locksv1alpha1.LockClaim) time.Time {
	if claim.Status.ReleaseTime != nil {
		return claim.Status.ReleaseTime.Time
	}
	var last time.Time
	for _, c := range claim.Status.Conditions {
		if c.LastTransitionTime.After(last) {
			last = c.LastTransitionTime.Time
		}
	}
	return last
}

// followEnded answers a pod whose claim ended: it queues again when queueAgain says so (at once,
// or in a while), else it is told, once per look, that it is not queued again. Either way it is
// labelled standby.
func (r *PodLockReconciler) followEnded(ctx context.Context, pod *corev1.Pod, claim *locksv1alpha1.LockClaim) (ctrl.Result, error) {
	lockName := locksv1alpha1.LocksLabel(claim.Spec.Locks())
	if err := r.markStandby(ctx, pod, lockName); err != nil {
		return ctrl.Result{}, err
	}
	locks, err := existingLocks(ctx, r.Client, pod.Namespace, claim.Spec.Locks())
	if err != nil {
		return ctrl.Result{}, err
	}
	evictionDue := evictionFor(claim, locks, pod) == evictPod
	nodeReady, err := r.nodeReady(ctx, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	again, wait := queueAgain(pod, claim, len(locks) == len(claim.Spec.Locks()), nodeReady, evictionDue, time.Now())
	switch {
	case again && wait > 0:
		return ctrl.Result{RequeueAfter: wait}, nil
	case again:
		return ctrl.Result{}, r.requeue(ctx, pod, claim)
	}
	r.Recorder.Eventf(pod, claim, corev1.EventTypeWarning, "LockNotHeld", "WaitForLock",
		"LockClaim %s for lock %s ended with phase %s; delete the pod to queue again", claim.Name, lockName, claim.Status.Phase)
	return ctrl.Result{}, nil
}

// nodeReady says whether the pod's node is Ready, as the manager's cache has it (the lock engine
// watches Nodes); a pod not bound to a node has nothing to wait for.
func (r *PodLockReconciler) nodeReady(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if pod.Spec.NodeName == "" {
		return true, nil
	}
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// requeue replaces pod's ended claim with a new one (replaceOwnedClaim), and says so on the pod.
func (r *PodLockReconciler) requeue(ctx context.Context, pod *corev1.Pod, ended *locksv1alpha1.LockClaim) error {
	if err := replaceOwnedClaim(ctx, r.Client, r.Recorder, podOwner(pod), ended); err != nil {
		return err
	}
	r.Recorder.Eventf(pod, ended, corev1.EventTypeNormal, "QueuedAgain", "WaitForLock",
		"LockClaim %s for lock %s ended with phase %s (%s); the pod queues again with a new claim, and gets a new fencing token if it is granted",
		ended.Name, locksv1alpha1.LocksLabel(ended.Spec.Locks()), ended.Status.Phase, acquiredReason(ended))
	return nil
}
