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

// Package redis keeps locks on a single Redis server (or a primary behind a stable address), the
// classic way: `SET key identity NX PX ttl` to acquire, Lua scripts that check the owner to renew
// and release, and a watchdog (lockwarden's renewer) that extends held locks every sixth of their
// TTL.
//
// # Keys
//
// The lock key's value is the holder identity, so that another client that takes locks on the
// same key with SET NX (redsync, a Redisson user outside the cluster, a script) is excluded by
// lockwarden's holders and excludes them, and so that a restarted controller resumes a hold by
// identity alone: TryAcquire by the identity that holds the key resets its TTL. Beside each lock
// key, a hold record key ("lockwarden-hold:" + key, with the same TTL) keeps when the hold began
// and a random hold id, which Lease.AcquireTime and Lease.Version report. The package redisnode
// describes the protocol.
//
// Shared locks (backends.Sharer, places.go) turn the lock key into a sorted set of places while
// they are held, so that the key refuses SET NX while any place is live; see places.go.
//
// # Time
//
// Redis expires keys and places by its own clock; the backend estimates expiry by the
// controller's: a lease's ExpireTime is the controller's clock at the start of the call that set
// the TTL, plus the TTL. The key or place was written after that instant, so it expires no
// earlier, as long as the two clocks run at the same rate. A jump of Redis's wall clock (or a
// failover to a replica that had not yet received the key) frees locks early: holders must use
// fencing tokens.
//
// # What it does not promise
//
// Redis replication is asynchronous: a failover can lose a lock that the old primary had
// granted, and a restart without persistence loses every lock. Renew then reports those leases
// lost; meanwhile another holder may have been granted the key. Only fencing tokens make that
// safe.
//
// Redis Cluster is not supported: a lock key and its hold record are written by one script and
// would have to share a hash slot. Point the backend at one server, or at the primary of a
// replicated pair through an address that follows failovers.
package redis

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/internal/redisnode"
)

// DefaultCallTimeout bounds each request unless WithCallTimeout says otherwise: far below the
// minimum lock TTL of 5 s, and far above a healthy Redis's sub-millisecond answers.
const DefaultCallTimeout = 500 * time.Millisecond

// PingKeyPrefix starts the key that Ping writes and deletes.
const PingKeyPrefix = "lockwarden-ping:"

// Config says how to reach the Redis server.
type Config struct {
	// Address is host:port.
	Address string
	// DB is the logical database number.
	DB int
	// Password is sent with AUTH when set. It never appears in errors.
	Password string
	// TLS turns on TLS when set.
	TLS *tls.Config
}

// Option configures New.
type Option func(*Backend)

// WithClock sets the clock that expiry times are computed with. Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(b *Backend) { b.clock = c }
}

// WithCallTimeout sets the timeout of each request. Default DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option {
	return func(b *Backend) { b.callTimeout = d }
}

// Backend is one session with a Redis server. It is safe for concurrent use.
type Backend struct {
	node        *redisnode.Node
	clock       clock.PassiveClock
	callTimeout time.Duration
	// pingKey is this session's probe key, so that sessions never share one.
	pingKey string

	// requests counts requests sent (see RoundTrips).
	requests atomic.Int64
	closed   atomic.Bool
}

var (
	_ backends.Backend = (*Backend)(nil)
	_ backends.Sharer  = (*Backend)(nil)
)

// New returns a session with the server at cfg.Address. It does not connect: Ping checks that
// the server can be reached, authenticated with and written to.
func New(cfg Config, opts ...Option) (*Backend, error) {
	b := &Backend{clock: clock.RealClock{}, callTimeout: DefaultCallTimeout}
	for _, opt := range opts {
		opt(b)
	}
	switch {
	case cfg.Address == "":
		return nil, errors.New("redis backend: Config.Address is required")
	case cfg.DB < 0:
		return nil, fmt.Errorf("redis backend: DB must not be negative, got %d", cfg.DB)
	case b.clock == nil:
		return nil, errors.New("redis backend: the clock must not be nil")
	case b.callTimeout <= 0:
		return nil, fmt.Errorf("redis backend: the call timeout must be positive, got %s", b.callTimeout)
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id) // crypto/rand.Read never fails
	b.pingKey = PingKeyPrefix + hex.EncodeToString(id)
	b.node = redisnode.New(redisnode.Config{Address: cfg.Address, DB: cfg.DB, Password: cfg.Password, TLS: cfg.TLS}, &b.requests)
	return b, nil
}

