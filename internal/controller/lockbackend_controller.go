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
	"k8s.io/apimachinery/pkg/util/wait"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/metrics"
)

// LockBackendReconciler probes each LockBackend and reports the result in its Ready condition.
// A probe is the one thing no watch can report, so it runs on a timer.
type LockBackendReconciler struct {
	client.Client
	// Registry opens the backend sessions that are probed (and later used for locks).
	Registry *registry.Registry
	// Recorder emits BackendRecovered and BackendUnreachable events.
	Recorder events.EventRecorder
	// Metrics reports each backend's last probe in lockwarden_backend_ready.
	Metrics *metrics.Metrics
	// ProbeInterval is the time between probes of a ready backend (default 30 s); a failing one
	// is probed three times as often.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe (default 5 s).
	ProbeTimeout time.Duration
}

// Reconcile probes one backend.
func (r *LockBackendReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lb := &locksv1alpha1.LockBackend{}
	if err := r.Get(ctx, req.NamespacedName, lb); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.Registry.Forget(ctx, req.Name)
			r.Metrics.BackendReady.DeleteLabelValues(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := lb.DeepCopy()

	probeCtx, cancel := context.WithTimeout(ctx, r.ProbeTimeout)
	defer cancel()
	if r.Registry.Refresh(probeCtx, lb) {
		// A rotated password or certificate: the session opened below uses it, and the holds of
		// the old session move to it (package registry).
		ctrl.LoggerFrom(ctx).Info("A Secret of the backend changed; opening a new session", "backend", lb.Name)
		r.Recorder.Eventf(lb, nil, corev1.EventTypeNormal, locksv1alpha1.ReasonSecretRotated, "Probe",
			"A Secret this backend reads changed; a new session uses it, and held locks move to it")
	}
	b, err := r.Registry.For(probeCtx, lb)
	if err == nil {
		err = b.Ping(probeCtx)
	}
	setBackendReady(lb, err)
	r.Metrics.BackendReady.WithLabelValues(lb.Name).Set(readyValue(lb))

	if !equality.Semantic.DeepEqual(before.Status, lb.Status) {
		if err := r.Status().Patch(ctx, lb, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.recordTransition(before, lb)
	}
	if err != nil {
		return ctrl.Result{RequeueAfter: wait.Jitter(r.ProbeInterval/3, 0.1)}, nil
	}
	return ctrl.Result{RequeueAfter: wait.Jitter(r.ProbeInterval, 0.1)}, nil
}

func (r *LockBackendReconciler) recordTransition(before, after *locksv1alpha1.LockBackend) {
	was := meta.IsStatusConditionTrue(before.Status.Conditions, locksv1alpha1.ConditionReady)
	was = was || meta.FindStatusCondition(before.Status.Conditions, locksv1alpha1.ConditionReady) == nil
	now := meta.FindStatusCondition(after.Status.Conditions, locksv1alpha1.ConditionReady)
	switch {
	case now.Status == metav1.ConditionTrue && !was:
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, locksv1alpha1.ReasonBackendRecovered, "Probe", "%s", now.Message)
	case now.Status != metav1.ConditionTrue && was:
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, now.Reason, "Probe", "%s", now.Message)
	case now.Reason == locksv1alpha1.ReasonBackendDegraded && !hasReason(before, locksv1alpha1.ReasonBackendDegraded):
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, now.Reason, "Probe", "%s", now.Message)
	}
}

// SetupWithManager watches LockBackends.
func (r *LockBackendReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ProbeInterval == 0 {
		r.ProbeInterval = 30 * time.Second
	}
	if r.ProbeTimeout == 0 {
		r.ProbeTimeout = 5 * time.Second
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&locksv1alpha1.LockBackend{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("lockbackend").
		Complete(r)
}

// readyValue is lockwarden_backend_ready for lb: 1 when its Ready condition is True (a degraded
// backend included), else 0.
func readyValue(lb *locksv1alpha1.LockBackend) float64 {
	if meta.IsStatusConditionTrue(lb.Status.Conditions, locksv1alpha1.ConditionReady) {
		return 1
	}
	return 0
}

// hasReason tells whether lb's Ready condition has reason.
func hasReason(lb *locksv1alpha1.LockBackend, reason string) bool {
	c := meta.FindStatusCondition(lb.Status.Conditions, locksv1alpha1.ConditionReady)
	return c != nil && c.Reason == reason
}
