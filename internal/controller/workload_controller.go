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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/claimrights"
	"github.com/lockwarden/lockwarden/internal/fairqueue"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// WorkloadLockReconciler serves workload objects of one kind that ask for a lock by annotation
// (docs/design.md §3 Workloads): a Job, a Tekton PipelineRun or an Argo Workflow annotated
// locks.lockwarden.io/lock gets a claim held by the object and owned by it, waits in its own
// suspended state (a Job's spec.suspend, which the admission policy sets at creation), and is
// resumed, with its fencing token, once the claim holds. The lock engine decides the rest: the
// hold ends when the object finishes or is deleted.
//
// This file holds Reconcile, its steps and SetupWithManager. The claim is found and made by the
// path it shares with the pod lock controller (owned_claim.go, from the annotations that
// annotated_claim.go reads); the resume with the token is workload_resume.go; what a kind's
// objects look like (suspended, finished, their service account) is internal/workloads.
type WorkloadLockReconciler struct {
	client.Client
	// Cache reads the objects of Kind: the manager's cache, since the manager's client reads
	// unstructured objects from the API server itself.
	Cache client.Reader
	// APIReader confirms on the API server that a claim missing from the cache is gone (nil: the
	// client).
	APIReader client.Reader
	// Kind is the workload kind served; it must be Suspendable.
	Kind     workloads.Kind
	Recorder events.EventRecorder
	// Guard, when set, vetoes the resume of a run once this process has stalled (leaderguard).
	Guard *leaderguard.Guard
	// ClaimRights, when set, is asked before an object's claim is made: only an object whose pods'
	// service account may create LockClaims in its namespace gets one (nil: every annotated
	// object does).
	ClaimRights *claimrights.Checker
	// Queue is how the work queue hands out objects: by namespace turns, each namespace within
	// its bound (internal/fairqueue).
	Queue fairqueue.Options
}

// Reconcile makes the annotated object's claim and, once it holds, resumes the object.
func (r *WorkloadLockReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.newObject()
	if err := r.Cache.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	lockName, asks := r.asksForLock(obj)
	if !asks {
		return ctrl.Result{}, nil
	}
	name := podClaimName(obj.GetName(), obj.GetUID(), lockName) // WorkloadClaimName, for one lock or several
	claim, err := r.ownClaim(ctx, obj, name, lockName)
	switch {
	case errors.Is(err, errForgedClaim):
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "ForeignLockClaim", "WaitForLock",
			"LockClaim %s is controlled by this %s but is not the claim lockwarden makes for it (one for lock %s whose holder is the %s alone, without holder.identity): the %s waits for lock %s until that claim is deleted",
			name, r.Kind.GVK.Kind, lockName, r.Kind.GVK.Kind, r.Kind.GVK.Kind, lockName)
		return ctrl.Result{}, nil
	case errors.Is(err, errForeignClaim):
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "ClaimNameTaken", "WaitForLock",
			"LockClaim %s exists and is not this %s's own: the %s waits for lock %s until it is deleted", name, r.Kind.GVK.Kind, r.Kind.GVK.Kind, lockName)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	case claim == nil && heldBefore(obj):
		// Its claim was deleted after the run was resumed: it is not queued again (a run that
		// lost its lock must not quietly get a new token), and is told.
		return ctrl.Result{}, r.claimDeleted(ctx, obj, name, lockName)
	case claim == nil:
		if allowed, retry, err := r.mayClaim(ctx, obj, lockName); !allowed || err != nil {
			return ctrl.Result{RequeueAfter: retry}, err
		}
		if claim, err = createOwnedClaim(ctx, r.Client, r.Recorder, r.owner(obj), name); err != nil || claim == nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.followClaim(ctx, obj, claim)
}

// claimDeleted tells a running object whose claim was deleted after it was resumed that it no
// longer holds the lock: the lock's pass released the hold, and may have granted it to another
// while the object runs on. The object's own events are where its owner looks; a repeat of the
// warning on a later event of the object folds into a series.
func (r *WorkloadLockReconciler) claimDeleted(ctx context.Context, obj *unstructured.Unstructured, name, lockName string) error {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if gone, err := claimGoneFrom(ctx, reader, obj.GetNamespace(), name); !gone || err != nil {
		return err // the claim's own event brings the cache up to date
	}
	kind := r.Kind.GVK.Kind
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, locksv1alpha1.ReasonClaimDeleted, "WaitForLock",
		"LockClaim %s was deleted while this %s held lock %s with fencing token %s: the lock was released and may be granted to another while the %s runs on; it is not queued again (create a new %s to queue)",
		name, kind, lockName, obj.GetAnnotations()[locksv1alpha1.PodFencingTokenAnnotation], kind, kind)
	return nil
}

// mayClaim says whether the service account the object runs its pods as may create LockClaims in
// its namespace, as PodLockReconciler.mayClaim does for a pod.
func (r *WorkloadLockReconciler) mayClaim(ctx context.Context, obj *unstructured.Unstructured, lockName string) (allowed bool, retry time.Duration, err error) {
	return mayClaimFor(ctx, r.ClaimRights, r.Recorder, obj, r.Kind.ServiceAccount(obj), lockName)
}

// newObject is an empty object of the served kind, for reads.
func (r *WorkloadLockReconciler) newObject() *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.Kind.GVK)
	return obj
}

