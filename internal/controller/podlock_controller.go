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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
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
		if claim, err = r.createClaim(ctx, pod, lockName, name); err != nil || claim == nil {
			return ctrl.Result{}, errors.Join(err, r.markStandby(ctx, pod, lockName))
		}
	}
	return r.followClaim(ctx, pod, claim)
}

// Several locks: a pod annotated with a comma-separated list of 2 to 8 locks holds them together
// (spec.lockNames). In this file lockName is then the list in name order, joined by commas
// (locksv1alpha1.LocksLabel): the key of the pod's hold, its claim's name and its messages.

// parseLockAnnotation reads the lock annotation's value: one lock, or 2 to 8 separated by commas;
// the result is the locks in name order joined by commas, or what is wrong with the value, to
// follow it in a message ("Annotation lock=<value> <problem>").
func parseLockAnnotation(value string) (label, problem string) {
	if !strings.Contains(value, ",") {
		if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
			return "", fmt.Sprintf("is not a DistributedLock name: %s", errs[0])
		}
		return value, ""
	}
	var names []string
	seen := map[string]bool{}
	for n := range strings.SplitSeq(value, ",") {
		n = strings.TrimSpace(n)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return "", fmt.Sprintf("lists %q, which is not a DistributedLock name (name one lock, or 2 to 8 separated by commas): %s", n, errs[0])
		}
		if seen[n] {
			return "", fmt.Sprintf("names %q twice", n)
		}
		seen[n] = true
		names = append(names, n)
	}
	if len(names) > maxLocksTogether {
		return "", fmt.Sprintf("names %d locks: at most %d are held together", len(names), maxLocksTogether)
	}
	slices.Sort(names)
	return locksv1alpha1.LocksLabel(names), ""
}

// maxLocksTogether is how many locks one claim holds at most (spec.lockNames' CEL bound).
const maxLocksTogether = 8

// lockNamesOf are the locks of a label that parseLockAnnotation made.
func lockNamesOf(label string) []string { return strings.Split(label, ",") }

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
	label, problem := parseLockAnnotation(lockName)
	if problem != "" {
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "InvalidLockAnnotation", "WaitForLock",
			"Annotation %s=%q %s; no claim was made", locksv1alpha1.PodLockAnnotation, lockName, problem)
		return "", false, r.markStandby(ctx, pod, lockName)
	}
	lockName = label
	if !lockWaitValid(pod) {
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "InvalidLockWaitAnnotation", "WaitForLock",
			"Annotation %s=%q is neither %s nor %s: the pod waits as %s (not scheduled until it holds lock %s)",
			locksv1alpha1.PodLockWaitAnnotation, pod.Annotations[locksv1alpha1.PodLockWaitAnnotation],
			locksv1alpha1.PodLockWaitGated, locksv1alpha1.PodLockWaitStandby, locksv1alpha1.PodLockWaitGated, lockName)
	}
	return lockName, true, nil
}

