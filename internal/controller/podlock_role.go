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
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The role label follows the hold (docs/design.md §3, Standby pods): every pod with the lock
// annotation carries locks.lockwarden.io/role, holder while its claim holds the lock and the pod
// is not terminating, standby otherwise. A Service that selects role: holder then sends traffic
// only to the holders, and an app reads its role from a downward-API file. The holder value is
// written in the same patch as the token annotation (markHolder); this file moves the label back
// to standby.

// staleHolders are the pods among pods (the namespace's pods labelled holder) that ask for lock
// and still carry the holder label although the lock record (recorded: the claims that
// status.holders names) no longer names their claim: their hold ended while they live (a lost
// node, a lost or deleted claim). They lose the label before the next holder gets it (markHolder),
// so that a Service never serves the old and the new holder at once. self, the pod about to be
// labelled, is never stale.
func staleHolders(pods []corev1.Pod, self types.UID, lock string, recorded map[string]bool) []*corev1.Pod {
	var stale []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.UID == self || p.Labels[locksv1alpha1.PodRoleLabel] != locksv1alpha1.PodRoleHolder {
			continue
		}
		if label, _ := parseLockAnnotation(p.Annotations[locksv1alpha1.PodLockAnnotation]); label != lock {
			continue
		}
		if !recorded[podClaimName(p.Name, p.UID, lock)] {
			stale = append(stale, p)
		}
	}
	return stale
}

// podDeletionCostAnnotation tells a ReplicaSet which of its pods to remove first when it scales
// down: the lowest cost goes first (Kubernetes' controller.kubernetes.io/pod-deletion-cost).
const podDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// holderDeletionCost is the pod-deletion-cost a Standby pod gets when it becomes a holder: the
// highest there is, so that a rolling update or a scale-down removes the holder after every other
// pod of its ReplicaSet. The lock then moves once per rolling update (to a pod of the new
// ReplicaSet, since the old one's other pods are gone by then) instead of once per old pod, and
// scaling down removes standbys, not the active replica.
const holderDeletionCost = "2147483647"

// needsDeletionCost says whether markHolder should give the pod holderDeletionCost: a Standby pod
// without a pod-deletion-cost of its own (one the pod's template set is the owner's to keep).
func needsDeletionCost(pod *corev1.Pod) bool {
	_, set := pod.Annotations[podDeletionCostAnnotation]
	return pod.Annotations[locksv1alpha1.PodLockWaitAnnotation] == locksv1alpha1.PodLockWaitStandby && !set
}

// givenDeletionCost says whether the pod carries the pod-deletion-cost that markHolder gave it: a
// Standby pod with holderDeletionCost. It is the holder's alone: a standby that kept it would be
// the last its ReplicaSet removes, so that a scale-down would take the live standbys first.
func givenDeletionCost(pod *corev1.Pod) bool {
	return pod.Annotations[locksv1alpha1.PodLockWaitAnnotation] == locksv1alpha1.PodLockWaitStandby &&
		pod.Annotations[podDeletionCostAnnotation] == holderDeletionCost
}

// rolePatch is the strategic merge patch that sets the pod's role label, with the pod's UID as a
// precondition (a new pod of the same name is never labelled for the old one's hold), and takes
// the pod-deletion-cost away when dropCost is set.
func rolePatch(uid types.UID, role string, dropCost bool) ([]byte, error) {
	metadata := map[string]any{
		"uid":    uid,
		"labels": map[string]string{locksv1alpha1.PodRoleLabel: role},
	}
	if dropCost {
		metadata["annotations"] = map[string]any{podDeletionCostAnnotation: nil}
	}
	return json.Marshal(map[string]any{"metadata": metadata})
}

// lockCacheBehind is how soon a pod whose claim holds is looked at again when the cached lock
// record does not name its claim yet (the lock and claim caches are fed by separate watches,
// and the engine writes the record first): the record is what says which other pods still hold.
const lockCacheBehind = 100 * time.Millisecond

