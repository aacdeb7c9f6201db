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
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/fencing"
	"github.com/lockwarden/lockwarden/internal/identity"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// This file is the waiting half of a pass: the FIFO queue, reentrant claims joining the hold,
// the one backend acquire for the head of the queue, and the status of those that wait on.

// freeWatchFallback is how often a lock whose head is contended, on a backend that watches the
// contended key, looks again anyway, in case the news of a release is lost (a watch dropped
// without a word).
const freeWatchFallback = 30 * time.Second

// queued is a claim that waits in the queue, with what the pass found about it.
type queued struct {
	claim *locksv1alpha1.LockClaim
	// tried: it was the head and the pass tried the backend for it (its status says how that went).
	tried bool
}

// aside is a claim that waits outside the queue for its holder to exist.
type aside struct {
	claim   *locksv1alpha1.LockClaim
	missing missingHolder
}

// serveQueue ends the waits that are over, lets reentrant claims join the hold, and tries the
// backend for the head of the queue when the lock is free. A claim whose holder does not exist
// yet waits aside: it is not in the queue, so it never blocks the claims behind it.
func (r *Reconciler) serveQueue(ctx context.Context, s *lockScope) error {
	var queue []*queued
	var asides []aside
	for _, c := range s.claims {
		if isHeld(c) || isFinal(c.Status.Phase) || !c.DeletionTimestamp.IsZero() || s.givingBack(c) {
			continue
		}
		v := s.judgeWaiting(c)
		if v.seen != "" {
			holderOf(c).noteUID(c, v.seen)
		}
		switch {
		case v.end != nil:
			endWait(c, v.end, s.now)
		case v.missing != nil:
			m := *v.missing
			m.created = c.CreationTimestamp.Time
			asides = append(asides, aside{claim: c, missing: m})
		case several(c) || !r.joinHold(s, c):
			queue = append(queue, &queued{claim: c})
		}
	}
	queue, refused := overQueue(queue, s.lock.Spec.MaxQueue)
	for _, q := range refused {
		endWait(q.claim, queueFullEnding(s.lock.Name, *s.lock.Spec.MaxQueue), s.now)
	}
	r.markAside(s, asides)
	delayed := s.lockDelayed()
	grantable := s.lock.DeletionTimestamp.IsZero() && s.backend != nil && s.conflict == nil && !s.keyTaken && !delayed
	// Several-lock claims are granted all their locks at once, by their home lock's pass
	// (joint.go); the claims behind one are granted as if it were not there, until its bound.
	line, ready := lineUp(s.lineSlots(queue), s.holdSlots(), s.maxHolders())
	if grantable && ready >= 0 {
		if err := r.serveSeveral(ctx, s, queue[ready]); err != nil {
			return err
		}
	}
	// (serveSeveral wrote the ended holds before it took any key, as below.)
	inLine := make([]*queued, len(line))
	for i, at := range line {
		inLine[i] = queue[at]
	}
	planned := 0
	if grantable {
		// One write issues at most fencing.PerWrite tokens; the rest are granted by the next pass.
		planned = min(seams.planGrants(s.waiterSlots(inLine), s.holdSlots(), s.maxHolders()), fencing.PerWrite-len(s.grants))
	}
	if planned > 0 || len(s.grants) > 0 {
		// The holds that ended say so before the key goes to anyone else: whoever reads claims
		// then never sees a claim Held while the backend holds its key for another.
		if err := r.writeEndedHolds(ctx, s); err != nil {
			return err
		}
	}
	tried := 0
	for tried < planned {
		q := inLine[tried]
		if s.grantedIdentity(s.identityOf(q.claim)) {
			// It shares a place granted in this pass, whose token is not issued yet: it joins
			// the hold in the next pass, and those behind it wait for that.
			s.wait = soonest(s.wait, time.Millisecond)
			break
		}
		q.tried = true
		tried++
		granted, err := r.tryGrant(ctx, s, q.claim)
		if err != nil {
			return err
		}
		if !granted {
			break
		}
	}
	r.markQueue(s, notGranted(queue, s.grants), delayed)
	return nil
}

// notGranted is the queue without the claims granted in this pass.
func notGranted(queue []*queued, grants []grant) []*queued {
	if len(grants) == 0 {
		return queue
	}
	granted := make(map[*locksv1alpha1.LockClaim]bool, len(grants))
	for _, g := range grants {
		granted[g.claim] = true
	}
	rest := make([]*queued, 0, len(queue))
	for _, q := range queue {
		if !granted[q.claim] {
			rest = append(rest, q)
		}
	}
	return rest
}

// holdToJoin is the recorded hold that waiting claim c may join: the one of c's identity, if its
// holder is c's too (DESIGN.md §2, spec.holder.identity). An identity is readable in the lock's
// status, so it alone would let anyone who may create a claim copy it and be handed another
// pod's live hold and token; the holder (the same pod, with its UID; the same Lease or object;
// or both detached) is what a claim cannot borrow.
func holdToJoin(s *lockScope, c *locksv1alpha1.LockClaim) *locksv1alpha1.LockHolder {
	rec := s.recordOf(s.identityOf(c))
	if rec == nil || !sameHolder(rec.Holder, s.recordedHolderOf(c)) {
		return nil
	}
	return rec
}

