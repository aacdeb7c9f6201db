//go:build bench

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

package bench

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The floors: single API writes timed through client-go (the observer's unthrottled client) on
// the same API server, without the controller in their path: what the handoff's figures are
// measured against. Each round of the hot-lock handoffs times every floor again, so that a
// figure and its floor come from the same minutes of the machine.

// floor is one kind of raw write.
type floor int

const (
	floorLease floor = iota
	floorClaimDelete
	floorClaimDeleteFinalizer
	floorLockStatus
	floorClaimStatus
	floorClaimStatusUpdate
	floorCount
)

var floorLabels = [floorCount]string{
	floorLease:                "Lease update (watched like a claim: the manager's informer and two watches of its namespace)",
	floorClaimDelete:          "LockClaim delete, no finalizer (the client's write of a handoff)",
	floorClaimDeleteFinalizer: "LockClaim delete with a finalizer (marks it deleting; before this release, lockwarden's claims carried one)",
	floorLockStatus:           "DistributedLock status update",
	floorClaimStatus:          "LockClaim status merge patch with a resourceVersion precondition (the controller's verb)",
	floorClaimStatusUpdate:    "LockClaim status update (the other verb, for comparison)",
}

// floorFinalizer is a finalizer of the bench's own, which the controller leaves alone (it sheds
// only lockwarden's).
const floorFinalizer = "bench.lockwarden.io/floor"

// measureFloors times n writes of each kind.
func measureFloors(ctx context.Context, c client.WithWatch, n int) ([floorCount][]time.Duration, error) {
	var out [floorCount][]time.Duration
	var err error
	if out[floorLease], err = leaseFloor(ctx, c, n); err != nil {
		return out, err
	}
	if out[floorClaimDelete], err = claimDeleteFloor(ctx, c, n, false); err != nil {
		return out, err
	}
	if out[floorClaimDeleteFinalizer], err = claimDeleteFloor(ctx, c, n, true); err != nil {
		return out, err
	}
	out[floorLockStatus], out[floorClaimStatus], out[floorClaimStatusUpdate], err = statusFloors(ctx, c, n)
	return out, err
}

// leaseFloor times n sequential updates of one Lease in the bench namespace, with as many
// watchers as a claim there has (the manager's informer watches every Lease; the bench's write
// counter and its Acquired watch each watch the namespace's claims, so two watches of the
// namespace's Leases stand in for them).
func leaseFloor(ctx context.Context, c client.WithWatch, n int) ([]time.Duration, error) {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for range 2 {
		w, err := c.Watch(wctx, &coordinationv1.LeaseList{}, client.InNamespace("bench"))
		if err != nil {
			return nil, err
		}
		go func() {
			for range w.ResultChan() {
			}
		}()
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "bench-raw-write-floor"}}
	_ = c.Delete(ctx, lease)
	if err := c.Create(ctx, lease); err != nil {
		return nil, err
	}
	defer func() { _ = c.Delete(context.WithoutCancel(ctx), lease) }()
	lat := make([]time.Duration, 0, n)
	for i := range n {
		holder := fmt.Sprintf("writer-%d", i)
		lease.Spec.HolderIdentity = &holder
		now := metav1.NowMicro()
		lease.Spec.RenewTime = &now
		start := time.Now()
		if err := c.Update(ctx, lease); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// claimDeleteFloor times the deletes of n claims waiting for a held lock of the built-in backend
// (waiting quietly: no event, no write but their first status), with or without a finalizer of
// the bench's; a claim with one is only marked deleting, and the bench takes the finalizer off
// afterwards, untimed.
func claimDeleteFloor(ctx context.Context, c client.Client, n int, finalizer bool) ([]time.Duration, error) {
	deleteFloors++
	prefix := fmt.Sprintf("bench-raw-delete-%d", deleteFloors)
	lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: prefix},
		Spec: locksv1alpha1.DistributedLockSpec{BackendRef: locksv1alpha1.BackendReference{Name: locksv1alpha1.BuiltinBackendName}}}
	if err := c.Create(ctx, lock); err != nil {
		return nil, err
	}
	defer func() { _ = c.Delete(context.WithoutCancel(ctx), lock) }()
	holder := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: prefix + "-holder"},
		Spec: locksv1alpha1.LockClaimSpec{LockName: lock.Name}}
	if err := c.Create(ctx, holder); err != nil {
		return nil, err
	}
	defer func() { _ = c.Delete(context.WithoutCancel(ctx), holder) }()
	if err := waitPhase(ctx, c, holder, locksv1alpha1.ClaimHeld); err != nil {
		return nil, err
	}
	claims := make([]*locksv1alpha1.LockClaim, n)
	for i := range claims {
		claims[i] = &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: locksv1alpha1.LockClaimSpec{LockName: lock.Name}}
		if finalizer {
			claims[i].Finalizers = []string{floorFinalizer}
		}
		if err := c.Create(ctx, claims[i]); err != nil {
			return nil, err
		}
	}
	// Let the controller write their first status, and stop.
	if err := waitPhase(ctx, c, claims[n-1], locksv1alpha1.ClaimPending); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond)
	lat := make([]time.Duration, 0, n)
	for _, cl := range claims {
		start := time.Now()
		if err := c.Delete(ctx, cl); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	if finalizer {
		for _, cl := range claims {
			if err := c.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
				return nil, err
			}
			controllerutil.RemoveFinalizer(cl, floorFinalizer)
			if err := c.Update(ctx, cl); err != nil {
				return nil, err
			}
		}
	}
	return lat, nil
}