// followClaim brings the pod in line with its claim: marked holder (token, label, gate lifted)
// once the claim holds, by its own status or by the lock record (podHold), after any other pod of
// the lock whose hold ended has lost its label; labelled standby while it waits or after its claim
// ended.
func (r *PodLockReconciler) followClaim(ctx context.Context, pod *corev1.Pod, claim *locksv1alpha1.LockClaim) (ctrl.Result, error) {
	lockName := locksv1alpha1.LocksLabel(claim.Spec.Locks())
	if annotated, changed := modeChanged(pod, claim); changed {
		// The claim's mode is immutable: the pod keeps its place (or its hold) in that mode.
		r.Recorder.Eventf(pod, claim, corev1.EventTypeWarning, "LockModeChanged", "WaitForLock",
			"Annotation %s is %s, but LockClaim %s was made with mode %s, which cannot change: the pod holds or waits for lock %s in mode %s; replace the pod to hold the lock in another mode",
			locksv1alpha1.PodLockModeAnnotation, annotated, claim.Name, modeOf(claim), lockName, modeOf(claim))
	}
	if annotated, changed := priorityChanged(pod, claim); changed {
		r.Recorder.Eventf(pod, claim, corev1.EventTypeWarning, "LockPriorityChanged", "WaitForLock",
			"Annotation %s is %s, but LockClaim %s was made with priority %d, which cannot change: the pod holds or waits for lock %s at priority %d; replace the pod to wait at another priority",
			locksv1alpha1.LockPriorityAnnotation, annotated, claim.Name, claim.Spec.Priority, lockName, claim.Spec.Priority)
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
		// Lost, Released, TimedOut, Failed: final. The pod is not given another claim, because a
		// pod that lost its lock must not quietly get a new token; its owner restarts it.
		r.Recorder.Eventf(pod, claim, corev1.EventTypeWarning, "LockNotHeld", "WaitForLock",
			"LockClaim %s for lock %s ended with phase %s; delete the pod to queue again", claim.Name, lockName, claim.Status.Phase)
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

// errForeignClaim says that a claim of the owner's claim name is not the owner's own: it goes with
// an earlier pod (or object) of that name, and its deletion wakes the owner.
var errForeignClaim = errors.New("the claim name is taken by a claim that is not the owner's own")

// ownClaim returns the pod's claim called name (the name lockctl gives a pod's claim, so that
// lockctl in an annotated pod attaches to the same claim); nil when there is none, and
// errForeignClaim when a claim of that name is not the pod's.
func (r *PodLockReconciler) ownClaim(ctx context.Context, pod *corev1.Pod, name, lockName string) (*locksv1alpha1.LockClaim, error) {
	return controlledClaim(ctx, r.Client, pod, name, lockName, locksv1alpha1.ClaimHolder{PodName: pod.Name})
}

// errForgedClaim says that a claim of the owner's claim name is controlled by the owner but is
// not the claim the controller makes for it: another lock, another holder, or a holder.identity
// of its own. Anyone who may create claims can set an owner reference, and an identity copied
// from a lock's status once let such a claim share another pod's hold; the controller neither
// follows nor marks an owner for a claim it would not have made.
var errForgedClaim = errors.New("the claim of the owner's name is not the claim the controller makes for it")

// controlledClaim returns the claim called name in owner's namespace when owner controls it and it
// is the claim the controller makes (madeFor lockName and holder); nil when there is none,
// errForeignClaim when a claim of that name has another controller, and errForgedClaim when
// owner controls it but the controller would not have made it.
func controlledClaim(ctx context.Context, c client.Reader, owner metav1.Object, name, lockName string, holder locksv1alpha1.ClaimHolder) (*locksv1alpha1.LockClaim, error) {
	claim := &locksv1alpha1.LockClaim{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, claim); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !metav1.IsControlledBy(claim, owner):
		return nil, errForeignClaim
	case !madeFor(claim, lockName, holder):
		return nil, errForgedClaim
	}
	return claim, nil
}

// madeFor says whether claim is one the controller makes for holder on lock lockName: that lock,
// and that holder exactly (a pod, or a workload object), with no identity of its own.
func madeFor(claim *locksv1alpha1.LockClaim, lockName string, holder locksv1alpha1.ClaimHolder) bool {
	return locksv1alpha1.LocksLabel(claim.Spec.Locks()) == lockName && claim.Spec.Holder != nil && equality.Semantic.DeepEqual(*claim.Spec.Holder, holder)
}

// heldBefore says whether the pod held its lock once: the pod lock controller writes the token
// annotation only on a pod whose claim holds.
func heldBefore(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[locksv1alpha1.PodFencingTokenAnnotation]
	return ok
}

// claimGone confirms on the API server that the claim called name, missing from the cache, is
// gone: the claim and pod caches are fed by separate watches, and a pod that carries its token
// while the cache does not show its claim yet (just after a restart, say) must not be told it lost
// the lock, let alone be evicted. A list by name, since the controller lists claims and never gets
// them.
func (r *PodLockReconciler) claimGone(ctx context.Context, namespace, name string) (bool, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
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

// createClaim creates the pod's claim for lockName, called name; nil, without error, when the
// pod's annotations cannot make one (an event says why) or the cache is behind our own create.
func (r *PodLockReconciler) createClaim(ctx context.Context, pod *corev1.Pod, lockName, name string) (*locksv1alpha1.LockClaim, error) {
	mode, ok := annotatedMode(pod.Annotations)
	if !ok {
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "InvalidLockModeAnnotation", "WaitForLock",
			"Annotation %s=%q is not a lock mode: use %s or %s (absent means %s)", locksv1alpha1.PodLockModeAnnotation,
			pod.Annotations[locksv1alpha1.PodLockModeAnnotation], locksv1alpha1.LockModeShared, locksv1alpha1.LockModeExclusive, locksv1alpha1.LockModeShared)
		return nil, nil
	}
	priority, ok := annotatedPriority(pod.Annotations)
	if !ok {
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "InvalidLockPriorityAnnotation", "WaitForLock", "%s",
			invalidPriorityMessage(pod.Annotations))
		return nil, nil
	}
	controller := true
	claim := &locksv1alpha1.LockClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace,
			Name:      name,
			Labels:    map[string]string{locksv1alpha1.PodClaimLabel: podLabelValue(pod.Name)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: &controller}},
		},
		Spec: locksv1alpha1.LockClaimSpec{LockName: lockName, Mode: mode, Priority: priority, Holder: &locksv1alpha1.ClaimHolder{PodName: pod.Name}},
	}
	if names := lockNamesOf(lockName); len(names) > 1 {
		claim.Spec.LockName, claim.Spec.LockNames = "", names
	}
	if err := r.Create(ctx, claim); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil // a cache behind our own create; the claim's event wakes us
		}
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "ClaimFailed", "WaitForLock",
			"Could not create LockClaim %s for lock %s: %v", name, lockName, err)
		return nil, err
	}
	r.Recorder.Eventf(pod, claim, corev1.EventTypeNormal, "ClaimCreated", "WaitForLock",
		"Created LockClaim %s for lock %s", name, lockName)
	return claim, nil
}