// joinHold lets a waiting claim with the identity and holder of a current hold share that hold
// and its token (reentrancy), and tells whether it did. An Exclusive claim cannot join a Shared place: that
// would make a reader a writer beside the other readers.
func (r *Reconciler) joinHold(s *lockScope, c *locksv1alpha1.LockClaim) bool {
	rec := seams.holdToJoin(s, c)
	if rec == nil || (recordShared(rec) && s.claimMode(c) == grantExclusive) {
		return false
	}
	h, ok := r.Renewer.Lookup(s.holdKey(rec.Identity))
	if !ok || h.Lost {
		return false
	}
	r.Renewer.Track(s.backendName, s.backend, h.Lease, client.ObjectKeyFromObject(c))
	markHeld(c, rec.Identity, h.Lease, rec.FencingToken, s.now)
	s.holders = append(s.holders, c)
	return true
}

// tryGrant takes the lock, or one of its places, on the backend for claim c, the first of the
// queue that this pass has not granted, once, and says whether it did. On success the pass adds c
// to the lock record, and writeLock issues its token.
func (r *Reconciler) tryGrant(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) (bool, error) {
	if err := r.Guard.Check(); err != nil {
		return false, err
	}
	id := s.identityOf(c)
	onBackend := identity.OnBackend(s.lock.UID, id)
	mode := s.claimMode(c)
	acquire := s.acquirer(mode)
	if acquire == nil {
		markWaiting(c, 1, false, locksv1alpha1.ReasonBackendUnavailable,
			fmt.Sprintf("LockBackend %s cannot hold shared locks; set maxHolders to 1 on DistributedLock %s", s.backendName, s.lock.Name))
		return false, nil
	}
	lease, err := acquire(ctx, onBackend)
	var locked *backends.LockedError
	if errors.As(err, &locked) && r.giveBackOrphan(ctx, s, c, locked.Holder) {
		lease, err = acquire(ctx, onBackend)
	}
	lease, err = seams.acquired(lease, err, backends.Lease{Key: s.key, Identity: onBackend, TTL: s.ttl, AcquireTime: s.now, ExpireTime: s.now.Add(s.ttl)})
	locked = nil
	switch {
	case errors.As(err, &locked) || errors.Is(err, backends.ErrLocked):
		watched := r.free.watch(ctx, s.backend, backendKey{backend: s.backendName, key: s.key}, s.name)
		msg, retry := contention(locked, watched, s.now)
		markWaiting(c, 1, true, locksv1alpha1.ReasonContended, msg)
		s.wait = soonest(s.wait, retry)
		return false, nil
	case err != nil:
		// The driver's error (host:port, database names, TLS details) is the cluster admin's to
		// read: in the controller's log, through retryErr, not in a namespaced claim's status.
		markWaiting(c, 1, false, locksv1alpha1.ReasonBackendUnavailable,
			fmt.Sprintf("LockBackend %s did not answer the grant; the controller's log says why, and the LockBackend's Ready condition whether it is reachable", s.backendName))
		s.retryErr = fmt.Errorf("acquiring %s: %w", s.key, err)
		return false, nil
	}
	_, inRecord := backends.AsRecordKeeper(s.backend)
	lease = heldFromRecord(lease, s.now, inRecord)
	s.lock.Status.LockDelayUntil = nil // served: the record need not show it any more
	s.lock.Status.Holders = append(s.lock.Status.Holders, holderRecord(c, s.recordedHolderOf(c), id, lease, mode, s.now))
	s.grants = append(s.grants, grant{claim: c, lease: lease, record: len(s.lock.Status.Holders) - 1})
	return true, nil
}

// heldFromRecord is the lease the Renewer keeps for a grant recorded at now. A backend that
// keeps its holds in the lock record judges each hold from the record's acquireTime (a new
// leader resuming it, HoldAlive), which is now, the pass's clock reading; TryAcquire read the
// clock again, later, after the pass's writes before it. Both must be one instant: with the wall
// clock stepped ahead between the two readings, the Renewer judged the hold from the later one
// and kept it, while the record's rule, from the earlier one, said it had lapsed in the step
// (the reliability harness's kubernetes/clock-forward, run seed 138508: a claim Held 2.75 s on a
// key its record no longer held). The earlier instant is the safe one: it lapses no later.
// Other backends keep the lease they returned: their own store decides when it expires.
func heldFromRecord(lease backends.Lease, now time.Time, inRecord bool) backends.Lease {
	if inRecord {
		lease.AcquireTime, lease.ExpireTime = now, now.Add(lease.TTL)
	}
	return lease
}

