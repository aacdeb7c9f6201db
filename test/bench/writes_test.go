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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// writeKind names a kind of object, or of claim write, whose writes the bench counts.
type writeKind string

const (
	// Writes of LockClaims: creates and deletes (the clients'), status writes of claims that
	// hold (the controller's grants and refreshes), a new claim's first status, and the status
	// writes of every other claim (waiters').
	claimCreates writeKind = "claim creates"
	claimDeletes writeKind = "claim deletes"
	claimHolders writeKind = "claims held"
	claimFirst   writeKind = "claims' first status"
	claimWaiters writeKind = "claims waiting"
	lockWrites   writeKind = "locks"
	leaseWrites  writeKind = "leases"
	eventWrites  writeKind = "events"
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

// claims is every write of a LockClaim.
func (w writeCounts) claims() int {
	return w[claimCreates] + w[claimDeletes] + w[claimHolders] + w[claimFirst] + w[claimWaiters]
}

// minus is the writes made between an earlier count and this one.
func (w writeCounts) minus(earlier writeCounts) writeCounts {
	out := writeCounts{}
	for k, c := range w {
		out[k] = c - earlier[k]
	}
	return out
}

// writeCounter counts the API writes that reach LockClaims, DistributedLocks and Events in the
// bench namespace and Leases in the controller's (the built-in backend's lock keys and sessions): every
// create, change and delete of an object gives exactly one watch event (a write that changes
// nothing bumps no resourceVersion and is not an etcd write). Watches start at the resourceVersion
// of a list, so objects that already exist are not counted as created.
type writeCounter struct {
	mu     sync.Mutex
	counts writeCounts
	// markers counts the writes of snapshot's own marker Lease, which are not counted.
	markers int
	// phases are the claims' phases as last seen, by namespace/name, to tell a claim's first
	// status from a waiter's status change.
	phases map[string]locksv1alpha1.ClaimPhase
}

// markerName is the Lease that snapshot writes to know that the watches have caught up.
const markerName = "bench-write-counter-marker"

func startWriteCounter(ctx context.Context, c client.WithWatch, benchNS, systemNS string) (*writeCounter, error) {
	w := &writeCounter{counts: writeCounts{}, phases: map[string]locksv1alpha1.ClaimPhase{}}
	for _, s := range []struct {
		kind writeKind
		ns   string
		list client.ObjectList
	}{
		{claimCreates, benchNS, &locksv1alpha1.LockClaimList{}},
		{lockWrites, benchNS, &locksv1alpha1.DistributedLockList{}},
		{leaseWrites, systemNS, &coordinationv1.LeaseList{}},
		{eventWrites, benchNS, &eventsv1.EventList{}},
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
				w.counts[w.classify(kind, ev.Type, o)]++
				w.mu.Unlock()
			}
		}
	}
}

// classify says which kind of write an event of a watch of kind is: claims' by what they did.
// The caller holds w.mu.
func (w *writeCounter) classify(kind writeKind, t watch.EventType, o client.Object) writeKind {
	c, ok := o.(*locksv1alpha1.LockClaim)
	if !ok {
		return kind
	}
	name := c.Namespace + "/" + c.Name
	before, seen := w.phases[name]
	w.phases[name] = c.Status.Phase
	switch {
	case t == watch.Added:
		return claimCreates
	case t == watch.Deleted || !c.DeletionTimestamp.IsZero():
		delete(w.phases, name)
		return claimDeletes
	case c.Status.Phase == locksv1alpha1.ClaimHeld:
		return claimHolders
	case seen && before == "":
		return claimFirst
	default:
		return claimWaiters
	}
}

// quiet waits at least settle, then until a second has passed without a write, up to 30 s more,
// and returns the counts then: what came before has all been counted.
func (w *writeCounter) quiet(ctx context.Context, c client.Client, systemNS string) (writeCounts, error) {
	time.Sleep(settle)
	last, err := w.snapshot(ctx, c, systemNS)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		now, err := w.snapshot(ctx, c, systemNS)
		if err != nil {
			return nil, err
		}
		if now.total() == last.total() {
			return now, nil
		}
		last = now
	}
	return last, nil
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