// mayClaim says whether the pod's service account may create LockClaims in its namespace, which
// the claim made on the pod's behalf needs (claimrights): anyone who creates a pod may run it as
// that account, so the annotation gives the pod no more than the account could take with lockctl.
func (r *PodLockReconciler) mayClaim(ctx context.Context, pod *corev1.Pod, lockName string) (allowed bool, retry time.Duration, err error) {
	return mayClaimFor(ctx, r.ClaimRights, r.Recorder, pod, pod.Spec.ServiceAccountName, lockName)
}

// mayClaimFor asks rights (nil: everyone may) whether serviceAccount, which obj (an annotated pod
// or workload) runs as, may create LockClaims in obj's namespace. A refused obj gets a Warning
// event and is looked at again once the answer is old (retry), so that a RoleBinding made
// afterwards takes effect.
func mayClaimFor(ctx context.Context, rights *claimrights.Checker, recorder events.EventRecorder, obj client.Object,
	serviceAccount, lockName string) (allowed bool, retry time.Duration, err error) {
	if rights == nil {
		return true, 0, nil
	}
	v, err := rights.MayClaim(ctx, obj.GetNamespace(), serviceAccount)
	if err != nil {
		return false, 0, err
	}
	if !v.Allowed {
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonClaimNotAllowed, "WaitForLock", "%s",
			claimNotAllowedMessage(obj.GetNamespace(), serviceAccount, lockName))
	}
	return v.Allowed, v.RetryAfter, nil
}

// ReasonClaimNotAllowed is the reason of the Warning event on a pod or workload object whose
// service account may not create the claim its annotation asks for.
const ReasonClaimNotAllowed = "ClaimNotAllowed"

