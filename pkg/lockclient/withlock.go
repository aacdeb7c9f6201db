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
	"time"
)

// DefaultReleaseTimeout bounds WithLock's release of the lock after its function returns.
const DefaultReleaseTimeout = 30 * time.Second

// Option changes how WithLock takes and releases the lock.
type Option func(*withLockOptions)

type withLockOptions struct {
	try            bool
	releaseTimeout time.Duration
}

// Try makes WithLock take the lock with TryAcquire: one attempt, ErrLockBusy instead of waiting.
// Default: Acquire, which waits (for req.Timeout, or for ever).
func Try() Option { return func(o *withLockOptions) { o.try = true } }

// ReleaseTimeout bounds the release after the function returns. Default DefaultReleaseTimeout.
func ReleaseTimeout(d time.Duration) Option {
	return func(o *withLockOptions) { o.releaseTimeout = d }
}

// WithLock takes the lock that req asks for, runs fn while holding it, and releases it after fn
// returns or panics. fn's context ends when ctx does or when the lock is lost; its
// context.Cause is then the *Error of kind ErrLost. fn gets the Hold for the fencing token.
//
// WithLock returns the error of taking the lock, else fn's error. If the lock was lost while fn
// ran, the loss is joined to fn's error (or returned alone when fn returned nil), so that
// errors.Is(err, ErrLost) tells that fn's work may have been done without the lock. A failed
// release is returned only when there is no other error: the claim has been deleted by then,
// and the controller releases the lock.
func WithLock(ctx context.Context, c *Client, req Request, fn func(ctx context.Context, hold *Hold) error, opts ...Option) (err error) {
	o := withLockOptions{releaseTimeout: DefaultReleaseTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	acquire := c.Acquire
	if o.try {
		acquire = c.TryAcquire
	}
	hold, err := acquire(ctx, req)
	if err != nil {
		return err
	}
	defer func() {
		// Also runs while fn panics; the panic goes on after the release.
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.releaseTimeout)
		defer cancel()
		if relErr := hold.Release(releaseCtx); err == nil {
			err = relErr
		}
	}()

	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(hold.Context(), func() { cancel(context.Cause(hold.Context())) })
	defer stop()

	err = fn(fnCtx, hold)
	if lost := hold.Err(); errors.Is(lost, ErrLost) {
		return errors.Join(err, lost)
	}
	return err
}
