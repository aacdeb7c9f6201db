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
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/identity"
	"github.com/lockwarden/lockwarden/internal/mutant"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// This file is the waiting half of a pass: the FIFO queue, reentrant claims joining the hold,
// the one backend acquire for the head of the queue, and the status of those that wait on.

// freeWatchFallback is how often a lock whose head is contended, on a backend that watches the
// contended key, looks again anyway, in case the news of a release is lost (a watch dropped
// without a word).
const freeWatchFallback = 30 * time.Second

// identityOf is the identity claim c holds or asks the backend for: spec.holder.identity, else
// its pod's UID, else its own UID.
func (s *lockScope) identityOf(c *locksv1alpha1.LockClaim) string {
	if isHeld(c) && c.Status.HolderIdentity != "" {
		return c.Status.HolderIdentity
	}
	h := c.Spec.Holder
	switch {
	case h != nil && h.Identity != "":
		return h.Identity
	case h != nil && h.PodName != "" && c.Status.PodUID != "":
		return string(c.Status.PodUID)
	case h != nil && h.PodName != "" && s.pods[h.PodName] != nil:
		return string(s.pods[h.PodName].UID)
	}
	return string(c.UID)
}

// queued is a claim that waits, with what the pass found about it.
type queued struct {
	claim *locksv1alpha1.LockClaim
	// podMissing: its pod does not exist yet.
	podMissing bool
	// heartbeatMissing, when set, says why its heartbeat Lease is not there yet.
	heartbeatMissing string
	// tried: it was the head and the pass tried the backend for it (its status says how that went).
	tried bool
}

// serveQueue ends the waits that are over, lets reentrant claims join the hold, and tries the
// backend for the head of the queue when the lock is free.
func (r *DistributedLockReconciler) serveQueue(ctx context.Context, s *lockScope) error {
	var queue []*queued
	for _, c := range s.claims {
		if isHeld(c) || isFinal(c.Status.Phase) || !c.DeletionTimestamp.IsZero() {
			continue
		}
		var podName string
		if h := c.Spec.Holder; h != nil && h.PodName != "" {
			podName = h.PodName
			if pod := s.pods[podName]; pod != nil && c.Status.PodUID == "" {
				c.Status.PodUID = pod.UID
			}
		}
		v := judgeWaiter(waiterFacts{lockDeleting: !s.lock.DeletionTimestamp.IsZero(), lockName: s.lock.Name,
			podName: podName, pod: s.pods[podName], podUID: c.Status.PodUID})
		v = s.judgeHeartbeat(c, v)
		if v.end != nil {
			r.endClaim(s, c, v.end)
			continue
		}
		if !v.podMissing && v.heartbeatMissing == "" && r.joinHold(s, c) {
			continue
		}
		queue = append(queue, &queued{claim: c, podMissing: v.podMissing, heartbeatMissing: v.heartbeatMissing})
	}
	delayed := s.lockDelayed()
	if s.lock.DeletionTimestamp.IsZero() && s.backend != nil && s.conflict == nil && !s.keyTaken && !delayed &&
		planGrants(s.waiterSlots(queue), s.holdSlots(), 1) > 0 {
		// The holds that ended say so before the key goes to anyone else: whoever reads claims
		// then never sees a claim Held while the backend holds its key for another.
		if err := r.writeEndedHolds(ctx, s); err != nil {
			return err
		}
		queue[0].tried = true
		if err := r.tryHead(ctx, s, queue[0].claim); err != nil {
			return err
		}
		if s.granted != nil {
			queue = queue[1:]
		}
	}
	r.markQueue(s, queue, delayed)
	return nil
}

// waiterSlots describes the queue to planGrants. Every claim asks for the lock exclusively until
// locks have places (maxHolders).
func (s *lockScope) waiterSlots(queue []*queued) []waiterSlot {
	slots := make([]waiterSlot, len(queue))
	for i, q := range queue {
		slots[i] = waiterSlot{mode: grantExclusive, identity: s.identityOf(q.claim), blocked: q.podMissing || q.heartbeatMissing != ""}
	}
	return slots
}

// holdSlots describes the lock's current hold to planGrants.
func (s *lockScope) holdSlots() []holdSlot {
	if rec := s.lock.Status.Holder; rec != nil {
		return []holdSlot{{mode: grantExclusive, identity: rec.Identity}}
	}
	return nil
}

// lockDelayed says whether the lock waits out a lock delay now, and wakes the pass at its end.
func (s *lockScope) lockDelayed() bool {
	var until *time.Time
	if t := s.lock.Status.LockDelayUntil; t != nil {
		until = &t.Time
	}
	if mutant.Active(mutant.IgnoreLockDelay) {
		until = nil
	}
	wait := grantDelay(until, s.now)
	s.wait = soonest(s.wait, wait)
	return wait > 0
}