// deleteFloors counts the runs of claimDeleteFloor, whose objects each run names anew (those of
// the last run may still be going).
var deleteFloors int

// waitPhase waits up to 30 s until claim's phase is phase.
func waitPhase(ctx context.Context, c client.Client, claim *locksv1alpha1.LockClaim, phase locksv1alpha1.ClaimPhase) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got := &locksv1alpha1.LockClaim{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), got); err == nil && got.Status.Phase == phase {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("claim %s not %s within 30 s", claim.Name, phase)
}

// statusFloors times n status writes of the lockwarden objects themselves, as the controller
// writes them (no DistributedLock here names a backend, and the controller leaves a claim of a
// lock that does not exist waiting): a DistributedLock status update, and a LockClaim status
// merge patch with a resourceVersion precondition; beside them, the same claim's status written
// by update, the other verb the controller could use. Custom resources cost the API server more
// than a Lease (JSON instead of protobuf, schema validation).
func statusFloors(ctx context.Context, c client.Client, n int) (lockLat, claimLat, claimUpdateLat []time.Duration, err error) {
	lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "bench-raw-crd-floor"},
		Spec: locksv1alpha1.DistributedLockSpec{BackendRef: locksv1alpha1.BackendReference{Name: "bench-raw-no-such-backend"}}}
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "bench-raw-crd-floor"},
		Spec: locksv1alpha1.LockClaimSpec{LockName: "bench-raw-no-such-lock"}}
	for _, o := range []client.Object{lock, claim} {
		_ = c.Delete(ctx, o)
		if err := c.Create(ctx, o); err != nil {
			return nil, nil, nil, err
		}
		defer func() { _ = c.Delete(context.WithoutCancel(ctx), o) }()
	}
	time.Sleep(time.Second) // let the controller write the objects' first status, and stop
	if err := c.Get(ctx, client.ObjectKeyFromObject(lock), lock); err != nil {
		return nil, nil, nil, err
	}
	for i := range n {
		lock.Status.FencingToken = int64(i + 1) // a field the controller's pass leaves alone
		start := time.Now()
		if err := c.Status().Update(ctx, lock); err != nil {
			return nil, nil, nil, err
		}
		lockLat = append(lockLat, time.Since(start))
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		return nil, nil, nil, err
	}
	for i := range n {
		before := claim.DeepCopy()
		claim.Status.QueuePosition = int32(i%7 + 1)
		claim.Status.HolderIdentity = fmt.Sprintf("raw-%d", i)
		start := time.Now()
		if err := c.Status().Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return nil, nil, nil, err
		}
		claimLat = append(claimLat, time.Since(start))
	}
	for i := range n {
		claim.Status.QueuePosition = int32(i%7 + 1)
		claim.Status.HolderIdentity = fmt.Sprintf("raw-update-%d", i)
		start := time.Now()
		if err := c.Status().Update(ctx, claim); err != nil {
			return nil, nil, nil, err
		}
		claimUpdateLat = append(claimUpdateLat, time.Since(start))
	}
	return lockLat, claimLat, claimUpdateLat, nil
}
