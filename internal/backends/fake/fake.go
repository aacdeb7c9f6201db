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

// Package fake is an in-memory backends.Backend for unit tests of controllers. It keeps the same
// promises as the real backends (it passes the conformance suite in backendtest) and adds test
// hooks to make the store fail, to let an outside client take a key, and to count calls.
//
// A Backend is one session on an in-memory store. NewSession opens another session on the same
// store, as a restarted controller would. Expiry is computed from the injected clock, exactly: a
// hold taken at t with TTL d is held until t+d (exclusive).
package fake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// Names of the operations that Calls counts: the Backend method names.
const (
	OpTryAcquire = "TryAcquire"
	OpRenew      = "Renew"
	OpRelease    = "Release"
	OpInspect    = "Inspect"
	OpPing       = "Ping"
	OpClose      = "Close"
)

// StealTTL is the TTL Steal gives a key that was not held before; a key that was held keeps its
// previous TTL.
const StealTTL = 30 * time.Second

// errClosed is returned by every call on a session after Close.
var errClosed = errors.New("fake backend: session is closed")

// Option configures New.
type Option func(*store)

// WithClock sets the clock that TTLs are measured with. Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(s *store) { s.clock = c }
}

// store is the state shared by all sessions: the holds and the version counter.
type store struct {
	clock clock.PassiveClock

	mu sync.Mutex
	// holds maps a key to its last hold; an entry whose expiry has passed is free.
	holds map[string]hold
	// places maps a key to its shared places by identity (shared.go); an entry whose expiry has
	// passed is free.
	places map[string]map[string]hold
	// version numbers the writes, so that every new or refreshed hold has a fresh Version.
	version int64
}

// hold is one key's owner as the store records it.
type hold struct {
	identity    string
	ttl         time.Duration
	acquireTime time.Time
	expireTime  time.Time
	version     string
	// shared: the hold is one of the key's places.
	shared bool
}

func (h hold) lease(key string) backends.Lease {
	return backends.Lease{
		Shared:      h.shared,
		Key:         key,
		Identity:    h.identity,
		TTL:         h.ttl,
		AcquireTime: h.acquireTime,
		ExpireTime:  h.expireTime,
		Version:     h.version,
	}
}

// heldAt says whether the hold is still in force at now.
func (h hold) heldAt(now time.Time) bool {
	return h.identity != "" && now.Before(h.expireTime)
}

// nextVersion returns a Version no earlier write has used. The caller holds s.mu.
func (s *store) nextVersion() string {
	s.version++
	return strconv.FormatInt(s.version, 10)
}

// Backend is one session on an in-memory lock store. It is safe for concurrent use.
type Backend struct {
	store *store

	mu sync.Mutex
	// unavailable, when set, is returned by every call (see SetUnavailable).
	unavailable error
	// calls counts the calls per operation (see Calls).
	calls  map[string]int
	closed bool
	// stall, when set, holds every call until it is closed (see Stall).
	stall <-chan struct{}
}

var (
	_ backends.Backend = (*Backend)(nil)
	_ backends.Sharer  = (*Backend)(nil)
)

// New returns a session on a new, empty in-memory store.
func New(opts ...Option) *Backend {
	s := &store{clock: clock.RealClock{}, holds: map[string]hold{}, places: map[string]map[string]hold{}}
	for _, opt := range opts {
		opt(s)
	}
	return newSession(s)
}

func newSession(s *store) *Backend {
	return &Backend{store: s, calls: map[string]int{}}
}

// NewSession opens another session on the same store, as a restarted controller or a second
// replica would. Sessions share the holds; each has its own call counts, availability and closed
// state.
func (b *Backend) NewSession() *Backend {
	return newSession(b.store)
}

// SetUnavailable makes every later call on this session fail with err (returned as is, so tests
// can compare it), as if the store were unreachable; SetUnavailable(nil) restores it. Holds are
// untouched: they keep expiring on the clock while the session cannot renew them.
func (b *Backend) SetUnavailable(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unavailable = err
}

// Stall makes every later call on this session (but Close) wait until release is closed or the
// call's context ends, as a store that accepts requests and never answers; Stall(nil) ends it for
// calls made after. Calls already waiting go on once release is closed.
func (b *Backend) Stall(release <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stall = release
}

// Steal makes identity the holder of key, whoever held it, as a client outside lockwarden would
// after the lock expired. The new hold starts now, keeps the key's previous TTL (StealTTL if it
// had none) and has a new Version. It works whether or not the session is unavailable.
func (b *Backend) Steal(key, identity string) {
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	ttl := StealTTL
	if h, ok := s.holds[key]; ok && h.ttl > 0 {
		ttl = h.ttl
	}
	now := s.clock.Now()
	s.holds[key] = hold{identity: identity, ttl: ttl, acquireTime: now, expireTime: now.Add(ttl), version: s.nextVersion()}
}

