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
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
	"github.com/lockwarden/lockwarden/internal/metrics"
)

// HolderEvictionReconciler carries out lossPolicy Evict: once a pod's claim is Lost, or Released
// because its node was not Ready for the lock's holderNodeLossSeconds, it evicts the pod through
// the Eviction API, so that a holder that runs on with a stale token stops and its controller
// creates a new pod, which queues again. It sits outside the lock's pass: the
// claim has left the lock's holders and queue by then, and an eviction can wait on a
// PodDisruptionBudget for as long as the budget says, which no lock pass may.
type HolderEvictionReconciler struct {
	client.Client
	// Pods reads the holders' pods (the compact pod cache; the manager's cache has none).
	Pods PodReader
	// Recorder emits the events of evictions.
	Recorder events.EventRecorder
	// Metrics counts evictions by result.
	Metrics *metrics.Metrics
	// Guard, when set, vetoes evictions once this process has stalled (leaderguard).
	Guard *leaderguard.Guard

	// evictions posts evictions (set up from the manager's config).
	evictions podEvictions
}

// evictionRetry is how soon an eviction a PodDisruptionBudget refused is tried again: the
// budget frees up as other pods become ready, which no event of ours tells.
const evictionRetry = 10 * time.Second

// evictionAction is what becomes of a claim under lossPolicy Evict.
type evictionAction int

const (
	// evictNothing: nothing to do (not lost, no pod, Notify, or already evicted).
	evictNothing evictionAction = iota
	// evictGone: the pod that held is gone, replaced or going: the loss needs no eviction.
	evictGone
	// evictPod: evict the holder pod.
	evictPod
)

// evictionFor decides what to do about claim, given the locks it names that exist and its holder
// pod (nil when absent). A claim of several locks is evicted for if any of them asks for it: its
// pod holds them all on one token set, and runs on with all of them once one is lost.
func evictionFor(claim *locksv1alpha1.LockClaim, locks []*locksv1alpha1.DistributedLock, pod *corev1.Pod) evictionAction {
	switch {
	case claim.Spec.Holder == nil, claim.Spec.Holder.PodName == "":
		return evictNothing
	case !slices.ContainsFunc(locks, func(l *locksv1alpha1.DistributedLock) bool { return asksEviction(claim, l, pod) }):
		return evictNothing
	case meta.IsStatusConditionTrue(claim.Status.Conditions, locksv1alpha1.ConditionEvicted):
		return evictNothing
	case pod == nil, pod.UID != claim.Status.PodUID, !pod.DeletionTimestamp.IsZero():
		return evictGone
	}
	return evictPod
}

// asksEviction says whether lock's lossPolicy asks for claim's pod to be evicted: Evict, and the
// claim lost its hold or its pod's node ended it.
func asksEviction(claim *locksv1alpha1.LockClaim, lock *locksv1alpha1.DistributedLock, pod *corev1.Pod) bool {
	return lock.Spec.LossPolicy == locksv1alpha1.LossPolicyEvict &&
		(claim.Status.Phase == locksv1alpha1.ClaimLost || nodeLossEnded(claim, lock, pod))
}

