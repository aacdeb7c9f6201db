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

// Package zookeeper keeps locks on a ZooKeeper ensemble as ephemeral nodes of the controller's
// session. ZAB makes every write durable on a quorum before it is acknowledged.
//
// # Nodes
//
// Each key has a guard node, Root + "/" + url.PathEscape(key) ('/' in a key is escaped, so that
// every key is one node directly under Root, whose parents are created once, persistently). The
// guard is a CONTAINER node (ZooKeeper deletes it some time, by default a minute, after it is
// left empty). The lock itself is the EPHEMERAL node LockNodeName under the guard. Its data is a
// small JSON record, not the bare identity: the holder identity, when the hold began, when it
// expires and its TTL. Lease.Version is the lock node's Czxid, in decimal. A key held in shared
// places (backends.Sharer) has no lock node but a container node PlacesNodeName under its guard,
// whose ephemeral children are the places: places.go says how, and why places and the lock node
// never coexist.
//
// Why a guard: ZooKeeper's conditional writes compare a node's data version only, and a node
// deleted and created again starts at the same versions, so "delete the node I read, at version
// v" could delete the next holder's node (this happened under the conformance suite's races).
// Every write that replaces or deletes a lock node therefore also sets the guard's data at the
// version read before the lock node, in the same Multi, and every in-place write checks it: a
// write based on a stale read fails and is retried after reading again.
//
// With Config.DigestAuth the session authenticates with the digest scheme and creates Root, its
// parents, every guard and every lock node with the ACL "auth" (all permissions for the creating
// user, i.e. CREATOR_ALL) plus world read, so that other ZooKeeper clients can read but neither
// create, delete nor change our nodes (ZooKeeper checks create and delete against the parent's
// ACL, which is Root's for guards, the guard's for lock and places nodes, and the places node's
// for places). Without it nodes are open to everyone (OPEN_ACL_UNSAFE).
//
// # Lifetime: session and TTL
//
// A lock lives while both hold: the session that owns its node is alive (ZooKeeper deletes the
// ephemeral node when the session expires or is closed), and its recorded ExpireTime has not
// passed. The session is kept alive by the client library's heartbeats, whatever Renew does; the
// per-lock TTL is enforced by the readers of the record (TryAcquire, Renew, Inspect, Release treat
// an expired record as a free lock, and TryAcquire replaces it atomically by version). So a
// controller that stops renewing loses its locks after the TTL even though its session lives on,
// and a controller that dies loses them after the session timeout or the TTL, whichever is
// first. A record expires at its node's mtime plus its TTL, by the ensemble's clock, which the
// session estimates from its own writes (serverclock.go): a controller's wall clock, stepped or
// skewed, never shortens a hold. The record's AcquireTime and ExpireTime are the writer's clock,
// for people reading the node; the times this package returns are the caller's clock.
//
// TryAcquire is one Multi that bumps the guard, creates and deletes the places node (which fails
// if the key has one: places.go), creates the node and sets its data again (the SetData answers
// with the Stat, and so the Czxid, which Create does not return), one round trip; one more to
// create the guard the first time a key is used. If the node or the places node exists it reads
// the guard (its version and children) and the node (two more), and the places if there are any:
// a live place refuses the lock, and expired ones are deleted, with the places node, in the Multi
// that creates it. Of an existing node, the same identity, unexpired, on this session is
// refreshed by a versioned SetData (reentrancy); on another session (a restarted controller
// resuming) it is moved to this session by one Multi of Delete (with the read version), Create
// and SetData, keeping AcquireTime but getting a new Czxid; an expired record is replaced the
// same way, as a new hold; anything else is a *backends.LockedError.
//
// Renew is one Multi per 100 leases, of a guard version Check and a versioned SetData (extending
// the record) per lock and a versioned SetData per place, when the session wrote every one of
// those nodes last and its cached versions are current: the steady state of a controller
// renewing its own locks and places costs one round trip however many there are (the Multi also
// proves the session alive). When a node changed since (another session, an expired session, a
// resumed hold) that whole chunk falls back to reading and writing each of its leases, three
// requests per lease (guard or places node, node, write), sent concurrently over the one
// connection: honest cost O(n) requests but about three round trips of latency. A lease is
// lost when its node is gone (the session that owned it expired, or the place was released),
// holds another identity, records another AcquireTime (a new hold), or has expired. Lost locks
// and places are never revived.
//
// Close closes the session: ZooKeeper deletes its ephemeral nodes at once, so every lock of the
// session is freed, unlike backends whose locks outlive a closed session by their TTL. A
// controller that crashes instead keeps its locks for the session timeout, during which a
// restarted controller resumes them.
//
// Session expiry: the client library notices it when it reconnects and opens a new session; the
// nodes of the old one are gone, so the next Renew reports every lock and place of the old
// session lost.
package zookeeper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"k8s.io/utils/clock"

	"github.com/lockwarden/lockwarden/internal/backends"
)

