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
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/claimrights"
	"github.com/lockwarden/lockwarden/internal/fairqueue"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
	"github.com/lockwarden/lockwarden/internal/metrics"
)

// PodLockReconciler serves pods that ask for a lock by annotation (docs/design.md §3, Pods): it creates
// the pod's LockClaim, owned by the pod, and once the claim holds the lock it writes the fencing
// token and holder identity onto the pod and lifts the pod's scheduling gate, in one write, so
// that a gated pod is scheduled only when it holds the lock and its app can read the token from
// a downward-API volume at its first start. The claim's mode comes from the pod's lock-mode
// annotation, read once when the claim is created (a claim's mode is immutable).
//
// Granting, renewal and release stay with the lock's own pass (lockengine.Reconciler): a pod's
// claim is an ordinary claim with holder.podName set, released when the pod dies and
// garbage-collected after it.
//
// This file holds Reconcile, its steps and SetupWithManager. The claim is found and made by the
// path it shares with the workload controller (owned_claim.go, from the annotations that
// annotated_claim.go reads); whether it holds is podlock_hold.go; marking the pod holder,
// podlock_holder.go; the role label back to standby, podlock_role.go; a claim gone while the pod
// held, podlock_lost.go.
type PodLockReconciler struct {
	client.Client
	// Recorder emits events on the pod, where its owner looks first.
	Recorder events.EventRecorder
	// MaxConcurrentReconciles bounds parallel pod reconciles (default 4): lifting a gate is on
	// the handoff's critical path.
	MaxConcurrentReconciles int
	// Guard, when set, vetoes lifting a gate once this process has stalled (leaderguard): a
	// deposed leader's stale cache must not let a pod start.
	Guard *leaderguard.Guard

	// Pods reads and watches the cluster's pods (the compact pod cache; the manager's cache has
	// none).
	Pods PodReader

	// APIReader reads from the API server, not the cache: a claim missing from the cache is
	// confirmed gone there before its pod is told it lost it (nil: the client).
	APIReader client.Reader

	// Metrics, when set, receives the failover times (lockwarden_standby_failover_seconds).
	Metrics *metrics.Metrics

	// ClaimRights, when set, is asked before a pod's claim is made: only a pod whose service
	// account may create LockClaims in its namespace gets one (nil: every annotated pod does).
	ClaimRights *claimrights.Checker
	// Queue is how the work queue hands out pods: by namespace turns, each namespace within its
	// bound (internal/fairqueue).
	Queue fairqueue.Options

	// evictions evicts a pod that lost its claim while it ran, under lossPolicy Evict.
	evictions podEvictions
	// failovers times how long a lock goes without a pod labelled holder.
	failovers *failoverClock
}

// Reconcile creates the claim of an annotated pod and, once it is held, annotates and ungates
// the pod; the role label follows the claim (podlock_role.go).
func (r *PodLockReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Pods.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	lockName, asks, err := r.asksForLock(ctx, pod)
	if !asks || err != nil {
		return ctrl.Result{}, err
	}

	name := podClaimName(pod.Name, pod.UID, lockName)
	claim, err := r.ownClaim(ctx, pod, name, lockName)
	switch {
	case errors.Is(err, errForgedClaim):
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "ForeignLockClaim", "WaitForLock",
			"LockClaim %s is controlled by this pod but is not the claim lockwarden makes for it (one for lock %s whose holder is the pod alone, without holder.identity): the pod waits for lock %s until that claim is deleted",
			name, lockName, lockName)
		return ctrl.Result{}, r.markStandby(ctx, pod, lockName)
	case errors.Is(err, errForeignClaim):
		ctrl.LoggerFrom(ctx).V(1).Info("Claim name taken by an earlier pod's claim; waiting for its removal", "claim", name)
		return ctrl.Result{}, r.markStandby(ctx, pod, lockName)
	case err != nil:
		return ctrl.Result{}, err
	case claim == nil && heldBefore(pod):
		if gone, err := r.claimGone(ctx, pod.Namespace, name); !gone || err != nil {
			return ctrl.Result{}, err // the claim's own event brings the cache up to date
		}
		if err := r.markStandby(ctx, pod, lockName); err != nil {
			return ctrl.Result{}, err
		}
		return r.claimLost(ctx, pod, lockName, name)
	case claim == nil:
		if allowed, retry, err := r.mayClaim(ctx, pod, lockName); !allowed || err != nil {
			return ctrl.Result{RequeueAfter: retry}, errors.Join(err, r.markStandby(ctx, pod, lockName))
		}
		if claim, err = createOwnedClaim(ctx, r.Client, r.Recorder, podOwner(pod), name); err != nil || claim == nil {
			return ctrl.Result{}, errors.Join(err, r.markStandby(ctx, pod, lockName))
		}
	}
	return r.followClaim(ctx, pod, claim)
}

// podClaimName is the name of the claim made for pod (with UID uid) and the locks of label.
func podClaimName(pod string, uid types.UID, label string) string {
	return locksv1alpha1.PodClaimNameOfLocks(pod, uid, lockNamesOf(label))
}