// nodeLossEnded says whether claim's hold was ended by its pod's node (holderNodeLossSeconds):
// Released with reason HolderTerminated while the pod it held for is still there, not
// terminating and not finished. The lock engine ends a pod's hold so for no other reason: a pod
// that died is gone, replaced or finished.
func nodeLossEnded(claim *locksv1alpha1.LockClaim, lock *locksv1alpha1.DistributedLock, pod *corev1.Pod) bool {
	cond := meta.FindStatusCondition(claim.Status.Conditions, locksv1alpha1.ConditionAcquired)
	return lock.Spec.HolderNodeLossSeconds != nil &&
		claim.Status.Phase == locksv1alpha1.ClaimReleased && cond != nil && cond.Reason == locksv1alpha1.ReasonHolderTerminated &&
		pod != nil && pod.UID == claim.Status.PodUID && pod.DeletionTimestamp.IsZero() &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// evictionOutcome is the Evicted condition an eviction attempt leaves on the claim, the metric
// result it counts as, and whether to try again later.
func evictionOutcome(podName string, err error) (cond metav1.Condition, result string, retry bool) {
	switch {
	case err == nil:
		return metav1.Condition{Type: locksv1alpha1.ConditionEvicted, Status: metav1.ConditionTrue,
			Reason:  locksv1alpha1.ReasonHolderEvicted,
			Message: fmt.Sprintf("Evicted pod %s: it lost the lock and may still run with a stale fencing token", podName)}, "evicted", false
	case apierrors.IsTooManyRequests(err):
		return metav1.Condition{Type: locksv1alpha1.ConditionEvicted, Status: metav1.ConditionFalse,
			Reason: locksv1alpha1.ReasonEvictionBlocked,
			Message: fmt.Sprintf("Eviction of pod %s refused: %v; retried every %s, never forced",
				podName, err, evictionRetry)}, "blocked", true
	}
	return metav1.Condition{}, "error", true
}

// Reconcile evicts the holder pod of a lost claim whose lock asks for it.
func (r *HolderEvictionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &locksv1alpha1.LockClaim{}
	if err := r.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !endedPodClaim(claim) {
		return ctrl.Result{}, nil
	}
	locks, err := existingLocks(ctx, r.Client, claim.Namespace, claim.Spec.Locks())
	if err != nil {
		return ctrl.Result{}, err
	}
	pod := &corev1.Pod{}
	if err := r.Pods.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.Holder.PodName}, pod); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		pod = nil
	}
	if evictionFor(claim, locks, pod) != evictPod {
		return ctrl.Result{}, nil
	}
	if err := r.Guard.Check(); err != nil {
		return ctrl.Result{}, err
	}
	err = r.evictions.evict(ctx, pod, claim.Status.PodUID)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return ctrl.Result{}, nil // gone or replaced meanwhile
	}
	cond, result, retry := evictionOutcome(pod.Name, err)
	if r.Metrics != nil {
		r.Metrics.Evictions.WithLabelValues(result).Inc()
	}
	if cond.Type == "" {
		return ctrl.Result{}, fmt.Errorf("evicting pod %s: %w", pod.Name, err)
	}
	if err := r.setEvicted(ctx, claim, cond); err != nil {
		return ctrl.Result{}, err
	}
	if retry {
		return ctrl.Result{RequeueAfter: evictionRetry}, nil
	}
	return ctrl.Result{}, nil
}

// podEvictions posts evictions of pods through the Eviction API, so that PodDisruptionBudgets are
// honoured: the way both the holder eviction and the pod lock controllers stop a pod that runs on
// without its lock.
type podEvictions struct {
	pods rest.Interface
}

// newPodEvictions posts evictions with the manager's config.
func newPodEvictions(mgr ctrl.Manager) (podEvictions, error) {
	clients, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return podEvictions{}, err
	}
	return podEvictions{pods: clients.CoreV1().RESTClient()}, nil
}

// evict posts an eviction of pod, preconditioned on uid: a new pod of the same name never pays
// for its predecessor's loss. It answers the API server's refusal at once: client-go would
// otherwise retry a 429 by itself, waiting out the Retry-After each time (10 s, ten times, for a
// PodDisruptionBudget), and the claim would tell nothing meanwhile.
func (e podEvictions) evict(ctx context.Context, pod *corev1.Pod, uid types.UID) error {
	eviction := &policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	}
	body, err := json.Marshal(eviction)
	if err != nil {
		return err
	}
	return e.pods.Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("eviction").
		MaxRetries(0).SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
}

// setEvicted writes the Evicted condition on the claim, and an event when it changed. The
// eviction it reports has happened (or was refused) and will not be tried again once the pod is
// going, so a write that loses a race with another writer of the claim is not left to the next
// reconcile, which would find the pod gone and record nothing: it reads the claim again and
// retries, with a resourceVersion precondition each time, until its cache has caught up.
func (r *HolderEvictionReconciler) setEvicted(ctx context.Context, claim *locksv1alpha1.LockClaim, cond metav1.Condition) error {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if changed { // a retry: the claim changed since the last read
			if err := r.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
				return err
			}
		}
		before := claim.DeepCopy()
		cond.ObservedGeneration = claim.Generation
		if changed = meta.SetStatusCondition(&claim.Status.Conditions, cond); !changed {
			return nil
		}
		return r.Status().Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil || !changed {
		return client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, cond.Reason, "Evict", "%s", cond.Message)
	return nil
}

// endedPodClaim admits claims on behalf of a pod that are Lost, or Released with reason
// HolderTerminated (which includes those whose node was lost): the only ones this reconciler acts
// on.
func endedPodClaim(o client.Object) bool {
	c, ok := o.(*locksv1alpha1.LockClaim)
	if !ok || c.Spec.Holder == nil || c.Spec.Holder.PodName == "" {
		return false
	}
	switch c.Status.Phase {
	case locksv1alpha1.ClaimLost:
		return true
	case locksv1alpha1.ClaimReleased:
		cond := meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionAcquired)
		return cond != nil && cond.Reason == locksv1alpha1.ReasonHolderTerminated
	}
	return false
}

// SetupWithManager watches pod claims that were lost or whose holder was found dead.
func (r *HolderEvictionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	var err error
	if r.evictions, err = newPodEvictions(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&locksv1alpha1.LockClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(endedPodClaim))).
		Named("holdereviction").
		Complete(r)
}