const (
	// DefaultRoot is the parent of every lock node unless Config.Root says otherwise.
	DefaultRoot = "/lockwarden"
	// DefaultSessionTimeout is the session timeout asked for unless Config.SessionTimeout says
	// otherwise; the server clamps it to 2 to 20 ticks.
	DefaultSessionTimeout = 10 * time.Second
	// DefaultCallTimeout bounds each call unless WithCallTimeout says otherwise: far below the
	// minimum lock TTL of 5 s.
	DefaultCallTimeout = 2 * time.Second
	// PingNodePrefix starts the name of the ephemeral node Ping creates and deletes under Root.
	// ';' is always escaped in lock nodes' names, so a probe never meets a lock.
	PingNodePrefix = "ping;"
	// LockNodeName is the name of the ephemeral lock node under a key's guard node.
	LockNodeName = "lock"
	// PlacesNodeName is the name of the container node under a key's guard node whose children
	// are the key's shared places (places.go).
	PlacesNodeName = "places"
)

const (
	// attempts bounds how often one call retries after losing a race on a node's version. Every
	// lost race means another writer won one, and a key's places let several writers win in
	// turn (one per place, each invalidating what the others read), so the bound leaves room for
	// the places of a busy key on top of the few races an exclusive acquire can lose.
	attempts = 10
)

// Config says how to reach the ensemble.
type Config struct {
	// Servers are host:port addresses of the ensemble's members.
	Servers []string
	// SessionTimeout is asked of the server. Default DefaultSessionTimeout.
	SessionTimeout time.Duration
	// DigestAuth is "user:password" for digest authentication; empty for none. It never
	// appears in errors.
	DigestAuth string
	// Root is the absolute path under which lock nodes live. Default DefaultRoot.
	Root string
}

// Option configures New.
type Option func(*Backend)

// WithClock sets the clock that acquire and expiry times are computed with. Default: the real
// clock.
func WithClock(c clock.PassiveClock) Option {
	return func(b *Backend) { b.clock = c }
}

// WithCallTimeout sets the timeout of each call (connecting included). Default
// DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option {
	return func(b *Backend) { b.callTimeout = d }
}

// Backend is one ZooKeeper session. It is safe for concurrent use.
type Backend struct {
	cfg         Config
	clock       clock.PassiveClock
	callTimeout time.Duration
	// acl is put on every node the session creates.
	acl []zk.ACL
	// pingNode is this session's probe node.
	pingNode string

	// requests counts requests sent (see RoundTrips).
	requests atomic.Int64
	// server estimates the ensemble's clock, by which records expire.
	server serverClock

	// mu guards the fields below.
	mu     sync.Mutex
	closed bool
	// conn is connected on first use.
	conn *zk.Conn
	// authed is set once DigestAuth was accepted (or when there is none).
	authed bool
	// rootReady is set once Root and its parents exist.
	rootReady bool
	// state is the session's last state, for error messages.
	state zk.State
	// written caches what the session last wrote to each lock node, by path.
	written map[string]written
	// placesWritten caches what the session last wrote to each place node (places.go), by key
	// and identity.
	placesWritten map[placeID]placeWritten
	// authMu serializes authenticating.
	authMu sync.Mutex
}