// Calls returns how many times each operation (OpTryAcquire, OpRenew, ...) was called on this
// session, including calls that failed. The map is a copy.
func (b *Backend) Calls() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.calls)
}

// begin counts a call to op and says whether it may proceed.
func (b *Backend) begin(ctx context.Context, op string) error {
	b.mu.Lock()
	b.calls[op]++
	stall := b.stall
	var err error
	switch {
	case b.unavailable != nil:
		err = b.unavailable
	case b.closed && op != OpClose:
		err = errClosed
	}
	b.mu.Unlock()
	if err != nil {
		return err
	}
	if stall != nil && op != OpClose {
		select {
		case <-stall:
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

// TryAcquire implements backends.Backend.
func (b *Backend) TryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	if err := b.begin(ctx, OpTryAcquire); err != nil {
		return backends.Lease{}, err
	}
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	cur, ok := s.holds[key]
	held := ok && cur.heldAt(now)
	if held && cur.identity != identity {
		return backends.Lease{}, &backends.LockedError{Key: key, Holder: cur.identity, ExpireTime: cur.expireTime}
	}
	if p, ok := s.livePlace(key, now); ok {
		return backends.Lease{}, &backends.LockedError{Key: key, Holder: p.identity, ExpireTime: p.expireTime}
	}
	next := hold{identity: identity, ttl: ttl, acquireTime: now, expireTime: now.Add(ttl), version: s.nextVersion()}
	if held {
		// The same identity still holds it: the hold continues (reentrancy, resumption).
		next.acquireTime = cur.acquireTime
	}
	s.holds[key] = next
	return next.lease(key), nil
}

// Renew implements backends.Backend. Each lease is renewed on its own; the cost is one call.
func (b *Backend) Renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) (renewed, lost []backends.Lease, err error) {
	if err := b.begin(ctx, OpRenew); err != nil {
		return nil, nil, err
	}
	if ttl <= 0 {
		return nil, nil, fmt.Errorf("fake backend: renew: ttl must be positive, got %s", ttl)
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	for _, l := range leases {
		if l.Shared {
			if r, ok := s.renewPlace(l, ttl, now); ok {
				renewed = append(renewed, r)
			} else {
				lost = append(lost, l)
			}
			continue
		}
		cur, ok := s.holds[l.Key]
		if !ok || cur.identity != l.Identity || !cur.heldAt(now) {
			lost = append(lost, l)
			continue
		}
		cur.ttl = ttl
		cur.expireTime = now.Add(ttl)
		s.holds[l.Key] = cur
		renewed = append(renewed, cur.lease(l.Key))
	}
	return renewed, lost, nil
}

// Release implements backends.Backend.
func (b *Backend) Release(ctx context.Context, lease backends.Lease) error {
	if err := b.begin(ctx, OpRelease); err != nil {
		return err
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if lease.Shared {
		s.releasePlace(lease)
		return nil
	}
	cur, ok := s.holds[lease.Key]
	switch {
	case !ok || !cur.heldAt(s.clock.Now()):
		// Free or expired: released already. An expired entry is dropped whoever it named,
		// since nobody holds it any more.
		delete(s.holds, lease.Key)
		return nil
	case cur.identity != lease.Identity:
		return fmt.Errorf("fake backend: release %q for %q: held by %q: %w", lease.Key, lease.Identity, cur.identity, backends.ErrNotHeld)
	}
	delete(s.holds, lease.Key)
	return nil
}

// Inspect implements backends.Backend.
func (b *Backend) Inspect(ctx context.Context, key string) (backends.Lease, error) {
	if err := b.begin(ctx, OpInspect); err != nil {
		return backends.Lease{}, err
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.holds[key]
	if p, shared := s.livePlace(key, s.clock.Now()); shared {
		return p.lease(key), nil
	}
	if !ok || !cur.heldAt(s.clock.Now()) {
		return backends.Lease{}, fmt.Errorf("fake backend: inspect %q: %w", key, backends.ErrNotHeld)
	}
	return cur.lease(key), nil
}

// Ping implements backends.Backend: it fails only while the session is unavailable or closed.
func (b *Backend) Ping(ctx context.Context) error {
	return b.begin(ctx, OpPing)
}

// Close implements backends.Backend. Holds stay in the store and expire by TTL; calls on this
// session fail afterwards. Closing twice is harmless.
func (b *Backend) Close(ctx context.Context) error {
	if err := b.begin(ctx, OpClose); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// checkArgs rejects calls that no store could serve.
func checkArgs(key, identity string, ttl time.Duration) error {
	switch {
	case key == "":
		return errors.New("fake backend: key must not be empty")
	case identity == "":
		return errors.New("fake backend: identity must not be empty")
	case ttl <= 0:
		return fmt.Errorf("fake backend: ttl must be positive, got %s", ttl)
	}
	return nil
}