// acquirer is the backend call that takes the lock in mode for a backend identity; nil when the
// backend cannot hold that mode. A backend that keeps its holds in the lock record (the built-in
// one) describes any hold with TryAcquire: the record's compare-and-swap is what excludes.
func (s *lockScope) acquirer(mode grantMode) func(ctx context.Context, onBackend string) (backends.Lease, error) {
	_, records := backends.AsRecordKeeper(s.backend)
	if mode == grantExclusive || records {
		return func(ctx context.Context, onBackend string) (backends.Lease, error) {
			lease, err := s.backend.TryAcquire(ctx, s.key, onBackend, s.ttl)
			lease.Shared = mode == grantShared
			return lease, err
		}
	}
	sharer, ok := backends.AsSharer(s.backend)
	if !ok {
		return nil
	}
	return func(ctx context.Context, onBackend string) (backends.Lease, error) {
		return sharer.TryAcquireShared(ctx, s.key, onBackend, s.ttl, int(s.maxHolders()))
	}
}

// giveBackOrphan releases a backend hold of identity if it belongs to another claim of this lock
// that the lock record does not name: a pass took the key for it and then could not record the
// grant (its lock write failed, and so did giving the key back). It tells whether it did.
func (r *Reconciler) giveBackOrphan(ctx context.Context, s *lockScope, head *locksv1alpha1.LockClaim, holder string) bool {
	if holder == "" || len(s.lock.Status.Holders) > 0 || len(s.grants) > 0 {
		return false
	}
	for _, c := range s.claims {
		// Only a value this lock's own grant writes can be an orphan of it: a foreign value
		// never equals one (package identity), whatever identity a claim chose.
		if c.UID == head.UID || identity.OnBackend(s.lock.UID, s.identityOf(c)) != holder {
			continue
		}
		if _, tracked := r.Renewer.Lookup(renewal.HoldKey{Backend: s.backendName, Key: s.key, Identity: holder}); tracked {
			return false // a live hold of this identity, not an orphan
		}
		err := s.backend.Release(ctx, backends.Lease{Key: s.key, Identity: holder, TTL: s.ttl})
		if err != nil && !errors.Is(err, backends.ErrNotHeld) {
			return false
		}
		ctrl.LoggerFrom(ctx).Info("Released a hold that no grant recorded", "key", s.key, "identity", holder)
		return true
	}
	return false
}

// waitOver ends the wait of c if its waitTimeoutSeconds has run out, and says whether it did;
// otherwise the pass looks again at that deadline.
func (s *lockScope) waitOver(c *locksv1alpha1.LockClaim) bool {
	deadline, ok := waitDeadline(c)
	switch {
	case !ok:
		return false
	case !s.now.Before(deadline):
		endWait(c, timedOutEnding(*c.Spec.WaitTimeoutSeconds), s.now)
		return true
	}
	s.wait = soonest(s.wait, deadline.Sub(s.now))
	return false
}

// markQueue sets the status of the claims that go on waiting, ends those whose wait is over, and
// says when the next deadline is.
func (r *Reconciler) markQueue(s *lockScope, queue []*queued, delayed bool) {
	holders := s.lock.Status.Holders
	var position int32
	for _, q := range queue {
		c := q.claim
		// A pass that only took the lock's key tried no claim: the next one, a tenth of a second
		// later, does. Ending a wait now would time out a waitTimeoutSeconds 0 claim on a free
		// lock without having tried it.
		if !s.keyTaken && s.waitOver(c) {
			continue
		}
		position++
		// A claim the pass tried the backend for says how that went. A pass that just took the
		// lock's key grants nothing only for that: the next pass, about a tenth of a second
		// later, grants and places the waiters behind; a place written now would be out of
		// date by then, and would cost a write per waiter of a new lock.
		if !q.tried && !s.keyTaken && (!several(c) || homeLock(c) == s.name.Name) {
			w := waitingStatus(waiterPlace{position: position, holders: holders, unusable: s.unusable, conflict: s.conflict,
				delayed: delayed, delayUntil: s.lock.Status.LockDelayUntil, delaySeconds: s.lock.Spec.LockDelaySeconds})
			markWaiting(c, shownPosition(s.read[c.UID].Status.QueuePosition, w.position), w.ready, w.reason, w.message)
		}
		s.waiters = append(s.waiters, c)
	}
}

// markAside sets the status of the claims that wait aside for a holder that does not exist yet,
// and ends those whose wait is over: their own waitTimeoutSeconds, or holderMissingLimit. They
// have no place in the queue (position 0), and the lock's waiting count leaves them out.
func (r *Reconciler) markAside(s *lockScope, asides []aside) {
	for _, a := range asides {
		c := a.claim
		if s.waitOver(c) {
			continue
		}
		end, message, wait := judgeMissingHolder(a.missing, s.now)
		if end != nil {
			endWait(c, end, s.now)
			continue
		}
		s.wait = soonest(s.wait, wait)
		markWaiting(c, 0, false, a.missing.reason, message)
	}
}

// waitDeadline is when claim c stops waiting (waitTimeoutSeconds after its creation); false when
// it waits for ever.
func waitDeadline(c *locksv1alpha1.LockClaim) (time.Time, bool) {
	if c.Spec.WaitTimeoutSeconds == nil {
		return time.Time{}, false
	}
	return c.CreationTimestamp.Add(time.Duration(*c.Spec.WaitTimeoutSeconds) * time.Second), true
}