// claimNotAllowedMessage says why no claim was made for lock on behalf of a workload running as
// serviceAccount of namespace, and how to allow it.
func claimNotAllowedMessage(namespace, serviceAccount, lock string) string {
	if serviceAccount == "" {
		serviceAccount = claimrights.DefaultServiceAccount
	}
	return fmt.Sprintf("Service account %s/%s may not create LockClaims in namespace %s, so no claim is made for lock %s on its behalf: "+
		"bind it to a Role that may (the lockctl Role of config/samples/pods/lockctl-rbac.yaml, for one); this is looked at again within seconds",
		namespace, serviceAccount, namespace, lock)
}

// annotatedMode is the mode a lock-mode annotation asks for (on a pod or a workload object): empty
// when the annotation is absent (the API server then defaults the claim to Shared), and ok false
// when its value is not a mode.
func annotatedMode(annotations map[string]string) (mode locksv1alpha1.LockMode, ok bool) {
	value, set := annotations[locksv1alpha1.PodLockModeAnnotation]
	if !set {
		return "", true
	}
	mode = locksv1alpha1.LockMode(value)
	return mode, mode.IsValid()
}

// annotatedPriority is the priority a lock-priority annotation asks for (on a pod or a workload
// object): 0 when the annotation is absent, and ok false when its value is not a 32-bit whole
// number.
func annotatedPriority(annotations map[string]string) (priority int32, ok bool) {
	value, set := annotations[locksv1alpha1.LockPriorityAnnotation]
	if !set {
		return 0, true
	}
	p, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(p), true
}

// invalidPriorityMessage says what is wrong with a lock-priority annotation.
func invalidPriorityMessage(annotations map[string]string) string {
	return fmt.Sprintf("Annotation %s=%q is not a priority: use a whole number from %d to %d (absent means 0; higher is granted first); no claim was made",
		locksv1alpha1.LockPriorityAnnotation, annotations[locksv1alpha1.LockPriorityAnnotation], math.MinInt32, math.MaxInt32)
}

// modeOf is the claim's mode, Shared when the claim predates modes.
func modeOf(claim *locksv1alpha1.LockClaim) locksv1alpha1.LockMode {
	if claim.Spec.Mode == "" {
		return locksv1alpha1.LockModeShared
	}
	return claim.Spec.Mode
}

// modeChanged says whether the pod's lock-mode annotation no longer asks for the mode its existing
// claim was made with (someone edited or removed it after the claim was created), and describes
// the annotation for a message: its quoted value, or that it is absent.
func modeChanged(pod *corev1.Pod, claim *locksv1alpha1.LockClaim) (annotated string, changed bool) {
	mode, ok := annotatedMode(pod.Annotations)
	annotated = strconv.Quote(string(mode))
	if ok && mode == "" {
		mode, annotated = locksv1alpha1.LockModeShared, "absent (Shared)"
	}
	return annotated, !ok || mode != modeOf(claim)
}