// asksForLock says whether the pod goes on to its claim, and names its lock. A pod that has
// finished, or carries the gate without the annotation, or is terminating, or names no valid
// lock, stops here: with an event for a mistake, and with the role label standby for an
// annotated pod that is terminating or names no valid lock. A lock-wait value that is neither
// Gated nor Standby is reported and goes on (the pod waits as Gated).
func (r *PodLockReconciler) asksForLock(ctx context.Context, pod *corev1.Pod) (lockName string, asks bool, err error) {
	lockName, annotated := pod.Annotations[locksv1alpha1.PodLockAnnotation]
	switch {
	case pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed:
		return "", false, nil
	case !annotated && pod.DeletionTimestamp.IsZero():
		// Only gated pods get here (see podAsksForLock): a gate nobody will lift.
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "LockAnnotationMissing", "WaitForLock",
			"The scheduling gate %s is lifted only for a pod annotated %s=<DistributedLock name>; add the annotation or remove the gate",
			locksv1alpha1.PodSchedulingGate, locksv1alpha1.PodLockAnnotation)
		return "", false, nil
	case !annotated:
		return "", false, nil
	case !pod.DeletionTimestamp.IsZero():
		// A terminating holder keeps its lock until its pod is gone, but takes no new traffic.
		return "", false, r.markStandby(ctx, pod, lockName)
	}
	label, problem := annotatedLocks(pod.Annotations)
	if problem != nil {
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, problem.reason, "WaitForLock", "%s", problem.message)
		return "", false, r.markStandby(ctx, pod, lockName)
	}
	if problem := lockWaitProblem(pod.Annotations, label); problem != nil {
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, problem.reason, "WaitForLock", "%s", problem.message)
	}
	return label, true, nil
}

// followClaim brings the pod in line with its claim: marked holder (token, label, gate lifted)
// once the claim holds, by its own status or by the lock record (podHold), after any other pod of
// the lock whose hold ended has lost its label; labelled standby while it waits or after its claim
// ended.
func (r *PodLockReconciler) followClaim(ctx context.Context, pod *corev1.Pod, claim *locksv1alpha1.LockClaim) (ctrl.Result, error) {
	lockName := locksv1alpha1.LocksLabel(claim.Spec.Locks())
	// The claim's mode and priority are immutable: the pod keeps its place (or its hold) as made.
	for _, changed := range annotationsChanged(pod.Annotations, claim) {
		r.Recorder.Eventf(pod, claim, corev1.EventTypeWarning, changed.reason, "WaitForLock", "%s", changed.message)
	}
	switch claim.Status.Phase {
	case locksv1alpha1.ClaimHeld, locksv1alpha1.ClaimPending, "":
		locks := make([]*locksv1alpha1.DistributedLock, 0, 1)
		for _, name := range claim.Spec.Locks() {
			lock, err := r.cachedLock(ctx, pod.Namespace, name)
			if err != nil {
				return ctrl.Result{}, err
			}
			locks = append(locks, lock)
		}
		// A claim of several locks holds by its own status alone: its records name it one by one
		// before it holds them all.
		var recordOf *locksv1alpha1.DistributedLock
		if len(locks) == 1 {
			recordOf = locks[0]
		}
		hold, held := seams.podHold(pod, claim, recordOf)
		if !held {
			r.reportWaiting(pod, claim)
			break
		}
		if pod.Labels[locksv1alpha1.PodRoleLabel] != locksv1alpha1.PodRoleHolder {
			for _, lock := range locks {
				if lock != nil && !seams.recordNames(lock, claim) {
					// The record says who else holds; the engine writes it before the claim.
					return ctrl.Result{RequeueAfter: lockCacheBehind}, nil
				}
			}
			if err := r.clearStaleHolders(ctx, pod, lockName, locks); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, r.markHolder(ctx, pod, claim, hold)
	default:
		// Lost, Released, TimedOut, Failed: a pod that may act on its token is not given another
		// claim; a Standby or still-gated one may be (podlock_requeue.go).
		return r.followEnded(ctx, pod, claim)
	}
	return ctrl.Result{}, r.markStandby(ctx, pod, lockName)
}

// cachedLock is the pod's lock from the manager's cache; nil when there is none.
func (r *PodLockReconciler) cachedLock(ctx context.Context, namespace, name string) (*locksv1alpha1.DistributedLock, error) {
	lock := &locksv1alpha1.DistributedLock{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, lock); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return lock, nil
}

// ownClaim returns the pod's claim called name (the name lockctl gives a pod's claim, so that
// lockctl in an annotated pod attaches to the same claim); nil when there is none, and
// errForeignClaim when a claim of that name is not the pod's.
func (r *PodLockReconciler) ownClaim(ctx context.Context, pod *corev1.Pod, name, lockName string) (*locksv1alpha1.LockClaim, error) {
	return controlledClaim(ctx, r.Client, pod, name, lockName, podOwner(pod).holder)
}

// podOwner is the pod as the owner of its claim (owned_claim.go). A pod that waits gated (the
// default lock-wait) but came without the gate is told so when its claim is made: it was not held
// back, and runs beside the holder. That is what happens where the admission policy that adds the
// gate is not installed (clusters before 1.36, a namespace its selector leaves out) or skips the
// pod (one created bound to a node).
func podOwner(pod *corev1.Pod) claimOwner {
	o := claimOwner{obj: pod, apiVersion: "v1", kind: "Pod", annotations: ownerPod,
		holder: locksv1alpha1.ClaimHolder{PodName: pod.Name}, label: locksv1alpha1.PodClaimLabel}
	if pod.Annotations[locksv1alpha1.PodLockWaitAnnotation] != locksv1alpha1.PodLockWaitStandby && !hasLockGate(pod) {
		o.notWaitingReason = "NotGated"
		o.notWaiting = fmt.Sprintf("the pod came without the scheduling gate %s, so it runs without waiting for the lock: "+
			"give its template the gate, let the admission policy add it (docs/install.md), or annotate it %s: %s if running beside the holder is meant",
			locksv1alpha1.PodSchedulingGate, locksv1alpha1.PodLockWaitAnnotation, locksv1alpha1.PodLockWaitStandby)
	}
	return o
}

// hasLockGate says whether the pod carries lockwarden's scheduling gate.
func hasLockGate(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == locksv1alpha1.PodSchedulingGate
	})
}

