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
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/failpoint"
	"github.com/lockwarden/lockwarden/internal/fencing"
)

// This file is the writing half of a pass: the lock record first (one compare-and-swap carrying
// release, grant and token), then the claims (the new holder first, then a batch of the held-back
// low-priority changes), their transition events, then finalizers.

// writeLock writes the lock record if the pass changed it: by a compare-and-swap on the
// resourceVersion it read, which is also where a new grant's fencing token comes from. Once the
// record is written the pass's grants are recorded; if the write fails, Reconcile gives back the
// backend holds taken in this pass: nothing is held that the record does not name.
func (r *Reconciler) writeLock(ctx context.Context, s *lockScope) (stepResult, error) {
	lock := s.lock
	setLockConditions(lock, s.use.unusable, s.use.conflict, s.use.name)
	waiting := int32(len(s.waiters))
	high := len(s.grants) > 0 || !equality.Semantic.DeepEqual(highPriorityStatus(s.readLock.Status), highPriorityStatus(lock.Status))
	if !high && !s.writeLow {
		return stepResult{}, nil
	}
	lock.Status.Waiting = waiting
	lock.Status.Holding = int32(len(lock.Status.Holders))
	if len(s.grants) > 0 {
		tokens, err := seams.issueTokens(s.readLock, len(s.grants))
		if err != nil {
			return stepResult{}, err
		}
		for i, g := range s.grants {
			lock.Status.Holders[g.record].FencingToken = tokens[i]
			lock.Status.FencingToken = max(lock.Status.FencingToken, tokens[i])
		}
	}
	if err := r.Guard.Check(); err != nil {
		return stepResult{}, err
	}
	for _, g := range s.grants {
		r.trace(TraceRecordWriting, s.name, g.claim.Name)
	}
	if err := r.Status().Update(ctx, lock); err != nil {
		return stepResult{}, client.IgnoreNotFound(err)
	}
	r.memory.written.note(lock)
	for _, g := range s.grants {
		rec := lock.Status.Holders[g.record]
		r.Renewer.Track(s.use.name, s.use.session, g.lease, client.ObjectKeyFromObject(g.claim))
		markHeld(g.claim, rec.Identity, g.lease, rec.FencingToken, s.now)
		s.holders = append(s.holders, g.claim)
		r.trace(TraceRecordWritten, s.name, g.claim.Name)
		r.Metrics.WaitSeconds.WithLabelValues(s.use.name).Observe(s.now.Sub(g.claim.CreationTimestamp.Time).Seconds())
		ctrl.LoggerFrom(ctx).Info("Lock granted", "lock", s.name.Name, "claim", klog.KObj(g.claim), "fencingToken", rec.FencingToken, "identity", rec.Identity, "mode", rec.Mode)
	}
	s.grants = nil // recorded: nothing is left to give back
	return stepResult{}, nil
}

// highPriorityStatus is the part of a lock's status that is written at once when it changes.
func highPriorityStatus(st locksv1alpha1.DistributedLockStatus) locksv1alpha1.DistributedLockStatus {
	st.Waiting = 0
	return st
}

// issueTokens returns the tokens of n grants recorded by one write preconditioned on lock's
// resourceVersion (package fencing), in grant order.
func issueTokens(lock *locksv1alpha1.DistributedLock, n int) ([]int64, error) {
	return fencing.Issue(lock.ResourceVersion, lock.Status.FencingToken, n)
}

// giveBack releases the backend holds taken in this pass whose grants were not recorded (none
// once writeLock succeeded).
func (r *Reconciler) giveBack(ctx context.Context, s *lockScope) error {
	grants := s.grants
	s.grants = nil
	var errs []error
	for _, g := range grants {
		if err := s.use.session.Release(ctx, g.lease); err != nil && !errors.Is(err, backends.ErrNotHeld) {
			errs = append(errs, fmt.Errorf("giving back %s after a failed grant: %w", g.lease.Key, err))
		}
	}
	return errors.Join(errs...)
}

