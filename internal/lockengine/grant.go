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

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/identity"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// This file is the backend acquire of a grant: the one call that takes the lock (or one of its
// places) for the head of the queue, what a refusal tells the claim, and the orphan hold a failed
// grant may have left in the way.

// tryGrant takes the lock, or one of its places, on the backend for claim c, the first of the
// queue that this pass has not granted, once, and says whether it did. On success the pass adds c
// to the lock record, and writeLock issues its token. A refusal is written in c's status, and the
// result says when to try again (a contended key) or what to retry with backoff (a backend error).
func (r *Reconciler) tryGrant(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) (bool, stepResult, error) {
	if err := r.Guard.Check(); err != nil {
		return false, stepResult{}, err
	}
	id := s.identityOf(c)
	onBackend := identity.OnBackend(s.lock.UID, id)
	mode := s.claimMode(c)
	acquire := s.acquirer(mode)
	if acquire == nil {
		markWaiting(c, 1, false, locksv1alpha1.ReasonBackendUnavailable,
			fmt.Sprintf("LockBackend %s cannot hold shared locks; set maxHolders to 1 on DistributedLock %s", s.use.name, s.lock.Name))
		return false, stepResult{}, nil
	}
	lease, err := acquire(ctx, onBackend)
	var locked *backends.LockedError
	if errors.As(err, &locked) && r.giveBackOrphan(ctx, s, c, locked.Holder) {
		lease, err = acquire(ctx, onBackend)
	}
	lease, err = seams.acquired(lease, err, backends.Lease{Key: s.use.key, Identity: onBackend, TTL: s.use.ttl, AcquireTime: s.now, ExpireTime: s.now.Add(s.use.ttl)})
	locked = nil
	switch {
	case errors.As(err, &locked) || errors.Is(err, backends.ErrLocked):
		watched := r.memory.free.watch(ctx, s.use.session, backendKey{backend: s.use.name, key: s.use.key}, s.name)
		msg, retry := contention(locked, watched, s.now)
		markWaiting(c, 1, true, locksv1alpha1.ReasonContended, msg)
		return false, after(retry), nil
	case err != nil:
		// The driver's error (host:port, database names, TLS details) is the cluster admin's to
		// read: in the controller's log, through the pass's retry error, not in a namespaced claim's
		// status.
		markWaiting(c, 1, false, locksv1alpha1.ReasonBackendUnavailable,
			fmt.Sprintf("LockBackend %s did not answer the grant; the controller's log says why, and the LockBackend's Ready condition whether it is reachable", s.use.name))
		return false, stepResult{retry: fmt.Errorf("acquiring %s: %w", s.use.key, err)}, nil
	}
	_, inRecord := backends.AsRecordKeeper(s.use.session)
	lease = heldFromRecord(lease, s.now, inRecord)
	s.lock.Status.LockDelayUntil = nil // served: the record need not show it any more
	s.lock.Status.Holders = append(s.lock.Status.Holders, holderRecord(c, s.recordedHolderOf(c), id, lease, mode, s.now))
	s.grants = append(s.grants, grant{claim: c, lease: lease, record: len(s.lock.Status.Holders) - 1})
	return true, stepResult{}, nil
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
	_, records := backends.AsRecordKeeper(s.use.session)
	if mode == grantExclusive || records {
		return func(ctx context.Context, onBackend string) (backends.Lease, error) {
			lease, err := s.use.session.TryAcquire(ctx, s.use.key, onBackend, s.use.ttl)
			lease.Shared = mode == grantShared
			return lease, err
		}
	}
	sharer, ok := backends.AsSharer(s.use.session)
	if !ok {
		return nil
	}
	return func(ctx context.Context, onBackend string) (backends.Lease, error) {
		return sharer.TryAcquireShared(ctx, s.use.key, onBackend, s.use.ttl, int(s.maxHolders()))
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
		if _, tracked := r.Renewer.Lookup(renewal.HoldKey{Backend: s.use.name, Key: s.use.key, Identity: holder}); tracked {
			return false // a live hold of this identity, not an orphan
		}
		err := s.use.session.Release(ctx, backends.Lease{Key: s.use.key, Identity: holder, TTL: s.use.ttl})
		if err != nil && !errors.Is(err, backends.ErrNotHeld) {
			return false
		}
		ctrl.LoggerFrom(ctx).Info("Released a hold that no grant recorded", "key", s.use.key, "identity", holder)
		return true
	}
	return false
}
