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
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/heartbeat"
)

// This file is the liveness of detached claims that name a heartbeat Lease
// (spec.holder.leaseName): reading the Lease in a pass, judging it (package heartbeat), and the
// watch that wakes a lock when a Lease its claims name changes. The Lease watch sees only Leases
// with the heartbeat label (CacheOptions).

// loadHeartbeat reads the heartbeat Lease that claim c names, from the cache, and records its
// verdict in the scope. A live heartbeat wakes the lock when it would expire, so that a claimant
// that stopped renewing is released without waiting for any event.
func (r *Reconciler) loadHeartbeat(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) error {
	h := c.Spec.Holder
	if h == nil || h.LeaseName == "" || isFinal(c.Status.Phase) {
		return nil
	}
	if _, ok := s.heartbeats[h.LeaseName]; ok {
		return nil
	}
	name := types.NamespacedName{Namespace: c.Namespace, Name: h.LeaseName}
	lease := &coordinationv1.Lease{}
	switch err := r.Get(ctx, name, lease); {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		return err
	}
	v := r.heartbeats.Observe(name, lease, s.now)
	if s.heartbeats == nil {
		s.heartbeats = map[string]heartbeat.Verdict{}
	}
	s.heartbeats[h.LeaseName] = v
	if v.State == heartbeat.Alive {
		s.wait = soonest(s.wait, v.ExpireAt.Sub(s.now))
	}
	return nil
}

// judgeHeartbeat adds to a waiting claim's verdict what its heartbeat Lease says: a claimant
// that stopped renewing (or deleted its Lease) while it waited will never use the lock, so its
// wait ends as a dead pod's does; a claim whose Lease is not there yet waits aside, ungranted.
func (s *lockScope) judgeHeartbeat(c *locksv1alpha1.LockClaim, v waiterVerdict) waiterVerdict {
	h := c.Spec.Holder
	if v.end != nil || h == nil || h.LeaseName == "" {
		return v
	}
	hb, ok := s.heartbeats[h.LeaseName]
	switch {
	case !ok || hb.State == heartbeat.Alive:
	case hb.State == heartbeat.Missing:
		v.missing = &missingHolder{reason: locksv1alpha1.ReasonHeartbeatNotFound, what: fmt.Sprintf(
			"Heartbeat Lease %s does not exist in namespace %s, or lacks the label %s: \"true\"", h.LeaseName, c.Namespace, locksv1alpha1.HeartbeatLabel)}
	case hb.State == heartbeat.Invalid:
		v.missing = &missingHolder{reason: locksv1alpha1.ReasonHeartbeatNotFound, what: fmt.Sprintf(
			"Heartbeat Lease %s in namespace %s has no spec.leaseDurationSeconds", h.LeaseName, c.Namespace)}
	default:
		v.end = &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonHolderTerminated, message: "The holder will never get the lock: " + hb.Reason}
	}
	return v
}

// locksOfLease maps a heartbeat Lease to the locks of the claims that name it.
func (r *Reconciler) locksOfLease(ctx context.Context, o client.Object) []ctrl.Request {
	return r.locksOfClaimsNaming(ctx, o, indexClaimLease)
}