// writeEndedHolds writes the claims whose hold this pass ended, other than those being deleted
// (their deletion says it), before any grant: the holds that ended say so before the key goes to
// anyone else, so that whoever reads claims never sees one Held while the backend holds its key
// for another. (writeClaims writes them in the same order when nothing is granted; this step
// only moves them ahead of the grant.)
func (r *Reconciler) writeEndedHolds(ctx context.Context, s *lockScope) (stepResult, error) {
	for _, c := range s.claims {
		if isHeld(s.before(c.UID)) && !isHeld(c) && c.DeletionTimestamp.IsZero() {
			if err := r.writeClaim(ctx, s, c); err != nil {
				return stepResult{}, err
			}
		}
	}
	return stepResult{}, nil
}

// writeClaims writes what the pass changed of its claims, in the order that keeps what watchers
// see consistent and the handoff short:
//  1. the holds that ended, so that whoever watches claims never sees two holders at once;
//  2. the new holders, since the handoff waits for them; then the events of deleted claims, whose
//     status is not written again (their deletion says it), and the finalizers that an earlier
//     lockwarden put on deleted claims that hold nothing (the lock record, written before,
//     recorded their release).
//  3. the rest, a few at a time: low-priority changes only when due, and at most
//     lowPriorityBatch of them, the rest in the passes that follow.
func (r *Reconciler) writeClaims(ctx context.Context, s *lockScope) (stepResult, error) {
	var ended, granted, gone, rest, low []*locksv1alpha1.LockClaim
	for _, c := range s.claims {
		switch classifyWrite(s.before(c.UID), c) {
		case writeGone:
			gone = append(gone, c)
		case writeEnded:
			ended = append(ended, c)
		case writeGranted:
			granted = append(granted, c)
		case writeLow:
			low = append(low, c)
		case writeRest:
			rest = append(rest, c)
		}
	}
	if err := r.writeEach(ctx, s, ended); err != nil {
		return stepResult{}, err
	}
	if err := r.writeGranted(ctx, s, granted); err != nil {
		return stepResult{}, err
	}
	// A deleted claim's status is never written: an event says how it ended, after the new
	// holder's write, which the handoff waits for.
	for _, c := range gone {
		if before := s.before(c.UID); isFinal(c.Status.Phase) && before.Status.Phase != c.Status.Phase {
			r.recordTransition(s.name, c)
		}
	}
	if err := inParallel(gone, claimWriters, func(c *locksv1alpha1.LockClaim) error { return r.removeFinalizer(ctx, s, c) }); err != nil {
		return stepResult{}, err
	}
	chunk := r.lowChunk(s, low)
	err := inParallel(append(rest, chunk...), claimWriters, func(c *locksv1alpha1.LockClaim) error { return r.writeClaim(ctx, s, c) })
	return r.lowChunkDone(s, low, chunk), err
}

// claimWriters bounds the claim writes of one pass in flight at once.
const claimWriters = 4

// writeEach writes claims one after the other, in order, and stops at the first error.
func (r *Reconciler) writeEach(ctx context.Context, s *lockScope, claims []*locksv1alpha1.LockClaim) error {
	for _, c := range claims {
		if err := r.writeClaim(ctx, s, c); err != nil {
			return err
		}
	}
	return nil
}

