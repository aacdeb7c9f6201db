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
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/heartbeat"
	"github.com/lockwarden/lockwarden/internal/podliveness"
)

// leaseHolder is a detached claim's heartbeat Lease (spec.holder.leaseName): the claimant renews
// it, and the claim holds while the controller sees it change within its leaseDurationSeconds
// (package heartbeat judges by when this process saw it change, never by the claimant's clock).
// The Lease cache holds only Leases with the heartbeat label (CacheOptions).
type leaseHolder struct{ name string }

func (l leaseHolder) load(ctx context.Context, r *Reconciler, s *lockScope, c *locksv1alpha1.LockClaim) error {
	return r.loadHeartbeat(ctx, s, c, l.name)
}

// waitVerdict: a claimant that stopped renewing (or deleted its Lease) while it waited will never
// use the lock, so its wait ends as a dead pod's does; a claim whose Lease is not there yet waits
// aside, ungranted.
func (l leaseHolder) waitVerdict(s *lockScope, c *locksv1alpha1.LockClaim) waiterVerdict {
	hb, ok := s.world.heartbeats[l.name]
	switch {
	case !ok || hb.State == heartbeat.Alive:
		return waiterVerdict{}
	case hb.State == heartbeat.Missing:
		return waiterVerdict{missing: &missingHolder{reason: locksv1alpha1.ReasonHeartbeatNotFound, what: fmt.Sprintf(
			"Heartbeat Lease %s does not exist in namespace %s, or lacks the label %s: \"true\"", l.name, c.Namespace, locksv1alpha1.HeartbeatLabel)}}
	case hb.State == heartbeat.Invalid:
		return waiterVerdict{missing: &missingHolder{reason: locksv1alpha1.ReasonHeartbeatNotFound, what: fmt.Sprintf(
			"Heartbeat Lease %s in namespace %s has no spec.leaseDurationSeconds", l.name, c.Namespace)}}
	}
	return waiterVerdict{end: &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonHolderTerminated,
		message: "The holder will never get the lock: " + hb.Reason}}
}

// holdVerdict: a Lease that expired, was deleted, or is missing while the claim holds ends the
// hold like a dead pod. (A live Lease's expiry wakes the pass: readWake.)
func (l leaseHolder) holdVerdict(s *lockScope, c *locksv1alpha1.LockClaim) (podliveness.Verdict, time.Duration) {
	v, ok := s.world.heartbeats[l.name]
	switch {
	case !ok || v.State == heartbeat.Alive:
		return podliveness.Verdict{Alive: true}, 0
	case v.State == heartbeat.Missing:
		// A holder's Lease that this process never saw: it was deleted before a restart of the
		// controller, or lost its label.
		return podliveness.Verdict{Reason: fmt.Sprintf("heartbeat Lease %s in namespace %s was deleted", l.name, c.Namespace)}, 0
	}
	return podliveness.Verdict{Reason: v.Reason}, 0
}

// deletedWith: a Lease owns no claim.
func (l leaseHolder) deletedWith(*lockScope, *locksv1alpha1.LockClaim) bool { return false }

func (l leaseHolder) uid(*lockScope, *locksv1alpha1.LockClaim) types.UID { return "" }

func (l leaseHolder) noteUID(*locksv1alpha1.LockClaim, types.UID) {}

// record: a Lease is recorded by name alone; whoever may update it renews it.
func (l leaseHolder) record(types.UID) *locksv1alpha1.RecordedHolder {
	return &locksv1alpha1.RecordedHolder{APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease", Name: l.name}
}

func (l leaseHolder) rebuild(c *locksv1alpha1.LockClaim, _ types.UID) {
	c.Spec.Holder = &locksv1alpha1.ClaimHolder{LeaseName: l.name}
}

func (l leaseHolder) indexKey() (string, string) { return indexClaimLease, l.name }

// loadHeartbeat reads the heartbeat Lease leaseName that claim c names, from the cache, and
// records its verdict in the scope. A live heartbeat's expiry is a time the pass looks again at
// (readWake).
func (r *Reconciler) loadHeartbeat(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim, leaseName string) error {
	if isFinal(c.Status.Phase) {
		return nil
	}
	if _, ok := s.world.heartbeats[leaseName]; ok {
		return nil
	}
	name := types.NamespacedName{Namespace: c.Namespace, Name: leaseName}
	lease := &coordinationv1.Lease{}
	switch err := r.Get(ctx, name, lease); {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		return err
	}
	v := r.memory.heartbeats.Observe(name, lease, s.now)
	if s.world.heartbeats == nil {
		s.world.heartbeats = map[string]heartbeat.Verdict{}
	}
	s.world.heartbeats[leaseName] = v
	return nil
}