// RoundTrips returns how many requests (commands or pipelines) the session has sent, failed ones
// included.
func (b *Backend) RoundTrips() int64 { return b.requests.Load() }

// TryAcquire takes key for identity with SET NX PX, or, if identity already holds it, resets its
// TTL and returns the hold as it began. If another value holds the key the error is a
// *backends.LockedError naming it, with its expiry when the key has a TTL.
func (b *Backend) TryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	if err := b.usable(); err != nil {
		return backends.Lease{}, err
	}
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	start := b.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	res, err := b.node.Acquire(ctx, key, ttl, redisnode.NewRecord(start, identity))
	return b.leaseOf(res, err, key, identity, ttl, start, false)
}

// leaseOf turns an acquire script's answer into the lease it granted, or into a
// *backends.LockedError naming the holder (with its expiry when the server gave one).
func (b *Backend) leaseOf(res redisnode.AcquireResult, err error, key, identity string, ttl time.Duration, start time.Time, shared bool) (backends.Lease, error) {
	if err != nil {
		return backends.Lease{}, err
	}
	if res.Outcome == redisnode.Locked {
		locked := &backends.LockedError{Key: key, Holder: res.Holder}
		if res.PTTL >= 0 {
			locked.ExpireTime = b.clock.Now().Add(res.PTTL)
		}
		return backends.Lease{}, locked
	}
	return backends.Lease{
		Key:         key,
		Identity:    identity,
		TTL:         ttl,
		AcquireTime: res.Record.AcquireTime,
		ExpireTime:  start.Add(ttl),
		Version:     res.Record.HoldID,
		Shared:      shared,
	}, nil
}

// Renew resets the TTL of every lease whose identity still holds its key, or for a shared lease
// its place, in one round trip however many leases there are, exclusive and shared alike (one
// pipeline of renewal scripts). A lease whose key is free or held by another value, or whose
// place is free or expired, comes back in lost, untouched: a lost lock is never revived.
func (b *Backend) Renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) (renewed, lost []backends.Lease, err error) {
	if err := b.usable(); err != nil {
		return nil, nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, nil, err
	}
	var claims []redisnode.Claim
	var asked []backends.Lease
	for _, l := range leases {
		if l.Key == "" || l.Identity == "" {
			lost = append(lost, l) // nothing can hold an empty key for an empty identity
			continue
		}
		claims = append(claims, redisnode.Claim{Key: l.Key, Record: redisnode.Record{Identity: l.Identity}, Shared: l.Shared})
		asked = append(asked, l)
	}
	if len(claims) == 0 {
		return nil, lost, nil
	}
	start := b.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	held, err := b.node.Renew(ctx, claims, ttl)
	if err != nil {
		return nil, nil, err
	}
	for i, l := range asked {
		if !held[i].Held {
			lost = append(lost, l)
			continue
		}
		l.TTL, l.ExpireTime = ttl, start.Add(ttl)
		renewed = append(renewed, l)
	}
	return renewed, lost, nil
}

