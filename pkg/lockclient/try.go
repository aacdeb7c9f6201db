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

package lockclient

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// DefaultTryTimeout bounds how long TryAcquire waits for the controller's answer when the
// Request has no Timeout.
const DefaultTryTimeout = 30 * time.Second

// TryAcquire asks for the lock once, without queueing: it returns the Hold when the lock is
// granted at once, and an *Error of kind ErrLockBusy when it is taken.
//
// The controller grants asynchronously, so "at once" means on the controller's first answer to
// the claim that TryAcquire creates, not within some time: the claim becomes Held (granted), or
// stays Pending with the Acquired reason Queued behind other claims (queue position 2 or more,
// or position 1 behind holders that leave it no room: every place taken, or an Exclusive holder
// or claim beside holders), or Contended (a client outside
// lockwarden holds the backend key). A busy lock's claim is deleted, and TryAcquire returns once
// it is gone, so a busy answer leaves nothing behind. Between the answer and the deletion the
// controller may still grant the claim (the holder let go just then); the deletion releases it
// again at once, with no work done under it.
//
// req.Timeout (DefaultTryTimeout when 0) bounds the wait for that answer, for a controller that
// is down or a backend that cannot be reached: then the error is ErrTimedOut and the claim is
// deleted too. It is also written to the claim as spec.waitTimeoutSeconds, so that the
// controller never grants the claim of a caller that has died meanwhile.
//
// For a pod that already has a claim for the lock (Reattached): when that claim holds the lock
// the Hold is returned; when it waits, the error is ErrLockBusy and the claim, which another
// process of the pod may be waiting on, is left as it is.
func (c *Client) TryAcquire(ctx context.Context, req Request) (*Hold, error) {
	start := time.Now()
	if req.Timeout <= 0 {
		req.Timeout = DefaultTryTimeout
	}
	waitCtx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	claim, reattached, hb, err := c.claim(waitCtx, req)
	if err != nil {
		return nil, c.timedOut(ctx, waitCtx, req.Namespace, req.label(), "", err)
	}
	res, err := c.try(waitCtx, claim)
	if err == nil {
		res.Waited = time.Since(start)
		res.Reattached = reattached
		hold := newHold(ctx, c, res)
		hold.heartbeat = hb
		return hold, nil
	}
	if waitCtx.Err() != nil && ctx.Err() == nil {
		err = &Error{Kind: ErrTimedOut, Namespace: req.Namespace, Lock: req.label(), Claim: claim.Name, Err: context.DeadlineExceeded,
			Detail: fmt.Sprintf("no answer from the lockwarden controller within %s for lock %q in namespace %q (claim %q)",
				req.Timeout, req.label(), req.Namespace, claim.Name)}
	}
	if !reattached {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		// Best effort: the caller learns about the lock either way.
		_ = c.deleteAndWait(cleanup, claim)
		_ = hb.stop(cleanup)
	}
	return nil, err
}

// try waits for the controller's first answer to claim: a result when it holds the lock, an
// ErrLockBusy error when the lock is taken, or the error that Wait would return.
func (c *Client) try(ctx context.Context, claim *locksv1alpha1.LockClaim) (*Result, error) {
	var res *Result
	err := c.watchClaim(ctx, claim.Namespace, claim.Name, func(current *locksv1alpha1.LockClaim) (bool, error) {
		if current == nil || current.UID != claim.UID {
			return true, &Error{Kind: ErrClaimEnded, Namespace: claim.Namespace, Lock: locksLabel(claim), Claim: claim.Name,
				Detail: fmt.Sprintf("claim %q in namespace %q was deleted before the controller answered", claim.Name, claim.Namespace)}
		}
		r, err := c.evaluate(ctx, current)
		if r != nil || err != nil {
			res = r
			return true, err
		}
		var lock *locksv1alpha1.DistributedLock
		if needsLockHolder(current) {
			lock = &locksv1alpha1.DistributedLock{}
			// A claim of several locks is queued on its home lock, the first in name order.
			home := current.Spec.Locks()[0]
			if err := c.kube.Get(ctx, client.ObjectKey{Namespace: current.Namespace, Name: home}, lock); err != nil {
				return true, apiError(err, "reading DistributedLock "+home)
			}
		}
		if isBusy(current, lock) {
			return true, &Error{Kind: ErrLockBusy, Namespace: current.Namespace, Lock: locksLabel(current), Claim: current.Name,
				Phase: current.Status.Phase, Reason: acquiredReason(current),
				Detail: fmt.Sprintf("lock %q in namespace %q is busy (%s)", locksLabel(current), current.Namespace, busyDetail(current, lock))}
		}
		return false, nil
	})
	return res, err
}