var _ backends.Backend = (*Backend)(nil)

// New returns a session with the ensemble at cfg.Servers. It does not connect: the first call
// does, and Ping checks that the ensemble can be reached, authenticated with and written to.
func New(cfg Config, opts ...Option) (*Backend, error) {
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.Root == "" {
		cfg.Root = DefaultRoot
	}
	b := &Backend{cfg: cfg, clock: clock.RealClock{}, callTimeout: DefaultCallTimeout,
		written: map[string]written{}, placesWritten: map[placeID]placeWritten{}}
	for _, opt := range opts {
		opt(b)
	}
	switch {
	case len(cfg.Servers) == 0:
		return nil, errors.New("zookeeper backend: Config.Servers is required")
	case cfg.SessionTimeout < 0:
		return nil, fmt.Errorf("zookeeper backend: the session timeout must be positive, got %s", cfg.SessionTimeout)
	case !strings.HasPrefix(cfg.Root, "/") || strings.HasSuffix(cfg.Root, "/") || strings.Contains(cfg.Root, "//"):
		return nil, fmt.Errorf("zookeeper backend: Config.Root must be an absolute node path without a trailing '/', got %q", cfg.Root)
	case cfg.DigestAuth != "" && !strings.Contains(cfg.DigestAuth, ":"):
		return nil, errors.New("zookeeper backend: the digest credentials must have the form user:password")
	case b.clock == nil:
		return nil, errors.New("zookeeper backend: the clock must not be nil")
	case b.callTimeout <= 0:
		return nil, fmt.Errorf("zookeeper backend: the call timeout must be positive, got %s", b.callTimeout)
	}
	for _, s := range cfg.Servers {
		if s == "" {
			return nil, errors.New("zookeeper backend: servers must not be empty")
		}
	}
	b.acl = zk.WorldACL(zk.PermAll)
	if cfg.DigestAuth != "" {
		b.acl = append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...)
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id) // crypto/rand.Read never fails
	b.pingNode = cfg.Root + "/" + PingNodePrefix + hex.EncodeToString(id)
	return b, nil
}

// RoundTrips returns how many requests the session has sent (connecting and authenticating not
// included), failed ones included.
func (b *Backend) RoundTrips() int64 { return b.requests.Load() }

// Ping connects (and authenticates), makes sure Root exists, and creates, writes and deletes an
// ephemeral probe node under it (PingNodePrefix and a random suffix) in one Multi, which proves
// that the ensemble has a quorum and the session may write there. Errors name the servers and
// say what failed; they never contain the credentials.
func (b *Backend) Ping(ctx context.Context) error {
	c, err := b.session(ctx)
	if err != nil {
		return err
	}
	if err := b.ensureRoot(ctx, c, true); err != nil {
		return err
	}
	return b.probe(ctx, c)
}

// Close closes the session. ZooKeeper deletes its ephemeral nodes at once: every lock the session
// holds is freed. Calls after Close fail.
func (b *Backend) Close(context.Context) error {
	b.mu.Lock()
	c := b.conn
	wasClosed := b.closed
	b.closed, b.conn = true, nil
	b.mu.Unlock()
	if wasClosed || c == nil {
		return nil
	}
	c.Close()
	return nil
}

// checkArgs rejects calls that cannot be served.
func checkArgs(key, identity string, ttl time.Duration) error {
	switch {
	case key == "":
		return errors.New("zookeeper backend: key must not be empty")
	case identity == "":
		return errors.New("zookeeper backend: identity must not be empty")
	}
	return checkTTL(ttl)
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("zookeeper backend: ttl must be positive, got %s", ttl)
	}
	return nil
}