// Release deletes the key if lease.Identity holds it. A free key counts as released; a key held
// by another value is left alone and the error wraps backends.ErrNotHeld. A key held in shared
// places holds no exclusive hold, and counts as released. A shared lease frees its identity's
// place alone, and counts as released when it holds none.
func (b *Backend) Release(ctx context.Context, lease backends.Lease) error {
	if err := b.usable(); err != nil {
		return err
	}
	if lease.Key == "" || lease.Identity == "" {
		return fmt.Errorf("redis backend: cannot release a lease without key and identity (key %q, identity %q)", lease.Key, lease.Identity)
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	if lease.Shared {
		_, err := b.node.ReleaseShared(ctx, lease.Key, lease.Identity)
		return err
	}
	res, err := b.node.Release(ctx, lease.Key, lease.Identity)
	if err != nil {
		return err
	}
	if res.Outcome == redisnode.HeldByOther {
		return fmt.Errorf("redis backend: lock %q is held by %q, not %q: %w", lease.Key, res.Holder, lease.Identity, backends.ErrNotHeld)
	}
	return nil
}

// Inspect reports who holds key (its value, PTTL and hold record, in one script run). A key held
// by a client that writes no hold record comes back with a zero AcquireTime and an empty
// Version; TTL is always zero, since Redis keeps only the time left. A key held in shared places
// reports the place of the lowest identity, with Shared set. A free key gives an error wrapping
// backends.ErrNotHeld.
func (b *Backend) Inspect(ctx context.Context, key string) (backends.Lease, error) {
	if err := b.usable(); err != nil {
		return backends.Lease{}, err
	}
	if key == "" {
		return backends.Lease{}, errors.New("redis backend: key must not be empty")
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	h, err := b.node.Inspect(ctx, key)
	if err != nil {
		return backends.Lease{}, err
	}
	holds := b.leases(key, h)
	if len(holds) == 0 {
		return backends.Lease{}, fmt.Errorf("redis backend: lock %q: %w", key, backends.ErrNotHeld)
	}
	return holds[0], nil
}

// leases turns what the server said about key into the leases of its live holds: the exclusive
// one, or each place, by identity.
func (b *Backend) leases(key string, h redisnode.Holding) []backends.Lease {
	now := b.clock.Now()
	if h.Holder != "" {
		l := backends.Lease{Key: key, Identity: h.Holder}
		if h.PTTL >= 0 {
			l.ExpireTime = now.Add(h.PTTL)
		}
		if h.HasRecord {
			l.AcquireTime, l.Version = h.Record.AcquireTime, h.Record.HoldID
		}
		return []backends.Lease{l}
	}
	holds := make([]backends.Lease, 0, len(h.Places))
	for _, p := range h.Places {
		l := backends.Lease{Key: key, Identity: p.Identity, ExpireTime: now.Add(p.PTTL), Shared: true}
		if p.HasRecord {
			l.AcquireTime, l.Version = p.Record.AcquireTime, p.Record.HoldID
		}
		holds = append(holds, l)
	}
	slices.SortFunc(holds, func(a, b backends.Lease) int { return strings.Compare(a.Identity, b.Identity) })
	return holds
}

// Ping sends PING, which proves that the server is reachable and the session authenticated, then
// writes and deletes a probe key (PingKeyPrefix and a random suffix), which proves that it takes
// writes (a read-only replica does not). Errors name the server and say what failed; they never
// contain the password.
func (b *Backend) Ping(ctx context.Context) error {
	if err := b.usable(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	return b.node.Ping(ctx, b.pingKey)
}

// Close ends the session and closes its connections. Locks it took stay until their TTL runs out,
// unless another session resumes or releases them. Calls after Close fail.
func (b *Backend) Close(context.Context) error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.node.Close()
}

func (b *Backend) usable() error {
	if b.closed.Load() {
		return errors.New("redis backend: session is closed")
	}
	return nil
}

// checkArgs rejects calls that cannot be served.
func checkArgs(key, identity string, ttl time.Duration) error {
	switch {
	case key == "":
		return errors.New("redis backend: key must not be empty")
	case identity == "":
		return errors.New("redis backend: identity must not be empty")
	}
	return checkTTL(ttl)
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("redis backend: ttl must be positive, got %s", ttl)
	}
	return nil
}