// inParallel calls do for each claim, at most limit at a time, and joins the errors.
func inParallel(claims []*locksv1alpha1.LockClaim, limit int, do func(*locksv1alpha1.LockClaim) error) error {
	errs := make([]error, len(claims))
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, c := range claims {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = do(c)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// claimWrites is what a pass wrote of its claims: each one as this pass last wrote it, viewed as
// the pass sees it (claimView). What the API server has of a claim the pass wrote is that, not
// what the pass read: the base of its next patch and of every "did it change" after the write.
// What the pass read stays as read. Claims are written in parallel (inParallel), hence the mutex.
type claimWrites struct {
	mu    sync.Mutex
	views map[types.UID]claimView
}

// record notes that the pass of lock wrote out, claim uid.
func (w *claimWrites) record(uid types.UID, out *locksv1alpha1.LockClaim, lock string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.views == nil {
		w.views = map[types.UID]claimView{}
	}
	w.views[uid] = viewOn(out.DeepCopy(), lock)
}

// base is claim uid as the API server has it, as far as the pass knows: as the pass last wrote
// it, else as it read it.
func (s *lockScope) base(uid types.UID) claimView {
	s.wrote.mu.Lock()
	defer s.wrote.mu.Unlock()
	if v, ok := s.wrote.views[uid]; ok {
		return v
	}
	return s.read[uid]
}

// before is claim uid as the API server has it, as far as the pass knows, as the steps see it.
func (s *lockScope) before(uid types.UID) *locksv1alpha1.LockClaim {
	return s.base(uid).part
}

// writeClaim patches c's status, preconditioned on the resourceVersion the pass read: a pass
// that worked from an outdated claim (a deposed leader waking up, a lagging cache) must not
// overwrite what a newer pass wrote, least of all bring an ended claim back to Held. A conflict
// fails the pass, which then starts again from a fresh read.
func (r *Reconciler) writeClaim(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) error {
	base, out, err := r.claimWrite(ctx, s, c)
	if out == nil || err != nil {
		return err
	}
	_, err = r.sendClaim(ctx, s, c.UID, base, out)
	return err
}

// writeGranted writes the new holders' Held, in grant order. When every one asks for one lock,
// the writes go through the held lane (heldlane.go), outside the pass: the record written before
// them granted the claims, and the next pass must not wait for their report. A claim of several
// locks is written here, since the passes of its other locks write the same object; its pass's
// other grants are then written here too, after the lane's earlier ones, to keep grant order.
func (r *Reconciler) writeGranted(ctx context.Context, s *lockScope, granted []*locksv1alpha1.LockClaim) error {
	if slices.ContainsFunc(granted, several) {
		if err := r.memory.lane.drain(ctx, s.name); err != nil {
			return err
		}
		return r.writeEach(ctx, s, granted)
	}
	var writes []*laneWrite
	for _, c := range granted {
		base, out, err := r.claimWrite(ctx, s, c)
		if err != nil {
			return err
		}
		if out == nil {
			continue
		}
		// The write takes its own copy: the client writes the API server's answer into it while
		// the pass goes on reading c.
		want, out := c.DeepCopy(), out.DeepCopy()
		want.ResourceVersion = base.ResourceVersion
		writes = append(writes, &laneWrite{want: want, write: func() (*locksv1alpha1.LockClaim, error) {
			if wrote, err := r.sendClaim(ctx, s, want.UID, base, out); !wrote || err != nil {
				return nil, err
			}
			return out, nil
		}})
	}
	if len(writes) > 0 {
		r.memory.lane.start(s.name, writes, func(err error) {
			ctrl.LoggerFrom(ctx).Info("A new holder's Held write failed; the lock's next pass writes it again", "lock", s.name.Name, "error", err.Error())
			r.wake(s.name)
		})
	}
	return nil
}

// claimWrite is what writing c takes: the claim as the API server has it, after this process's
// pending write of it if any (awaitWrite), and as the write makes it; out is nil when there is
// nothing to write.
func (r *Reconciler) claimWrite(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) (base, out *locksv1alpha1.LockClaim, err error) {
	if err := r.awaitWrite(ctx, s, c.UID); err != nil {
		return nil, nil, err
	}
	v := s.base(c.UID)
	if s.vanished[c.UID] || sameClaimStatus(&v.part.Status, &c.Status) {
		return nil, nil, nil
	}
	// A several-lock claim is written whole, with this lock's part put back (several.go).
	base, out = v.toWrite(c, s.name.Name)
	stampArrival(base, out)
	return base, out, nil
}

// awaitWrite waits for this process's pending Held write of claim uid, if any (heldLane.await),
// and records what it wrote as the pass's base of the claim. A write of this very pass records
// itself (sendClaim); one of an earlier pass is recorded here.
func (r *Reconciler) awaitWrite(ctx context.Context, s *lockScope, uid types.UID) error {
	wrote, err := r.memory.lane.await(ctx, uid)
	if wrote != nil {
		s.wrote.record(uid, wrote, s.name.Name)
	}
	return err
}

// sendClaim patches claim uid from base to out and says whether it wrote it (not when the claim
// is gone).
func (r *Reconciler) sendClaim(ctx context.Context, s *lockScope, uid types.UID, base, out *locksv1alpha1.LockClaim) (bool, error) {
	if err := r.Guard.Check(); err != nil {
		return false, err
	}
	if isHeld(out) && !isHeld(base) {
		failpoint.Pause(failpoint.GrantStatus, out.Namespace+"/"+out.Name)
	}
	if err := r.Status().Patch(ctx, out, seams.claimPatch(base)); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	r.memory.written.note(out)
	r.trace(TraceClaimWritten, s.name, out.Name)
	s.wrote.record(uid, out, s.name.Name)
	if base.Status.Phase != out.Status.Phase {
		r.recordTransition(s.name, out)
	}
	return true, nil
}

// awaitClaim waits for this process's pending write of c, if any, and moves c's resourceVersion to
// the claim as the pass last knows it, so that a metadata update of c (its finalizers) follows the
// pass's writes and does not conflict with them. The held lane writes a copy of c, which keeps the
// resourceVersion it was read at, and its write may be done before this is called.
func (r *Reconciler) awaitClaim(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) error {
	if err := r.awaitWrite(ctx, s, c.UID); err != nil {
		return err
	}
	c.ResourceVersion = s.base(c.UID).part.ResourceVersion
	return nil
}

// finishDeletes lets the lock go once it is being deleted and no claim holds or waits for it
// (the claims' own finalizers came off in writeClaims).
func (r *Reconciler) finishDeletes(ctx context.Context, s *lockScope) (stepResult, error) {
	if s.lock.DeletionTimestamp.IsZero() {
		return stepResult{}, nil
	}
	for _, c := range s.claims {
		if isHeld(c) || (c.DeletionTimestamp.IsZero() && !isFinal(c.Status.Phase)) {
			return stepResult{}, nil
		}
	}
	if !controllerutil.ContainsFinalizer(s.lock, locksv1alpha1.Finalizer) {
		return stepResult{}, nil
	}
	// The key goes before the lock: another lock that waits for it may take it at once.
	if err := r.Keys.Release(ctx, ledgerKey(s), ownerOf(s.lock)); err != nil {
		return stepResult{}, err
	}
	controllerutil.RemoveFinalizer(s.lock, locksv1alpha1.Finalizer)
	r.memory.forget(s.name, s.lock.UID)
	return stepResult{}, client.IgnoreNotFound(r.Update(ctx, s.lock))
}

// recordTransition emits the event of claim's new phase, which the pass of lock wrote, if it
// deserves one: Warnings always, the Normal ones of a hot lock thinned (eventthin.go). The lock
// that wrote it is the one whose traffic the thinning weighs: for a claim of several locks, its
// first lock's pass writes its wait and its grant.
func (r *Reconciler) recordTransition(lock types.NamespacedName, claim *locksv1alpha1.LockClaim) {
	eventType, reason, message, ok := transitionEvent(&claim.Status)
	if !ok {
		return
	}
	if eventType == corev1.EventTypeNormal {
		record, note := r.memory.events.admit(lock, r.Clock.Now())
		if !record {
			r.Metrics.EventsDropped.WithLabelValues("hot-lock").Inc()
			return
		}
		message += note
	}
	r.Recorder.Eventf(claim, nil, eventType, reason, string(claim.Status.Phase), "%s", message)
}

// lowChunk picks the claims of low (those with low-priority changes) that this pass writes: the
// first lowPriorityBatch of the round under way, in queue order.
func (r *Reconciler) lowChunk(s *lockScope, low []*locksv1alpha1.LockClaim) []*locksv1alpha1.LockClaim {
	if len(s.lowPending) == 0 {
		return nil
	}
	return pickLowBatch(s.waiters, low, s.lowPending, lowPriorityBatch)
}

// lowChunkDone takes the claims written and those that no longer need a write out of the round,
// and asks for the next pass soon if the round is not done.
func (r *Reconciler) lowChunkDone(s *lockScope, low, written []*locksv1alpha1.LockClaim) stepResult {
	if len(s.lowPending) == 0 {
		return stepResult{}
	}
	if trimRound(s.lowPending, low, written) > 0 {
		return after(lowPriorityNext)
	}
	return stepResult{}
}

// removeFinalizer lets go a deleted claim that an earlier lockwarden gave the release finalizer,
// once the lock record that released it is written (a no-op for claims without it).
func (r *Reconciler) removeFinalizer(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) error {
	if !controllerutil.RemoveFinalizer(c, locksv1alpha1.Finalizer) {
		return nil
	}
	if err := r.awaitClaim(ctx, s, c); err != nil {
		return err
	}
	r.memory.written.forget(c.UID)
	return client.IgnoreNotFound(r.Update(ctx, c))
}