// clearStaleHolders takes the holder label from the lock's other pods whose hold ended
// (staleHolders) before pod, whose claim lock's record names, is labelled holder: the two labels
// are written by two reconciles of two pods, which nothing else orders. lock nil (deleted) leaves
// the other pods to their own reconciles.
func (r *PodLockReconciler) clearStaleHolders(ctx context.Context, pod *corev1.Pod, lockName string, locks []*locksv1alpha1.DistributedLock) error {
	// A claim is recorded when every one of its locks' records names it (several locks: all).
	names := map[string]int{}
	for _, lock := range locks {
		if lock == nil {
			return nil
		}
		for _, h := range lock.Status.CurrentHolders() {
			names[h.Claim]++
		}
	}
	recorded := map[string]bool{}
	for claim, n := range names {
		recorded[claim] = n == len(locks)
	}
	labelled, err := r.Pods.ListWithRole(pod.Namespace, locksv1alpha1.PodRoleHolder)
	if err != nil {
		return err
	}
	for _, p := range staleHolders(labelled, pod.UID, lockName, recorded) {
		if err := r.markStandby(ctx, p, lockName); err != nil {
			return err
		}
	}
	return nil
}

// markStandby labels the pod standby unless it already is. A pod that loses the holder role
// ends a stretch of the lock with one holder fewer, which the failover clock starts timing.
func (r *PodLockReconciler) markStandby(ctx context.Context, pod *corev1.Pod, lockName string) error {
	was := pod.Labels[locksv1alpha1.PodRoleLabel]
	dropCost := givenDeletionCost(pod)
	if was == locksv1alpha1.PodRoleStandby && !dropCost {
		return nil
	}
	if was == locksv1alpha1.PodRoleHolder && !seams.takesHolderRole(pod) {
		return nil
	}
	patch, err := rolePatch(pod.UID, locksv1alpha1.PodRoleStandby, dropCost)
	if err != nil {
		return err
	}
	// No leader guard: taking the holder role away never lets anything start, so a deposed
	// leader that writes it does no harm, and a terminating holder must lose its traffic now.
	if err := r.Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("labelling pod %s %s: %w", pod.Name, locksv1alpha1.PodRoleStandby, err))
	}
	if was == locksv1alpha1.PodRoleHolder {
		r.failovers.holderLeft(types.NamespacedName{Namespace: pod.Namespace, Name: lockName})
	}
	return nil
}

// failoverClock times how long a lock goes without a pod labelled holder: from the moment this
// manager takes the holder role from a pod (it terminates, its claim ends, or it is deleted while
// labelled holder) to the moment it labels the next holder of the same lock. It is what a
// Service that selects role: holder sees, and what lockwarden_standby_failover_seconds reports.
type failoverClock struct {
	now     func() time.Time
	observe func(time.Duration)

	mu sync.Mutex
	// left holds, per lock, when the earliest holder not yet followed by a new one left.
	left map[types.NamespacedName]time.Time
}

func newFailoverClock(now func() time.Time, observe func(time.Duration)) *failoverClock {
	return &failoverClock{now: now, observe: observe, left: map[types.NamespacedName]time.Time{}}
}

// failoverForgetAfter bounds how long the clock remembers a holder that no new one followed (its
// lock was deleted, or nobody waits): such a gap is no failover, and the map must not grow with
// every lock that ever lost a holder.
const failoverForgetAfter = time.Hour

// holderLeft records that a holder of lock stopped being labelled holder. The earliest time is
// kept: on a semaphore, the gap is timed from the first of its holders that left.
func (c *failoverClock) holderLeft(lock types.NamespacedName) {
	if c == nil {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for l, t := range c.left {
		if now.Sub(t) > failoverForgetAfter {
			delete(c.left, l)
		}
	}
	if _, ok := c.left[lock]; !ok {
		c.left[lock] = now
	}
}

// holderCame records that a pod of lock was labelled holder, and reports the gap since the
// holder before it left, when one did (a lock's first holder is no failover).
func (c *failoverClock) holderCame(lock types.NamespacedName) {
	if c == nil {
		return
	}
	c.mu.Lock()
	left, ok := c.left[lock]
	delete(c.left, lock)
	c.mu.Unlock()
	if ok && c.observe != nil {
		c.observe(c.now().Sub(left))
	}
}

// deletedHolders is an event handler that starts the clock when a pod labelled holder is deleted
// without this manager having seen it terminate (a forced deletion, or a deletion while the
// manager was not the leader). It enqueues nothing: a deleted pod has nothing left to reconcile.
func (c *failoverClock) deletedHolders() handler.EventHandler {
	return handler.Funcs{DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		pod, ok := e.Object.(*corev1.Pod)
		if !ok || pod.Labels[locksv1alpha1.PodRoleLabel] != locksv1alpha1.PodRoleHolder {
			return
		}
		if lock, ok := pod.Annotations[locksv1alpha1.PodLockAnnotation]; ok {
			c.holderLeft(types.NamespacedName{Namespace: pod.Namespace, Name: lock})
		}
	}}
}
