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
	"errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// ErrReleased is the cause (context.Cause) of a Hold's context that ended because Release was
// called on it.
var ErrReleased = errors.New("lock released by its holder")

// Hold is a granted claim, returned by Acquire and TryAcquire. Its Result fields say what was
// granted (Namespace, Lock, Claim, FencingToken, ...); they are a snapshot of the grant and do
// not change.
//
// Context returns a context that is cancelled as soon as the hold ends: the claim leaves phase
// Held for any reason (Lost because a renewal failed, Released, deleted by someone, its lock
// deleted), or Release is called. Work that must stop when the lock is gone runs under it; its
// context.Cause says why it ended (an *Error of kind ErrLost, or ErrReleased). The claim is
// watched, not polled, from the first call of Context or Err; an end that happened before that
// call is still seen, by the read that starts the watch.
//
// The context also ends, with an ErrLost *Error that matches ErrExpired too, at the hold's local
// deadline (expiry.go): when the last status.expireTime seen, less the Client's clock skew
// allowance, passes without a newer one, or, with a heartbeat, when no renewal of it was confirmed
// for its duration. A holder cut off from the API server so stops before the lock can be granted
// to another, though the controller may in fact still renew it. Call Context right after the
// grant: a deadline that passed before the first call gives the first read two seconds.
//
// Call Release when done: it stops the watch and deletes the claim. A Hold is safe for
// concurrent use.
type Hold struct {
	Result

	c *Client
	// values is the context Acquire was called with, kept for its values only: the hold outlives
	// the caller's deadline for acquiring.
	values context.Context

	start   sync.Once
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stopped chan struct{} // closed when the watch has ended
	// expiry ends the hold at its local deadline (expiry.go).
	expiry *expiry

	release    sync.Once
	releaseErr error

	// heartbeat renews the claim's heartbeat Lease; nil without one.
	heartbeat *heartbeat
}

func newHold(ctx context.Context, c *Client, res *Result) *Hold {
	return &Hold{Result: *res, c: c, values: context.WithoutCancel(ctx)}
}

// Context returns a context that ends when the hold does; see Hold.
func (h *Hold) Context() context.Context {
	h.start.Do(func() {
		h.ctx, h.cancel = context.WithCancelCause(h.values)
		h.stopped = make(chan struct{})
		var ttl time.Duration
		if !h.ExpireTime.IsZero() && !h.AcquireTime.IsZero() {
			ttl = h.ExpireTime.Sub(h.AcquireTime) // the lease, as of the grant
		}
		skew := holdSkew(h.c.skew, ttl)
		var first [bounds]time.Time
		if !h.ExpireTime.IsZero() {
			first[claimBound] = h.ExpireTime.Add(-skew)
		}
		first[heartbeatBound] = h.heartbeat.confirmedUntil()
		h.expiry = seams.startExpiry(h.c.clock, first, func(b bound, due time.Time) {
			h.cancel(expiredError(h, b, due, skew))
		})
		h.heartbeat.onConfirmed(func(until time.Time) { h.expiry.move(heartbeatBound, until) })
		observe := func(claim *locksv1alpha1.LockClaim) { h.expiry.observe(claim, skew) }
		go func() {
			defer close(h.stopped)
			defer h.expiry.stop()
			if err := h.c.waitLost(h.ctx, h.Namespace, h.Claim, h.uid, observe); err != nil {
				h.cancel(err)
			}
		}()
	})
	return h.ctx
}

// Err is nil while the lock is held. Once the hold has ended it is the cause: an *Error of kind
// ErrLost when the lock was lost (or the claim released or deleted by someone else), ErrReleased
// after Release.
func (h *Hold) Err() error {
	ctx := h.Context()
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// Release ends the hold: it cancels the hold's context (cause ErrReleased, unless the lock was
// lost before), deletes the claim and waits, within ctx, until it is gone, then deletes the
// claim's heartbeat Lease, if it has one. Claims carry no finalizer, so the claim is gone at once;
// the controller's next pass of the lock releases the hold and drops it from the lock record
// (status.holders), moments later, and grants the next claim in the same write. A claim that is
// already gone counts as released. Calling Release again returns the first call's result.
func (h *Hold) Release(ctx context.Context) error {
	h.release.Do(func() {
		h.Context()
		h.cancel(ErrReleased)
		<-h.stopped
		claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: h.Claim, UID: h.uid}}
		h.releaseErr = errors.Join(h.c.deleteAndWait(ctx, claim), h.heartbeat.stop(ctx))
	})
	return h.releaseErr
}