// asksForLock says whether obj goes on to its claim, and names its lock: an object annotated with
// a valid lock name that has not finished and is not being deleted. A name that is not valid gets
// a Warning event.
func (r *WorkloadLockReconciler) asksForLock(obj *unstructured.Unstructured) (string, bool) {
	if _, annotated := obj.GetAnnotations()[locksv1alpha1.PodLockAnnotation]; !annotated || !obj.GetDeletionTimestamp().IsZero() {
		return "", false
	}
	if outcome, _ := workloads.Finished(r.Kind, obj); outcome != workloads.Running {
		return "", false
	}
	if manager, elsewhere := workloads.ManagedElsewhere(r.Kind, obj); elsewhere {
		kind := r.Kind.GVK.Kind
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "ManagedElsewhere", "WaitForLock",
			"The %s is suspended and resumed by %s, not by lockwarden: it gets no claim and is never patched, and the annotation %s holds nothing back. "+
				"Take the lock inside its pods instead (lockctl acquire in an init container, or lockctl run), or leave the %s out of the queue",
			kind, manager, locksv1alpha1.PodLockAnnotation, kind)
		return "", false
	}
	label, problem := annotatedLocks(obj.GetAnnotations())
	if problem != nil {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, problem.reason, "WaitForLock", "%s", problem.message)
		return "", false
	}
	return label, true
}

// ownClaim returns the object's claim called name for lockName; nil when there is none,
// errForeignClaim when a claim of that name is not the object's, and errForgedClaim when it is
// the object's but not one the controller makes.
func (r *WorkloadLockReconciler) ownClaim(ctx context.Context, obj *unstructured.Unstructured, name, lockName string) (*locksv1alpha1.LockClaim, error) {
	return controlledClaim(ctx, r.Client, obj, name, lockName, r.owner(obj).holder)
}

// owner is obj as the owner of its claim (owned_claim.go): the claim's holder is obj itself. An
// object created running gets its claim, but does not wait for it.
func (r *WorkloadLockReconciler) owner(obj *unstructured.Unstructured) claimOwner {
	o := claimOwner{obj: obj, apiVersion: obj.GetAPIVersion(), kind: obj.GetKind(), annotations: ownerWorkload,
		holder: locksv1alpha1.ClaimHolder{Object: &locksv1alpha1.HolderObject{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName()}},
		label: locksv1alpha1.WorkloadClaimLabel}
	if !workloads.Suspended(r.Kind, obj) {
		o.notWaitingReason = "NotSuspended"
		o.notWaiting = fmt.Sprintf("the %s was created running, so it does not wait for the lock (create it with %s, or let the admission policy do it)",
			r.Kind.GVK.Kind, r.Kind.SuspendedState())
	}
	return o
}

// followClaim resumes the object, with its token, once its claim holds; and says on the object
// why a claim that ended without holding leaves it suspended.
func (r *WorkloadLockReconciler) followClaim(ctx context.Context, obj *unstructured.Unstructured, claim *locksv1alpha1.LockClaim) error {
	switch {
	case seams.resumesFor(claim):
		return r.resume(ctx, obj, claim)
	case ranAgain(r.Kind, obj, claim):
		return r.runsAgain(ctx, obj, claim)
	case claim.Status.Phase == locksv1alpha1.ClaimTimedOut, claim.Status.Phase == locksv1alpha1.ClaimFailed:
		if workloads.Suspended(r.Kind, obj) {
			r.Recorder.Eventf(obj, claim, corev1.EventTypeWarning, "LockNotAcquired", "WaitForLock",
				"LockClaim %s for lock %s ended with phase %s (%s): the %s stays suspended and is not queued again; delete it, or create a new one to queue again",
				claim.Name, locksv1alpha1.LocksLabel(claim.Spec.Locks()), claim.Status.Phase, acquiredReason(claim), r.Kind.GVK.Kind)
		}
	}
	return nil
}

// acquiredReason is the reason of a claim's Acquired condition.
func acquiredReason(claim *locksv1alpha1.LockClaim) string {
	for _, c := range claim.Status.Conditions {
		if c.Type == locksv1alpha1.ConditionAcquired {
			return c.Reason
		}
	}
	return "no reason given"
}

// SetupWithManager watches the objects of the kind that carry the lock annotation, and the claims
// they own (a change of phase).
func (r *WorkloadLockReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if !r.Kind.Suspendable() {
		return fmt.Errorf("workload kind %s cannot wait suspended for a lock", r.Kind)
	}
	annotated := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetAnnotations()[locksv1alpha1.PodLockAnnotation]
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(r.newObject(), builder.WithPredicates(annotated)).
		Owns(&locksv1alpha1.LockClaim{}, builder.WithPredicates(claimPhaseChanged())).
		Named("workload-" + strings.ToLower(r.Kind.GVK.Kind)).
		WithOptions(controller.Options{NewQueue: r.Queue.NewQueue()}).
		Complete(r)
}

// claimPhaseChanged passes a claim's creation, deletion and changes of phase: the only news a
// workload object acts on.
func claimPhaseChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*locksv1alpha1.LockClaim)
			n, okNew := e.ObjectNew.(*locksv1alpha1.LockClaim)
			return !okOld || !okNew || o.Status.Phase != n.Status.Phase
		},
	}
}
