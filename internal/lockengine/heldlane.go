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
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// heldLane carries new holders' Held writes out of their lock's pass (docs/design.md §3, "One
// writer per lock"). The lock record, written before them, is what grants: a claim's status only
// reports the grant, so the next pass of the lock need not wait for it. A holder that reads the
// record deletes its claim while its Held write is still on the way, and that deletion's pass
// used to wait behind the write (the loop closed on the record ran slower than the one closed
// on both). The lane keeps the promises the pass lock kept:
//   - the next pass sees a claim as its pending write makes it (overlay), so it decides on the
//     grant and does not write it again;
//   - no later write of this process to the claim overtakes it: writeClaim and the finalizer
//     updates wait for a claim's pending write first (await) and write on top of what it wrote;
//   - the Held writes of a lock reach the API server in grant order, batch after batch, so that
//     whoever watches claims sees their fencing tokens only go up (a batch that fails stops
//     there, as a pass's writes did).
//
// A write that fails (a conflict, the guard's veto) wakes the lock: its next pass reads the record
// naming the claim and the claim not Held, and writes Held again, as after a crash between the
// two writes. A claim has at most one write in the lane, since the next one awaits it.
type heldLane struct {
	mu      sync.Mutex
	pending map[types.UID]*laneWrite
	// tails are, per lock, the end of its last batch: the next batch starts after it.
	tails map[types.NamespacedName]chan struct{}
	// inFlight counts the batches under way, so that tests can wait for the lane to be idle.
	inFlight sync.WaitGroup
}

// laneWrite is one claim's pending write: the claim as the write makes it, at the resourceVersion
// the write is preconditioned on; the write itself (which returns the claim as written, nil when
// it found the claim gone); and its outcome once done is closed.
type laneWrite struct {
	want  *locksv1alpha1.LockClaim
	write func() (*locksv1alpha1.LockClaim, error)
	done  chan struct{}
	wrote *locksv1alpha1.LockClaim
	err   error
}

// errEarlierWriteFailed is the outcome of a lane write that did not run because the one before it
// in its batch failed.
var errEarlierWriteFailed = errors.New("not written: an earlier Held write of the same pass failed")

func newHeldLane() *heldLane {
	return &heldLane{pending: map[types.UID]*laneWrite{}, tails: map[types.NamespacedName]chan struct{}{}}
}

// start queues one pass's Held writes of lock, in grant order, behind the lock's earlier batches,
// and calls failed once with the first error if one fails.
func (l *heldLane) start(lock types.NamespacedName, writes []*laneWrite, failed func(error)) {
	end := make(chan struct{})
	l.mu.Lock()
	for _, w := range writes {
		w.done = make(chan struct{})
		l.pending[w.want.UID] = w
	}
	after := l.tails[lock]
	l.tails[lock] = end
	l.mu.Unlock()
	l.inFlight.Go(func() {
		if after != nil {
			<-after
		}
		var err error
		for _, w := range writes {
			if err != nil {
				w.err = errEarlierWriteFailed
			} else {
				w.wrote, w.err = w.write()
				err = w.err
			}
			l.mu.Lock()
			delete(l.pending, w.want.UID)
			l.mu.Unlock()
			close(w.done)
		}
		l.mu.Lock()
		if l.tails[lock] == end {
			delete(l.tails, lock)
		}
		l.mu.Unlock()
		close(end)
		if err != nil {
			failed(err)
		}
	})
}

// overlay is read as the next pass must see it: as the pending write makes it, when one is under
// way on top of this very version of the claim. A read at another version means someone wrote
// the claim since (the pending write will fail its precondition), and the read stands.
func (l *heldLane) overlay(read *locksv1alpha1.LockClaim) *locksv1alpha1.LockClaim {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.pending[read.UID]; w != nil && w.want.ResourceVersion == read.ResourceVersion {
		return w.want
	}
	return read
}

// await waits for claim uid's pending write, if any, and returns the claim as it wrote it: nil when
// there was none, it found the claim gone or it failed. A failed write was reported (start's
// failed, which wakes the lock), and the claim is then as the caller read it. The error is ctx's,
// if it ends first.
func (l *heldLane) await(ctx context.Context, uid types.UID) (*locksv1alpha1.LockClaim, error) {
	l.mu.Lock()
	w := l.pending[uid]
	l.mu.Unlock()
	if w == nil {
		return nil, nil
	}
	select {
	case <-w.done:
		return w.wrote, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drain waits until lock's batches are done (or ctx ends): a Held write that a pass makes itself
// must not overtake them.
func (l *heldLane) drain(ctx context.Context, lock types.NamespacedName) error {
	l.mu.Lock()
	tail := l.tails[lock]
	l.mu.Unlock()
	if tail == nil {
		return nil
	}
	select {
	case <-tail:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// idle waits until no write is under way.
func (l *heldLane) idle() {
	l.inFlight.Wait()
}
