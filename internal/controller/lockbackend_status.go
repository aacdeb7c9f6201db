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
	"errors"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
)

// setBackendReady records the outcome of a probe (nil = reachable, authenticated, writable).
func setBackendReady(lb *locksv1alpha1.LockBackend, probeErr error) {
	cond := metav1.Condition{
		Type:               locksv1alpha1.ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             locksv1alpha1.ReasonBackendReachable,
		Message:            "Probe succeeded: reachable, authenticated and writable",
		ObservedGeneration: lb.Generation,
	}
	var degraded *backends.DegradedError
	switch {
	case errors.As(probeErr, &degraded):
		cond.Reason, cond.Message = locksv1alpha1.ReasonBackendDegraded, "Probe succeeded with less redundancy than configured: "+degraded.Error()
	case probeErr != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, locksv1alpha1.ReasonBackendUnreachable, "Probe failed: "+probeErr.Error()
		if errors.Is(probeErr, registry.ErrSecret) {
			cond.Reason = locksv1alpha1.ReasonSecretNotFound
		}
	}
	meta.SetStatusCondition(&lb.Status.Conditions, cond)
	lb.Status.ObservedGeneration = lb.Generation
}