// mayClaim says whether the pod's service account may create LockClaims in its namespace
// (mayClaimFor).
func (r *PodLockReconciler) mayClaim(ctx context.Context, pod *corev1.Pod, lockName string) (allowed bool, retry time.Duration, err error) {
	return mayClaimFor(ctx, r.ClaimRights, r.Recorder, pod, pod.Spec.ServiceAccountName, lockName)
}

// reportWaiting repeats on the pod why its claim waits when that is a mistake to fix (a missing
// lock or backend, a namespace the backend does not serve) rather than a queue to wait in.
func (r *PodLockReconciler) reportWaiting(pod *corev1.Pod, claim *locksv1alpha1.LockClaim) {
	for _, c := range claim.Status.Conditions {
		if c.Type != locksv1alpha1.ConditionAcquired {
			continue
		}
		switch c.Reason {
		case locksv1alpha1.ReasonLockNotFound, locksv1alpha1.ReasonBackendNotFound, locksv1alpha1.ReasonNamespaceNotAllowed:
			r.Recorder.Eventf(pod, claim, corev1.EventTypeWarning, c.Reason, "WaitForLock", "LockClaim %s: %s", claim.Name, c.Message)
		}
	}
}

// PodReader reads and watches the cluster's pods: the pod cache (podcache.Cache), whose reads
// give what it keeps of a pod; unit tests stand in for it over a fake client.
type PodReader interface {
	// Get writes the pod named key into pod, or returns a NotFound error.
	Get(ctx context.Context, key types.NamespacedName, pod *corev1.Pod) error
	// ListWithRole returns the pods of namespace whose role label is role.
	ListWithRole(namespace, role string) ([]corev1.Pod, error)
	// Informer is the pod informer as a controller-runtime source takes it.
	Informer() cache.Informer
}

// podAsksForLock selects pods with the lock annotation or the lockwarden scheduling gate.
func podAsksForLock(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return false
	}
	if _, ok := pod.Annotations[locksv1alpha1.PodLockAnnotation]; ok {
		return true
	}
	return hasLockGate(pod)
}

// SetupWithManager watches annotated or gated pods, the claims they own, and the lock records
// that grant them.
func (r *PodLockReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 4
	}
	var err error
	if r.evictions, err = newPodEvictions(mgr); err != nil {
		return err
	}
	var observe func(time.Duration)
	if r.Metrics != nil {
		observe = func(d time.Duration) { r.Metrics.StandbyFailoverSeconds.Observe(d.Seconds()) }
	}
	r.failovers = newFailoverClock(time.Now, observe)
	// The pods come from the pod cache's informer, not For(&corev1.Pod{}): that would start a
	// full Pod informer in the manager's cache (which refuses it). A claim wakes the pod that
	// owns it, as Owns would.
	pods := r.Pods.Informer()
	return ctrl.NewControllerManagedBy(mgr).
		WatchesRawSource(&source.Informer{Informer: pods, Handler: &handler.EnqueueRequestForObject{},
			Predicates: []predicate.Predicate{predicate.NewPredicateFuncs(podAsksForLock)}}).
		WatchesRawSource(&source.Informer{Informer: pods, Handler: r.failovers.deletedHolders()}).
		Watches(&locksv1alpha1.LockClaim{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &corev1.Pod{}, handler.OnlyControllerOwner())).
		Watches(&locksv1alpha1.DistributedLock{}, recordedPods()).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles, NewQueue: r.Queue.NewQueue()}).
		Named("podlock").
		Complete(r)
}