// queuedAt is the queue position of a claim whose status says Pending and Queued, and 0 for any
// other claim.
func queuedAt(claim *locksv1alpha1.LockClaim) int32 {
	cond := meta.FindStatusCondition(claim.Status.Conditions, locksv1alpha1.ConditionAcquired)
	if claim.Status.Phase != locksv1alpha1.ClaimPending || cond == nil || cond.Status != metav1.ConditionFalse ||
		cond.Reason != locksv1alpha1.ReasonQueued {
		return 0
	}
	return claim.Status.QueuePosition
}

// needsLockHolder says whether isBusy needs the lock's holders to judge claim, or to say who holds
// it: the claim is queued (next in the queue, it waits either behind holders or for a moment, a
// place having just come free).
func needsLockHolder(claim *locksv1alpha1.LockClaim) bool {
	return queuedAt(claim) >= 1
}

// busyDetail says why a claim that isBusy found the lock taken: a Contended claim's own message
// (another client holds the backend key); for a queued one, who holds the lock by its record
// (lock, read by needsLockHolder) and how many claims are ahead, which the claim's first status
// gives exactly.
func busyDetail(claim *locksv1alpha1.LockClaim, lock *locksv1alpha1.DistributedLock) string {
	pos := queuedAt(claim)
	if pos == 0 || lock == nil {
		return acquiredMessage(claim)
	}
	var held string
	switch holders := lock.Status.CurrentHolders(); len(holders) {
	case 0:
		held = "not held"
	case 1:
		held = "held by claim " + holders[0].Claim
	default:
		held = fmt.Sprintf("held by %d claims", len(holders))
	}
	if pos > 1 {
		return fmt.Sprintf("%s; %d claim(s) ahead in the queue", held, pos-1)
	}
	return held
}

// isBusy says whether a waiting claim's status is the controller's answer that the lock is
// taken: Contended (another client holds the backend key), Queued behind other claims, or Queued
// first in line while lock (read when needsLockHolder says so) has no room for it. Anything else
// (no status yet, a backend outage being waited out, a place that came free after the status was
// written) is no answer yet.
func isBusy(claim *locksv1alpha1.LockClaim, lock *locksv1alpha1.DistributedLock) bool {
	cond := meta.FindStatusCondition(claim.Status.Conditions, locksv1alpha1.ConditionAcquired)
	if claim.Status.Phase != locksv1alpha1.ClaimPending || cond == nil || cond.Status != metav1.ConditionFalse {
		return false
	}
	if cond.Reason == locksv1alpha1.ReasonContended || cond.Reason == locksv1alpha1.ReasonWaitingForLocks {
		return true // another client holds a key; or, for several locks, one is held or has claims ahead
	}
	switch pos := queuedAt(claim); {
	case pos > 1:
		return true
	case pos == 1:
		return lock != nil && !hasRoomFor(lock, claim)
	}
	return false
}

// hasRoomFor says whether the lock's record leaves room for claim beside its holders: it is free,
// already names the claim, or has a free place and neither the claim nor a holder is Exclusive.
func hasRoomFor(lock *locksv1alpha1.DistributedLock, claim *locksv1alpha1.LockClaim) bool {
	holders := lock.Status.CurrentHolders()
	if len(holders) == 0 || slices.ContainsFunc(holders, func(h locksv1alpha1.LockHolder) bool { return h.Claim == claim.Name }) {
		return true
	}
	if lock.Spec.MaxHolders <= 1 || claimMode(claim) == locksv1alpha1.LockModeExclusive || len(holders) >= int(lock.Spec.MaxHolders) {
		return false
	}
	return !slices.ContainsFunc(holders, func(h locksv1alpha1.LockHolder) bool { return h.Mode != locksv1alpha1.LockModeShared })
}