// priorityChanged says whether the pod's lock-priority annotation no longer asks for its existing
// claim's priority, and describes the annotation for a message: its quoted value, or that it is
// absent.
func priorityChanged(pod *corev1.Pod, claim *locksv1alpha1.LockClaim) (annotated string, changed bool) {
	priority, ok := annotatedPriority(pod.Annotations)
	value, set := pod.Annotations[locksv1alpha1.LockPriorityAnnotation]
	annotated = strconv.Quote(value)
	if !set {
		annotated = "absent (0)"
	}
	return annotated, !ok || priority != claim.Spec.Priority
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

// markHolder writes the hold's token and identity as annotations and the role label holder, and
// removes the scheduling gate, in one patch: whoever sees the gate gone or the role holder also
// sees the token.
func (r *PodLockReconciler) markHolder(ctx context.Context, pod *corev1.Pod, claim *locksv1alpha1.LockClaim, hold podHoldOf) error {
	token := podTokenValue(claim, hold)
	gated := slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == locksv1alpha1.PodSchedulingGate
	})
	lastToGo := needsDeletionCost(pod)
	if pod.Annotations[locksv1alpha1.PodFencingTokenAnnotation] == token &&
		pod.Annotations[locksv1alpha1.PodHolderAnnotation] == hold.identity && !gated &&
		pod.Labels[locksv1alpha1.PodRoleLabel] == locksv1alpha1.PodRoleHolder && !lastToGo {
		return nil
	}
	patch, err := holderPatch(pod.UID, token, hold.identity, gated, lastToGo)
	if err != nil {
		return err
	}
	if err := r.Guard.Check(); err != nil {
		return err
	}
	// Read before the patch, which overwrites pod with the API server's answer.
	cameNow := pod.Labels[locksv1alpha1.PodRoleLabel] != locksv1alpha1.PodRoleHolder
	if err := r.Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("annotating pod %s with its fencing token: %w", pod.Name, err)
	}
	label := locksv1alpha1.LocksLabel(claim.Spec.Locks())
	if cameNow {
		r.failovers.holderCame(types.NamespacedName{Namespace: pod.Namespace, Name: label})
	}
	msg := fmt.Sprintf("Lock %s held with fencing token %s", label, token)
	if len(claim.Status.Locks) > 0 {
		msg = fmt.Sprintf("Locks %s held together with fencing tokens %s", label, token)
	}
	if gated {
		msg += "; scheduling gate lifted"
	}
	r.Recorder.Eventf(pod, claim, corev1.EventTypeNormal, "LockAcquired", "WaitForLock", "%s", msg)
	return nil
}

// podTokenValue is the fencing-token annotation of a pod whose claim holds: the token; for a
// claim of several locks, LOCK=TOKEN pairs in name order joined by commas.
func podTokenValue(claim *locksv1alpha1.LockClaim, hold podHoldOf) string {
	if len(claim.Spec.LockNames) == 0 {
		return strconv.FormatInt(hold.token, 10)
	}
	pairs := make([]string, len(claim.Status.Locks))
	for i, part := range claim.Status.Locks {
		pairs[i] = fmt.Sprintf("%s=%d", part.LockName, part.FencingToken)
	}
	return strings.Join(pairs, ",")
}

// holderPatch is the strategic merge patch that marks a pod as the holder: it sets the token and
// holder annotations and the role label holder, with lastToGo the highest pod-deletion-cost
// (holderDeletionCost) and, when gated, deletes the lockwarden scheduling gate by its name,
// leaving every other gate and annotation alone. Its metadata.uid is a precondition (a patch whose uid
// differs from the stored pod's fails), so a new pod of the same name is never marked. There is
// no resourceVersion precondition: nothing the patch writes depends on the rest of the pod, and
// pods change often while they wait (the scheduler, the kubelet), which made an optimistic lock
// fail and retry under churn.
func holderPatch(uid types.UID, token, holder string, ungate, lastToGo bool) ([]byte, error) {
	type gateDelete struct {
		Patch string `json:"$patch"`
		Name  string `json:"name"`
	}
	annotations := map[string]string{
		locksv1alpha1.PodFencingTokenAnnotation: token,
		locksv1alpha1.PodHolderAnnotation:       holder,
	}
	if lastToGo {
		annotations[podDeletionCostAnnotation] = holderDeletionCost
	}
	p := map[string]any{
		"metadata": map[string]any{
			"uid":         uid,
			"labels":      map[string]string{locksv1alpha1.PodRoleLabel: locksv1alpha1.PodRoleHolder},
			"annotations": annotations,
		},
	}
	if ungate {
		p["spec"] = map[string]any{
			"schedulingGates": []gateDelete{{Patch: "delete", Name: locksv1alpha1.PodSchedulingGate}},
		}
	}
	return json.Marshal(p)
}

// podLabelValue fits a pod name into a label value (at most 63 characters).
func podLabelValue(pod string) string {
	if len(pod) <= validation.LabelValueMaxLength {
		return pod
	}
	sum := sha256.Sum256([]byte(pod))
	return hex.EncodeToString(sum[:])[:validation.LabelValueMaxLength]
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
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == locksv1alpha1.PodSchedulingGate
	})
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
