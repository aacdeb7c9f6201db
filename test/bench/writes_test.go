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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// writeKind names a kind of object whose writes the bench counts.
type writeKind string

const (
	claimWrites writeKind = "claims"
	lockWrites  writeKind = "locks"
	leaseWrites writeKind = "leases"
)

// writeCounts is how many writes reached each kind of object.
type writeCounts map[writeKind]int

func (w writeCounts) total() int {
	n := 0
	for _, c := range w {
		n += c
	}
	return n
}

// minus is the writes made between an earlier count and this one.
func (w writeCounts) minus(earlier writeCounts) writeCounts {
	out := writeCounts{}
	for k, c := range w {
		out[k] = c - earlier[k]
	}
	return out
}

// writeCounter counts the API writes that reach LockClaims and DistributedLocks in the bench
// namespace and Leases in the controller's (the built-in backend's lock keys and sessions): every
// create, change and delete of an object gives exactly one watch event (a write that changes
// nothing bumps no resourceVersion and is not an etcd write). Watches start at the resourceVersion
// of a list, so objects that already exist are not counted as created.
type writeCounter struct {
	mu     sync.Mutex
	counts writeCounts
	// markers counts the writes of snapshot's own marker Lease, which are not counted.
	markers int
}

// markerName is the Lease that snapshot writes to know that the watches have caught up.
const markerName = "bench-write-counter-marker"

func startWriteCounter(ctx context.Context, c client.WithWatch, benchNS, systemNS string) (*writeCounter, error) {
	w := &writeCounter{counts: writeCounts{}}
	for _, s := range []struct {
		kind writeKind
		ns   string
		list client.ObjectList
	}{
		{claimWrites, benchNS, &locksv1alpha1.LockClaimList{}},
		{lockWrites, benchNS, &locksv1alpha1.DistributedLockList{}},
		{leaseWrites, systemNS, &coordinationv1.LeaseList{}},
	} {
		if err := c.List(ctx, s.list, client.InNamespace(s.ns)); err != nil {
			return nil, err
		}
		rv := s.list.GetResourceVersion()
		go w.follow(ctx, c, s.kind, s.ns, s.list.DeepCopyObject().(client.ObjectList), rv)
	}
	return w, nil
}

// follow counts the events of one kind from rv on, watching again from the last one seen when
// the server ends a watch.
func (w *writeCounter) follow(ctx context.Context, c client.WithWatch, kind writeKind, ns string, list client.ObjectList, rv string) {
	for ctx.Err() == nil {
		wi, err := c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range wi.ResultChan() {
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			switch {
			case ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted:
			case o.GetName() == markerName:
				w.mu.Lock()
				w.markers++
				w.mu.Unlock()
			default:
				w.mu.Lock()
				w.counts[kind]++
				w.mu.Unlock()
			}
		}
	}
}

// snapshot returns the counts so far, once the watches have caught up with every write made
// before the call: it waits until a write of its own (a marker Lease) has been seen.
func (w *writeCounter) snapshot(ctx context.Context, c client.Client, systemNS string) (writeCounts, error) {
	marker := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: markerName}}
	before := w.seenMarkers()
	if err := c.Get(ctx, client.ObjectKeyFromObject(marker), marker); err != nil {
		if err := c.Create(ctx, marker); err != nil {
			return nil, err
		}
	} else {
		holder := time.Now().Format(time.RFC3339Nano)
		marker.Spec.HolderIdentity = &holder
		if err := c.Update(ctx, marker); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.seenMarkers() == before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// Let events of the other kinds, written before the marker, arrive too.
	time.Sleep(200 * time.Millisecond)
	return w.get(), nil
}

func (w *writeCounter) seenMarkers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.markers
}

func (w *writeCounter) get() writeCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := writeCounts{}
	for k, c := range w.counts {
		out[k] = c
	}
	return out
}

// rawLeaseFloor times n sequential updates of one Lease through client-go (the observer's
// unthrottled client) on the same API server: the cost of one API write, the floor under every
// figure the controller reaches.
func rawLeaseFloor(ctx context.Context, c client.Client, n int) (quantiles, error) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "bench-raw-write-floor"}}
	_ = c.Delete(ctx, lease)
	if err := c.Create(ctx, lease); err != nil {
		return quantiles{}, err
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
			return quantiles{}, err
		}
		lat = append(lat, time.Since(start))
	}
	return report("raw-write floor: Lease update through client-go", lat), nil
}

// rawCRDFloors times n sequential status writes of the lockwarden objects themselves through
// client-go, without the controller (no DistributedLock here names a backend, and the controller
// leaves a claim of a lock that does not exist waiting): a DistributedLock status update and a
// LockClaim status merge patch with a resourceVersion precondition, as the controller writes them.
// Custom resources cost the API server more than a Lease (JSON instead of protobuf, schema
// validation), and a handoff is a chain of such writes.
func rawCRDFloors(ctx context.Context, c client.Client, n int) ([]floorResult, error) {
	lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "bench-raw-crd-floor"},
		Spec: locksv1alpha1.DistributedLockSpec{BackendRef: locksv1alpha1.BackendReference{Name: "bench-raw-no-such-backend"}}}
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "bench-raw-crd-floor"},
		Spec: locksv1alpha1.LockClaimSpec{LockName: "bench-raw-no-such-lock"}}
	for _, o := range []client.Object{lock, claim} {
		_ = c.Delete(ctx, o)
		if err := c.Create(ctx, o); err != nil {
			return nil, err
		}
		defer func() { _ = c.Delete(context.WithoutCancel(ctx), o) }()
	}
	time.Sleep(time.Second) // let the controller write the objects' first status, and stop
	var out []floorResult
	lat := make([]time.Duration, 0, n)
	if err := c.Get(ctx, client.ObjectKeyFromObject(lock), lock); err != nil {
		return nil, err
	}
	for i := range n {
		lock.Status.FencingToken = int64(i + 1) // a field the controller's pass leaves alone
		start := time.Now()
		if err := c.Status().Update(ctx, lock); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	out = append(out, floorResult{"raw write: DistributedLock status update through client-go", report("raw write: DistributedLock status update", lat)})
	lat = lat[:0]
	if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		return nil, err
	}
	for i := range n {
		before := claim.DeepCopy()
		claim.Status.QueuePosition = int32(i%7 + 1)
		claim.Status.HolderIdentity = fmt.Sprintf("raw-%d", i)
		start := time.Now()
		if err := c.Status().Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	out = append(out, floorResult{"raw write: LockClaim status patch through client-go", report("raw write: LockClaim status patch", lat)})
	return out, nil
}

// floorResult is one kind of raw write, timed.
type floorResult struct {
	label string
	lat   quantiles
}
