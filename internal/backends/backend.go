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

// Package backends defines what a lock store must do for lockwarden: the Backend interface, the
// Lease it hands out, and the sentinel errors callers branch on. One package per store
// (kubernetes, redis, redlock, etcd, zookeeper, sql) implements it; only that package imports the
// store's driver, and controllers see nothing but this interface.
//
// A Backend value is one session of the controller with one store. Locks are held by identity
// (an opaque string, normally the holder pod's UID), not by session: a controller that restarts
// and opens a new session resumes the locks its predecessor held for the same identities by
// calling TryAcquire or Renew again, as long as they have not expired.
package backends

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Backends wrap them (with %w or a typed error whose Unwrap returns them) so
// that callers can use errors.Is.
var (
	// ErrLocked: the key is held by another identity.
	ErrLocked = errors.New("lock is held by another holder")
	// ErrNotHeld: the key is not held by the given identity (it is free, expired, or someone
	// else's).
	ErrNotHeld = errors.New("lock is not held by this holder")
)

// Lease is a lock held on a backend, as that backend last confirmed it.
type Lease struct {
	// Key is the lock's key on the backend.
	Key string
	// Identity is the holder identity the backend stores as owner.
	Identity string
	// TTL is the time to live requested at the last acquire or renewal.
	TTL time.Duration
	// AcquireTime is when the current hold began, as far as the backend knows.
	AcquireTime time.Time
	// ExpireTime is when the lock expires on the backend unless renewed. It is computed by the
	// backend from its own notion of time where it has one (a SQL database's clock), else from the
	// session's clock, and is a best estimate: holders must still use fencing tokens.
	ExpireTime time.Time
	// Version is an opaque backend value that lets Renew and Release check they act on the hold
	// they were given (e.g. a resourceVersion or a create revision). Empty when not applicable.
	Version string
	// Shared: the hold is one place of a shared lock (Sharer.TryAcquireShared), not the key's
	// exclusive hold. Renew and Release use it to find the hold.
	Shared bool
}

// Backend is one session with a lock store. Every call takes a context and returns quickly: calls
// carry per-call timeouts far below any lock's TTL, and none of them waits for a lock to become
// free. Implementations must be safe for concurrent use.
type Backend interface {
	// TryAcquire takes key for identity with the given TTL, once. If identity already holds key
	// it refreshes the hold and returns it (reentrancy and resumption after a restart). If another
	// identity holds an unexpired lock it returns an error wrapping ErrLocked, usually a
	// *LockedError that says who holds it and until when.
	TryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (Lease, error)

	// Renew extends every lease in one batch, in a number of round trips that does not grow with
	// len(leases). Leases the backend no longer holds for their identity come back in lost; the
	// rest in renewed, with new expiry times. err is set only when the backend could not be asked
	// at all, in which case renewed and lost are both empty and nothing is known.
	Renew(ctx context.Context, leases []Lease, ttl time.Duration) (renewed, lost []Lease, err error)

	// Release frees the lock if lease.Identity still holds it. A lock that is free or expired
	// counts as released (nil). A lock now held by another identity is never touched; the result
	// wraps ErrNotHeld. A shared lease frees only its identity's place; a place that is free or
	// expired counts as released whoever holds the others.
	Release(ctx context.Context, lease Lease) error

	// Inspect reports who holds key. A free or expired lock gives an error wrapping ErrNotHeld.
	// A key held in shared places (Sharer) reports one of them, with Lease.Shared set.
	Inspect(ctx context.Context, key string) (Lease, error)

	// Ping checks that the store is reachable, that the session is authenticated and that it can
	// write. Its error message is shown to users in the LockBackend's Ready condition, so it must
	// say what is wrong without revealing secrets.
	Ping(ctx context.Context) error

	// Close ends the session. Locks it held expire by TTL unless another session resumes them.
	Close(ctx context.Context) error
}

// Sharer is implemented by backends that hold shared locks natively: a key with a number of
// places, each held by one identity (a semaphore; with exclusive holds beside them, a read/write
// lock). An exclusive hold (TryAcquire) and shared places exclude each other atomically on the
// store, in both directions and whatever the identities: TryAcquire fails with ErrLocked while
// any place of key is held, and TryAcquireShared fails while key is held exclusively. The
// exclusive hold keeps the layout that TryAcquire has always used, so that clients outside
// lockwarden that speak the store's standard mutex protocol are still excluded.
//
// Renew and Release take shared leases (Lease.Shared) beside exclusive ones; Renew still costs a
// number of round trips that does not grow with the number of leases or places.
type Sharer interface {
	// TryAcquireShared takes one of key's places for identity with the given TTL, once: it
	// succeeds while fewer than places other identities hold a place. If identity already holds
	// a place it refreshes it and returns it (reentrancy and resumption after a restart), even
	// when places is now lower than the number held: a lower limit takes effect as holders
	// leave, and no backend ever takes a place away. Otherwise it fails with an error wrapping
	// ErrLocked (a *LockedError naming a holder when the backend can tell). places must be at
	// least 1.
	TryAcquireShared(ctx context.Context, key, identity string, ttl time.Duration, places int) (Lease, error)

	// Holders lists every live hold of key: the exclusive one, or each place (Lease.Shared). A
	// free key gives an empty list and no error.
	Holders(ctx context.Context, key string) ([]Lease, error)
}