// joinHold lets a waiting claim with the identity of the current holder share the hold and its
// token (reentrancy), and tells whether it did.
func (r *DistributedLockReconciler) joinHold(s *lockScope, c *locksv1alpha1.LockClaim) bool {
	rec := s.lock.Status.Holder
	if rec == nil || s.identityOf(c) != rec.Identity {
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

// tryHead takes the lock on the backend for the head of the queue, once. On success the lock
// record names the head; writeLock issues its token.
func (r *DistributedLockReconciler) tryHead(ctx context.Context, s *lockScope, head *locksv1alpha1.LockClaim) error {
	// No lock is taken for a claim that could vanish without releasing it.
	if err := r.ensureFinalizer(ctx, s, head); err != nil {
		return err
	}
	if err := checkGuard(r.Guard); err != nil {
		return err
	}
	id := s.identityOf(head)
	onBackend := identity.OnBackend(s.lock.UID, id)
	lease, err := s.backend.TryAcquire(ctx, s.key, onBackend, s.ttl)
	var locked *backends.LockedError
	if errors.As(err, &locked) && r.giveBackOrphan(ctx, s, head, locked.Holder) {
		lease, err = s.backend.TryAcquire(ctx, s.key, onBackend, s.ttl)
	}
	if errors.Is(err, backends.ErrLocked) && mutant.Active(mutant.GrantUnacquired) {
		lease = backends.Lease{Key: s.key, Identity: onBackend, TTL: s.ttl, AcquireTime: s.now, ExpireTime: s.now.Add(s.ttl)}
		err = nil
	}
	locked = nil
	switch {
	case errors.As(err, &locked) || errors.Is(err, backends.ErrLocked):
		// Whoever holds the key is not named: its value may be another namespace's holder or
		// anything a client outside lockwarden wrote.
		msg := "The key is held on the backend by another client"
		retry := maxRetryDelay
		if r.free.watch(ctx, s.backend, backendKey{backend: s.backendName, key: s.key}, s.name) {
			retry = freeWatchFallback
		}
		if locked != nil && !locked.ExpireTime.IsZero() {
			msg += " until " + locked.ExpireTime.UTC().Format(time.RFC3339)
			retry = max(locked.ExpireTime.Sub(s.now), 100*time.Millisecond)
		}
		markWaiting(head, 1, true, locksv1alpha1.ReasonContended, msg)
		s.wait = soonest(s.wait, retry)
		return nil
	case err != nil:
		markWaiting(head, 1, false, locksv1alpha1.ReasonBackendUnavailable, fmt.Sprintf("Backend %s: %v", s.backendName, err))
		s.retryErr = fmt.Errorf("acquiring %s: %w", s.key, err)
		return nil
	}
	s.granted, s.acquired = head, &lease
	s.lock.Status.LockDelayUntil = nil // served: the record need not show it any more
	s.lock.Status.Holder = &locksv1alpha1.LockHolder{
		Claim:           head.Name,
		Identity:        id,
		BackendIdentity: lease.Identity,
		AcquireTime:     *micro(s.now),
		ExpireTime:      micro(lease.ExpireTime),
	}
	return nil
}

// ensureFinalizer adds the release finalizer to a claim that lacks it (one created without it,
// by hand), keeping the status the pass has decided.
func (r *DistributedLockReconciler) ensureFinalizer(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) error {
	if controllerutil.ContainsFinalizer(c, locksv1alpha1.Finalizer) {
		return nil
	}
	status := c.Status.DeepCopy()
	controllerutil.AddFinalizer(c, locksv1alpha1.Finalizer)
	if err := r.Update(ctx, c); err != nil {
		return err
	}
	r.written.note(c)
	base := c.DeepCopy()
	base.Status = s.read[c.UID].Status
	s.read[c.UID] = base
	c.Status = *status
	return nil
}

// giveBackOrphan releases a backend hold of identity if it belongs to another claim of this lock
// that the lock record does not name: a pass took the key for it and then could not record the
// grant (its lock write failed, and so did giving the key back). It tells whether it did.
func (r *DistributedLockReconciler) giveBackOrphan(ctx context.Context, s *lockScope, head *locksv1alpha1.LockClaim, holder string) bool {
	if holder == "" || s.lock.Status.Holder != nil {
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

// markQueue sets the status of the claims that go on waiting, ends those whose wait is over, and
// says when the next deadline is.
func (r *DistributedLockReconciler) markQueue(s *lockScope, queue []*queued, delayed bool) {
	holder := ""
	if rec := s.lock.Status.Holder; rec != nil {
		holder = rec.Claim
	}
	var position int32
	for _, q := range queue {
		c := q.claim
		if deadline, ok := waitDeadline(c); ok {
			if !s.now.Before(deadline) {
				r.endClaim(s, c, timedOutEnding(*c.Spec.WaitTimeoutSeconds))
				continue
			}
			s.wait = soonest(s.wait, deadline.Sub(s.now))
		}
		position++
		switch {
		case s.unusable != nil:
			markWaiting(c, 0, false, unusableReason(s.unusable), s.unusable.Message)
		case s.conflict != nil:
			markWaiting(c, 0, false, s.conflict.Reason, s.conflict.Message)
		case q.podMissing:
			markWaiting(c, position, false, locksv1alpha1.ReasonPodNotFound,
				fmt.Sprintf("Pod %s does not exist in namespace %s; the claim waits for it", c.Spec.Holder.PodName, c.Namespace))
		case q.heartbeatMissing != "":
			markWaiting(c, position, false, locksv1alpha1.ReasonHeartbeatNotFound, q.heartbeatMissing)
		case q.tried:
			// tryHead said how it went.
		case delayed && position == 1 && s.lock.Status.Holder == nil:
			markWaiting(c, position, true, locksv1alpha1.ReasonLockDelay,
				lockDelayMessage(s.lock.Status.LockDelayUntil.Time, s.lock.Spec.LockDelaySeconds))
		default:
			markWaiting(c, position, true, locksv1alpha1.ReasonQueued, queuedMessage(holder, position))
		}
		s.waiters = append(s.waiters, c)
	}
}

func waitDeadline(c *locksv1alpha1.LockClaim) (time.Time, bool) {
	if c.Spec.WaitTimeoutSeconds == nil {
		return time.Time{}, false
	}
	return c.CreationTimestamp.Add(time.Duration(*c.Spec.WaitTimeoutSeconds) * time.Second), true
}