// AsSharer returns b, or the backend b wraps, as a Sharer.
func AsSharer(b Backend) (Sharer, bool) {
	for b != nil {
		if s, ok := b.(Sharer); ok {
			return s, true
		}
		u, ok := b.(Unwrapper)
		if !ok {
			return nil, false
		}
		b = u.Unwrap()
	}
	return nil, false
}

// LockedError says who holds a lock that could not be taken.
type LockedError struct {
	// Key is the contended key.
	Key string
	// Holder is the identity that holds it, when the backend can tell.
	Holder string
	// ExpireTime is when the holder's lease expires unless renewed; zero when unknown.
	ExpireTime time.Time
}

func (e *LockedError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("lock %q is held by another holder", e.Key)
	}
	return fmt.Sprintf("lock %q is held by %q", e.Key, e.Holder)
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Unwrap() error { return ErrLocked }

// FreeWatcher is implemented by backends that can push the news that a contended key was freed
// (ZooKeeper and etcd watches), so that the next claim in line is granted at once rather than on
// its next retry. It matters most for locks held by clients outside lockwarden, whose release the
// controller cannot otherwise see.
type FreeWatcher interface {
	// WatchFree arranges for notify to be called once, from another goroutine, when key's lock
	// may have become free: its holder released it, its session ended, or the watch itself was
	// lost (connection closed), after which the caller should look again. notify never blocks
	// the backend for long, and may be called before WatchFree returns if the key is already
	// free. Callers keep at most one watch per key pending.
	WatchFree(ctx context.Context, key string, notify func()) error
}

// RecordKeeper is implemented by a backend whose holds live in the DistributedLock's own status
// (the built-in backend in record mode): the controller's compare-and-swap of the lock record is
// what excludes, so TryAcquire and Release send nothing, and a grant or a handoff costs the lock
// record's write alone. The backend keeps the session whose renewal keeps every hold alive.
type RecordKeeper interface {
	// KeepsHoldsInLockRecords marks the interface.
	KeepsHoldsInLockRecords()
	// HoldAlive says whether a hold recorded as granted at acquired with ttl still lives (the
	// session was renewed since then with no gap as long as ttl), and until when unless renewed.
	// A controller that resumes holds after a restart or a leader change asks it.
	HoldAlive(ctx context.Context, acquired time.Time, ttl time.Duration) (expire time.Time, alive bool, err error)
	// KeepSession renews the session without judging any hold. A new leader calls it for the
	// holds it has not resumed yet, so that they do not lapse while its passes get to them; a
	// hold that lapsed before stays lapsed (the session records the gap).
	KeepSession(ctx context.Context) error
}

// AsRecordKeeper returns b, or the backend b wraps, as a RecordKeeper.
func AsRecordKeeper(b Backend) (RecordKeeper, bool) {
	for b != nil {
		if k, ok := b.(RecordKeeper); ok {
			return k, true
		}
		u, ok := b.(Unwrapper)
		if !ok {
			return nil, false
		}
		b = u.Unwrap()
	}
	return nil, false
}

// Unwrapper is implemented by backends that wrap another (metrics instrumentation), so that
// optional interfaces such as FreeWatcher can be found under the wrapper.
type Unwrapper interface {
	Unwrap() Backend
}

// AsFreeWatcher returns b, or the backend b wraps, as a FreeWatcher.
func AsFreeWatcher(b Backend) (FreeWatcher, bool) {
	for b != nil {
		if w, ok := b.(FreeWatcher); ok {
			return w, true
		}
		u, ok := b.(Unwrapper)
		if !ok {
			return nil, false
		}
		b = u.Unwrap()
	}
	return nil, false
}

// DegradedError is what Ping returns when the store works with less redundancy than configured
// (a Redlock node down while a majority answers): the backend is usable, and operators should
// know. Err says what failed. It does not unwrap to Err on purpose: a degraded backend is not an
// unavailable one, and errors.Is must not say it is.
type DegradedError struct{ Err error }

func (e *DegradedError) Error() string { return e.Err.Error() }
