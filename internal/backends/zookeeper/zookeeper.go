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
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
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
	// renewChunk is how many SetData ops one renewal Multi carries.
	renewChunk = 100
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

// written is what the session last wrote to a lock node.
type written struct {
	rec     record
	version int32
	czxid   int64
	// mtime is the write's time by the ensemble's clock, in milliseconds (Stat.Mtime).
	mtime   int64
	session int64
	// guard is the guard node's data version after the write.
	guard int32
}

// record is a lock node's data. AcquireTime and ExpireTime are by the writer's clock and
// informational; the record expires at the node's mtime plus TTLMillis, by the ensemble's clock.
type record struct {
	Holder      string    `json:"holder"`
	AcquireTime time.Time `json:"acquireTime"`
	ExpireTime  time.Time `json:"expireTime"`
	TTLMillis   int64     `json:"ttlMillis"`
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

// guardPath is key's guard node, the parent of its lock node.
func (b *Backend) guardPath(key string) string {
	name := url.PathEscape(key)
	switch name { // ZooKeeper refuses the path components "." and ".."
	case ".":
		name = "%2E"
	case "..":
		name = "%2E%2E"
	}
	return b.cfg.Root + "/" + name
}

// nodePath is key's lock node.
func (b *Backend) nodePath(key string) string { return b.guardPath(key) + "/" + LockNodeName }

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// session returns the session's connection, connecting and authenticating on first use.
func (b *Backend) session(ctx context.Context) (*zk.Conn, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("zookeeper backend: session is closed")
	}
	if b.conn == nil {
		c, events, err := zk.Connect(b.cfg.Servers, b.cfg.SessionTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
		if err != nil {
			b.mu.Unlock()
			return nil, b.wrap("connecting", err)
		}
		b.conn, b.authed = c, b.cfg.DigestAuth == ""
		go b.watchSession(events)
	}
	c, authed := b.conn, b.authed
	b.mu.Unlock()
	if authed {
		return c, nil
	}
	b.authMu.Lock()
	defer b.authMu.Unlock()
	b.mu.Lock()
	authed = b.authed
	b.mu.Unlock()
	if authed {
		return c, nil
	}
	err := b.call(ctx, c, "authenticating with digest credentials", false, func() error {
		return c.AddAuth("digest", []byte(b.cfg.DigestAuth))
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.authed = true
	b.mu.Unlock()
	return c, nil
}

// watchSession follows the session's events until the connection is closed: it records the
// state for error messages and forgets what the session wrote when the session expired (its
// ephemeral nodes are gone).
func (b *Backend) watchSession(events <-chan zk.Event) {
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		b.mu.Lock()
		b.state = ev.State
		if ev.State == zk.StateExpired {
			b.written = map[string]written{}
			b.placesWritten = map[placeID]placeWritten{}
		}
		b.mu.Unlock()
	}
}

// call runs one request of the client library, which takes no context, bounded by the call
// timeout and ctx. On timeout the request is abandoned; the library finishes it in the background.
func (b *Backend) call(ctx context.Context, c *zk.Conn, op string, count bool, f func() error) error {
	if count {
		b.requests.Add(1)
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			return b.wrap(op, err)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		state := b.state
		b.mu.Unlock()
		if state == zk.StateUnknown {
			state = c.State()
		}
		return b.wrap(op, fmt.Errorf("no answer (session state %s): %w", state, ctx.Err()))
	}
}

// wrap makes an error name the ensemble and the operation; it never contains the credentials.
func (b *Backend) wrap(op string, err error) error {
	return fmt.Errorf("zookeeper backend: %s (servers %s): %w", op, strings.Join(b.cfg.Servers, ","), err)
}

// ensureRoot creates Root and its parents, persistently, once per Backend.
func (b *Backend) ensureRoot(ctx context.Context, c *zk.Conn, force bool) error {
	b.mu.Lock()
	ready := b.rootReady && !force
	b.mu.Unlock()
	if ready {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(b.cfg.Root, "/"), "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		err := b.call(ctx, c, "creating "+p, true, func() error {
			_, err := c.Create(p, nil, 0, b.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	b.mu.Lock()
	b.rootReady = true
	b.mu.Unlock()
	return nil
}

// encode is a record's node data.
func encode(r record) []byte {
	data, _ := json.Marshal(r) // a record always marshals
	return data
}

// node is a lock node as read.
type node struct {
	rec    record
	stat   *zk.Stat
	exists bool
	// guard is the guard node's data version, read before the lock node; -1 when the guard
	// does not exist.
	guard int32
	// foreign is set when the data is not a record (a node written by another client); its
	// holder is then the raw data.
	foreign bool
	// places is set when the guard lists a places node (places.go); read with the guard only.
	places bool
}

// get reads key's guard node, when withGuard (its version and children), and then its lock node
// unless the guard lists none: one or two requests.
func (b *Backend) get(ctx context.Context, c *zk.Conn, key, path string, withGuard bool) (node, error) {
	guard := int32(-1)
	places := false
	if withGuard {
		var children []string
		var gstat *zk.Stat
		err := b.call(ctx, c, "reading the guard of lock "+strconv.Quote(key), true, func() error {
			var err error
			children, gstat, err = c.Children(b.guardPath(key))
			return err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return node{guard: -1}, nil
		case err != nil:
			return node{}, err
		}
		guard, places = gstat.Version, slices.Contains(children, PlacesNodeName)
		if !slices.Contains(children, LockNodeName) {
			return node{guard: guard, places: places}, nil
		}
	}
	var data []byte
	var stat *zk.Stat
	err := b.call(ctx, c, "reading lock "+strconv.Quote(key), true, func() error {
		var err error
		data, stat, err = c.Get(path)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return node{guard: guard, places: places}, nil
	}
	if err != nil {
		return node{}, err
	}
	n := node{stat: stat, exists: true, guard: guard, places: places}
	if err := json.Unmarshal(data, &n.rec); err != nil || n.rec.Holder == "" {
		n.rec, n.foreign = record{Holder: string(data)}, true
	}
	return n, nil
}

// expiry is when the node's record stops holding its lock, by the ensemble's clock.
func (n node) expiry() time.Time { return recordExpiry(n.stat.Mtime, n.rec.TTLMillis) }

// expired tells whether an existing node's record no longer holds its lock at serverNow, the
// ensemble's time. Data that is not our record never expires.
func (n node) expired(serverNow time.Time) bool {
	return !n.foreign && !n.expiry().After(serverNow)
}

// serverTime estimates the ensemble's current time, writing a probe node first when the session
// has no recent sample (one round trip).
func (b *Backend) serverTime(ctx context.Context, c *zk.Conn) (time.Time, error) {
	if now, ok := b.server.now(time.Now()); ok {
		return now, nil
	}
	if err := b.probe(ctx, c); err != nil {
		return time.Time{}, err
	}
	if now, ok := b.server.now(time.Now()); ok {
		return now, nil
	}
	return time.Time{}, b.wrap("reading the ensemble's clock", errors.New("the probe write returned no time"))
}

// probe creates, writes and deletes the session's probe node under Root in one Multi, which
// proves that the ensemble has a quorum and the session may write there, and samples the
// ensemble's clock from the write.
func (b *Backend) probe(ctx context.Context, c *zk.Conn) error {
	if err := b.ensureRoot(ctx, c, false); err != nil {
		return err
	}
	var res []zk.MultiResponse
	err := b.call(ctx, c, "writing the probe node "+b.pingNode, true, func() error {
		var err error
		res, err = c.Multi(&zk.CreateRequest{Path: b.pingNode, Data: []byte("ping"), Acl: b.acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: b.pingNode, Data: []byte("ping"), Version: 0},
			&zk.DeleteRequest{Path: b.pingNode, Version: -1})
		return err
	})
	at := time.Now()
	if err == nil && len(res) == 3 && res[1].Stat != nil {
		b.server.observe(res[1].Stat.Mtime, at)
		return nil
	}
	for _, r := range res {
		// The op that failed; the ones after it answer "runtime inconsistency" (-2), which the
		// library reports as an unknown error.
		if r.Error != nil && !strings.HasPrefix(r.Error.Error(), "unknown error") {
			return b.wrap("writing the probe node "+b.pingNode, r.Error)
		}
	}
	if err != nil {
		return err
	}
	return b.wrap("writing the probe node "+b.pingNode, errors.New("the server returned no stat"))
}

// put makes key's lock node hold rec on this session, in one Multi that is conditional on the
// guard node's version read before prev (so that it never acts on a node that was replaced since
// it was read, even one that reached the same version): when prev is nil, it bumps the guard and
// creates the node; when the session owns prev, it checks the guard and sets the node's data by
// version; else it bumps the guard, deletes prev by version and creates the node anew. Create is
// followed by a SetData, whose Stat tells the new node's Czxid. Whenever the lock node is
// created, the ops in noPlaces (see noPlacesOps in places.go) go into the same Multi, so that it
// fails if the key has places. errRace says the node, its guard or the key's places changed under
// us; errNoParent that the guard (or Root) does not exist.
func (b *Backend) put(ctx context.Context, c *zk.Conn, op, key string, rec record, prev *zk.Stat, guard int32, noPlaces []any) (*zk.Stat, error) {
	path, gpath := b.nodePath(key), b.guardPath(key)
	data := encode(rec)
	session := c.SessionID()
	var ops []any
	switch {
	case prev != nil && prev.EphemeralOwner == session && session != 0:
		// The session's own node lives on, so no place can have been taken beside it.
		ops = append(ops, &zk.CheckVersionRequest{Path: gpath, Version: guard},
			&zk.SetDataRequest{Path: path, Data: data, Version: prev.Version})
	case prev != nil:
		ops = append(ops, &zk.SetDataRequest{Path: gpath, Version: guard})
		ops = append(ops, noPlaces...)
		ops = append(ops, &zk.DeleteRequest{Path: path, Version: prev.Version},
			&zk.CreateRequest{Path: path, Data: data, Acl: b.acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: path, Data: data, Version: 0})
	default:
		ops = append(ops, &zk.SetDataRequest{Path: gpath, Version: -1})
		ops = append(ops, noPlaces...)
		ops = append(ops, &zk.CreateRequest{Path: path, Data: data, Acl: b.acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: path, Data: data, Version: 0})
	}
	res, err := b.multi(ctx, c, op, ops)
	at := time.Now()
	if errors.Is(err, errRace) {
		if errors.Is(res[0].Error, zk.ErrNoNode) {
			return nil, errNoParent
		}
		b.forget(path)
	}
	if err != nil {
		return nil, err
	}
	stat := res[len(res)-1].Stat
	if stat == nil {
		return nil, b.wrap(op, errors.New("the server returned no stat for the written node"))
	}
	if g := res[0].Stat; g != nil {
		guard = g.Version
	}
	b.server.observe(stat.Mtime, at)
	b.remember(path, rec, stat, session, guard)
	return stat, nil
}

// multi sends ops in one Multi. When an op fails because the store is not as the caller read it
// (a version moved on, a node is there or gone, a node has children), the error is errRace and
// res holds every op's result, so that the caller can tell which op failed.
func (b *Backend) multi(ctx context.Context, c *zk.Conn, op string, ops []any) (res []zk.MultiResponse, err error) {
	err = b.call(ctx, c, op, true, func() error {
		var err error
		res, err = c.Multi(ops...)
		return err
	})
	if len(res) == len(ops) {
		for _, r := range res {
			switch {
			case r.Error == nil:
			case conflict(r.Error):
				return res, errRace
			case err == nil:
				err = b.wrap(op, r.Error)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// conflict tells whether an op failed on the state of the store rather than on the request.
// Only the op that failed says why; the ops after it answer "runtime inconsistency".
func conflict(err error) bool {
	return errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) ||
		errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNotEmpty)
}

// ensureGuard creates key's guard node, a container (ZooKeeper deletes it some time after its
// lock node is gone), and Root first when it is missing.
func (b *Backend) ensureGuard(ctx context.Context, c *zk.Conn, key string) error {
	for range 2 {
		err := b.call(ctx, c, "creating the guard of lock "+strconv.Quote(key), true, func() error {
			_, err := c.CreateContainer(b.guardPath(key), nil, zk.FlagContainer, b.acl)
			return err
		})
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			return nil
		case !errors.Is(err, zk.ErrNoNode):
			return err
		}
		if err := b.ensureRoot(ctx, c, true); err != nil {
			return err
		}
	}
	return b.wrap("creating the guard of lock "+strconv.Quote(key), errNoParent)
}

var (
	// errRace: the node changed between reading and writing it; read it again.
	errRace = errors.New("the lock node changed concurrently")
	// errNoParent: Root does not exist (yet, or any more).
	errNoParent = errors.New("the root node does not exist")
)

// remember caches what the session wrote to path.
func (b *Backend) remember(path string, rec record, stat *zk.Stat, session int64, guard int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.written[path] = written{rec: rec, version: stat.Version, czxid: stat.Czxid, mtime: stat.Mtime, session: session, guard: guard}
}

// forget drops path from the cache.
func (b *Backend) forget(path string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.written, path)
}

func version(stat *zk.Stat) string { return strconv.FormatInt(stat.Czxid, 10) }

// TryAcquire takes key for identity: one Multi when the key is free, one read and one write when
// the node exists (see the package documentation).
func (b *Backend) TryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	c, err := b.session(ctx)
	if err != nil {
		return backends.Lease{}, err
	}
	if err := b.ensureRoot(ctx, c, false); err != nil {
		return backends.Lease{}, err
	}
	path := b.nodePath(key)
	op := "acquiring " + strconv.Quote(key)
	var prev *zk.Stat
	guard := int32(-1)
	read := false // the first attempt creates the node without reading it
	for range attempts {
		now := b.clock.Now()
		rec := record{Holder: identity, AcquireTime: now, ExpireTime: now.Add(ttl), TTLMillis: ttl.Milliseconds()}
		prev, guard = nil, -1
		noPlaces := b.noPlacesOps(key, false, nil)
		if read {
			n, err := b.get(ctx, c, key, path, true)
			if err != nil {
				return backends.Lease{}, err
			}
			prev, guard = n.stat, n.guard
			var places []place
			if n.places {
				if places, n.places, err = b.readPlaces(ctx, c, key, ""); err != nil {
					return backends.Lease{}, err
				}
			}
			var serverNow time.Time
			if (n.exists && !n.foreign) || len(places) > 0 {
				if serverNow, err = b.serverTime(ctx, c); err != nil {
					return backends.Lease{}, err
				}
			}
			switch {
			case !n.exists:
			case n.expired(serverNow):
				// A new hold replaces an expired one.
			case n.rec.Holder == identity && !n.foreign:
				rec.AcquireTime = n.rec.AcquireTime // reentrancy or resumption
			default:
				locked := &backends.LockedError{Key: key, Holder: n.rec.Holder}
				if !n.foreign {
					locked.ExpireTime = localExpiry(n.expiry(), serverNow, b.clock.Now())
				}
				return backends.Lease{}, locked
			}
			live, expired := splitPlaces(places, serverNow)
			if len(live) > 0 {
				return backends.Lease{}, b.lockedBy(key, live[0].node, serverNow)
			}
			noPlaces = b.noPlacesOps(key, n.places, expired)
		}
		stat, err := b.put(ctx, c, op, key, rec, prev, guard, noPlaces)
		switch {
		case err == nil:
			return backends.Lease{Key: key, Identity: identity, TTL: ttl, AcquireTime: rec.AcquireTime, ExpireTime: rec.ExpireTime, Version: version(stat)}, nil
		case errors.Is(err, errNoParent):
			if err := b.ensureGuard(ctx, c, key); err != nil {
				return backends.Lease{}, err
			}
			read = false
		case errors.Is(err, errRace):
			read = true
		default:
			return backends.Lease{}, err
		}
	}
	return backends.Lease{}, b.wrap(op, fmt.Errorf("%w %d times; try again", errRace, attempts))
}

var _ backends.FreeWatcher = (*Backend)(nil)

// WatchFree sets a children watch on key's guard node, which fires when the lock node is deleted
// (released, or its session ended) or created, but not when its holder renews it (a data
// change). When the guard has a places node it also sets a children watch on that, which fires
// when a place goes (released, or its session ended) or comes, but not when one is renewed.
// notify is called once, when either watch fires or is dropped (session closed or expired), or
// at once when the key has neither a lock node nor a place. A lock or place whose record expired
// while its node lives on fires nothing: callers still retry at the recorded ExpireTime.
func (b *Backend) WatchFree(ctx context.Context, key string, notify func()) error {
	if key == "" {
		return errors.New("zookeeper backend: the key must not be empty")
	}
	c, err := b.session(ctx)
	if err != nil {
		return err
	}
	var children []string
	var events <-chan zk.Event
	err = b.call(ctx, c, "watching lock "+strconv.Quote(key), true, func() error {
		var err error
		children, _, events, err = c.ChildrenW(b.guardPath(key))
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		go notify() // no guard, so no lock node: free now
		return nil
	case err != nil:
		return err
	}
	held := slices.ContainsFunc(children, func(name string) bool { return name != PlacesNodeName })
	// placeEvents stays nil, a channel that never delivers, when there is no places node.
	var placeEvents <-chan zk.Event
	if slices.Contains(children, PlacesNodeName) {
		var places []string
		err = b.call(ctx, c, "watching the places of lock "+strconv.Quote(key), true, func() error {
			var err error
			places, _, placeEvents, err = c.ChildrenW(b.placesPath(key))
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		held = held || len(places) > 0
	}
	if !held {
		// Free already. The watches stay set and fire once on the next change; nobody waits
		// for them, and each holds nothing but one server-side watch entry until then.
		go notify()
		return nil
	}
	go func() {
		// Any event: a node went or came, or the watch was dropped.
		select {
		case <-events:
		case <-placeEvents:
		}
		notify()
	}()
	return nil
}

// Renew extends every lease: one Multi per 100 leases when the session wrote their nodes last,
// else a read and a write per lease (see the package documentation); plus one probe write when
// the session wrote nothing for a minute (leases renewed less often than that), to read the
// ensemble's clock.
func (b *Backend) Renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) (renewed, lost []backends.Lease, err error) {
	if err := checkTTL(ttl); err != nil {
		return nil, nil, err
	}
	var asks []backends.Lease
	first := map[hold]int{}
	var dups []backends.Lease
	for _, l := range leases {
		switch {
		case l.Key == "" || l.Identity == "":
			lost = append(lost, l)
		case first[holdID(l)] > 0:
			dups = append(dups, l)
		default:
			asks = append(asks, l)
			first[holdID(l)] = len(asks)
		}
	}
	if len(asks) == 0 {
		return nil, lost, nil
	}
	c, err := b.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	// now stamps the records and the leases returned; serverNow, the ensemble's time, judges
	// which records expired. It is taken once, before any write: a little early is on the safe
	// side.
	now := b.clock.Now()
	serverNow, err := b.serverTime(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	held := make([]bool, len(asks))
	for from := 0; from < len(asks); from += renewChunk {
		chunk := asks[from:min(from+renewChunk, len(asks))]
		ok, err := b.renewCached(ctx, c, chunk, now, serverNow, ttl)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			if err := b.renewEach(ctx, c, chunk, now, serverNow, ttl, held[from:]); err != nil {
				return nil, nil, err
			}
			continue
		}
		for i := range chunk {
			held[from+i] = true
		}
	}
	extend := func(l backends.Lease) backends.Lease {
		l.TTL, l.ExpireTime = ttl, now.Add(ttl)
		return l
	}
	for i, l := range asks {
		if held[i] {
			renewed = append(renewed, extend(l))
		} else {
			lost = append(lost, l)
		}
	}
	for _, l := range dups {
		i := first[holdID(l)] - 1
		if held[i] && asks[i].Identity == l.Identity && asks[i].AcquireTime.Equal(l.AcquireTime) {
			renewed = append(renewed, extend(l))
		} else {
			lost = append(lost, l)
		}
	}
	return renewed, lost, nil
}

// renewCached extends chunk in one Multi of SetData ops at the versions the session wrote last,
// each lock node's with a Check of its guard (a place node's path is never used twice, so its
// version alone says it is the node written: places.go). ok is false, and nothing was written,
// when a lease is not in the cache as this session's, current and matching, or when a node
// changed since.
func (b *Backend) renewCached(ctx context.Context, c *zk.Conn, chunk []backends.Lease, now, serverNow time.Time, ttl time.Duration) (ok bool, err error) {
	session := c.SessionID()
	var ops []any
	// Lease i's ops are ops[from[i]:last[i]+1]; the last is its SetData.
	from, last := make([]int, len(chunk)), make([]int, len(chunk))
	recs := make([]record, len(chunk))
	paths := make([]string, len(chunk))
	guards := make([]int32, len(chunk))
	b.mu.Lock()
	for i, l := range chunk {
		var w written
		var found bool
		if l.Shared {
			var pw placeWritten
			pw, found = b.placesWritten[placeID{key: l.Key, identity: l.Identity}]
			w, paths[i] = pw.written, pw.path
		} else {
			w, found = b.written[b.nodePath(l.Key)]
			paths[i] = b.nodePath(l.Key)
		}
		if !found || !w.renews(l, session, serverNow) {
			b.mu.Unlock()
			return false, nil
		}
		recs[i] = record{Holder: l.Identity, AcquireTime: w.rec.AcquireTime, ExpireTime: now.Add(ttl), TTLMillis: ttl.Milliseconds()}
		guards[i] = w.guard
		from[i] = len(ops)
		if !l.Shared {
			ops = append(ops, &zk.CheckVersionRequest{Path: b.guardPath(l.Key), Version: w.guard})
		}
		ops = append(ops, &zk.SetDataRequest{Path: paths[i], Data: encode(recs[i]), Version: w.version})
		last[i] = len(ops) - 1
	}
	b.mu.Unlock()
	var res []zk.MultiResponse
	err = b.call(ctx, c, "renewing locks", true, func() error {
		var err error
		res, err = c.Multi(ops...)
		return err
	})
	at := time.Now()
	if len(res) == len(ops) {
		failed := false
		for i, l := range chunk {
			for _, r := range res[from[i] : last[i]+1] {
				if r.Error == nil {
					continue
				}
				failed = true
				if errors.Is(r.Error, zk.ErrBadVersion) || errors.Is(r.Error, zk.ErrNoNode) {
					b.forgetHold(l)
				}
			}
		}
		if failed {
			return false, nil
		}
	}
	if err != nil {
		return false, err
	}
	for i, l := range chunk {
		st := res[last[i]].Stat
		if st == nil {
			continue
		}
		b.server.observe(st.Mtime, at)
		if l.Shared {
			b.rememberPlace(l.Key, paths[i], recs[i], st, session)
		} else {
			b.remember(paths[i], recs[i], st, session, guards[i])
		}
	}
	return true, nil
}

// renews tells whether the session may renew l by the versions it wrote last: it wrote the node
// on the session it has now, for l's identity and hold, and the record has not expired.
func (w written) renews(l backends.Lease, session int64, serverNow time.Time) bool {
	return session != 0 && w.session == session && w.rec.Holder == l.Identity &&
		(l.AcquireTime.IsZero() || w.rec.AcquireTime.Equal(l.AcquireTime)) &&
		recordExpiry(w.mtime, w.rec.TTLMillis).After(serverNow)
}

// forgetHold drops what the session wrote for l's hold, a lock node or a place.
func (b *Backend) forgetHold(l backends.Lease) {
	if l.Shared {
		b.forgetPlace(l.Key, l.Identity)
		return
	}
	b.forget(b.nodePath(l.Key))
}

// renewEach reads each lease's node and extends those the lease's identity still holds, moving
// them to this session, concurrently.
func (b *Backend) renewEach(ctx context.Context, c *zk.Conn, chunk []backends.Lease, now, serverNow time.Time, ttl time.Duration, held []bool) error {
	errs := make([]error, len(chunk))
	var wg sync.WaitGroup
	for i, l := range chunk {
		wg.Go(func() { held[i], errs[i] = b.renewOne(ctx, c, l, now, serverNow, ttl) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// renewOne extends one lease if its identity still holds it.
func (b *Backend) renewOne(ctx context.Context, c *zk.Conn, l backends.Lease, now, serverNow time.Time, ttl time.Duration) (bool, error) {
	if l.Shared {
		return b.renewPlace(ctx, c, l, now, serverNow, ttl)
	}
	path := b.nodePath(l.Key)
	for range attempts {
		n, err := b.get(ctx, c, l.Key, path, true)
		if err != nil {
			return false, err
		}
		if !n.exists || n.foreign || n.rec.Holder != l.Identity || n.expired(serverNow) ||
			(!l.AcquireTime.IsZero() && !n.rec.AcquireTime.Equal(l.AcquireTime)) {
			return false, nil
		}
		rec := record{Holder: l.Identity, AcquireTime: n.rec.AcquireTime, ExpireTime: now.Add(ttl), TTLMillis: ttl.Milliseconds()}
		// The lock node lived all along, so no place was taken beside it: nothing to clear.
		_, err = b.put(ctx, c, "renewing "+strconv.Quote(l.Key), l.Key, rec, n.stat, n.guard, nil)
		if !errors.Is(err, errRace) && !errors.Is(err, errNoParent) {
			return err == nil, err
		}
	}
	return false, b.wrap("renewing "+strconv.Quote(l.Key), fmt.Errorf("%w %d times", errRace, attempts))
}

// Release deletes the node, by the versions of it and its guard read, if lease.Identity holds it:
// three requests. A
// free or expired lock counts as released; a lock held by another identity is left alone and the
// error wraps backends.ErrNotHeld. A shared lease's place is deleted by releasePlace (places.go).
func (b *Backend) Release(ctx context.Context, lease backends.Lease) error {
	if lease.Key == "" || lease.Identity == "" {
		return fmt.Errorf("zookeeper backend: cannot release a lease without key and identity (key %q, identity %q)", lease.Key, lease.Identity)
	}
	c, err := b.session(ctx)
	if err != nil {
		return err
	}
	if lease.Shared {
		return b.releasePlace(ctx, c, lease)
	}
	path := b.nodePath(lease.Key)
	op := "releasing " + strconv.Quote(lease.Key)
	for range attempts {
		n, err := b.get(ctx, c, lease.Key, path, true)
		if err != nil || !n.exists {
			return err
		}
		if n.rec.Holder != lease.Identity || n.foreign {
			if !n.foreign {
				serverNow, err := b.serverTime(ctx, c)
				if err != nil {
					return err
				}
				if n.expired(serverNow) {
					return nil
				}
			}
			return fmt.Errorf("zookeeper backend: lock %q is held by %q, not %q: %w", lease.Key, n.rec.Holder, lease.Identity, backends.ErrNotHeld)
		}
		// Bump the guard with the delete, so that no one acts on the deleted node by version.
		var res []zk.MultiResponse
		err = b.call(ctx, c, op, true, func() error {
			var err error
			res, err = c.Multi(&zk.SetDataRequest{Path: b.guardPath(lease.Key), Version: n.guard},
				&zk.DeleteRequest{Path: path, Version: n.stat.Version})
			return err
		})
		raced := false
		for _, r := range res {
			if errors.Is(r.Error, zk.ErrBadVersion) || errors.Is(r.Error, zk.ErrNoNode) {
				raced = true
			}
		}
		if !raced && err != nil {
			return err
		}
		b.forget(path)
		if !raced {
			return nil
		}
	}
	return b.wrap(op, fmt.Errorf("%w %d times; try again", errRace, attempts))
}

// Inspect reports who holds key: one read, and a probe write when the session has not written
// for a minute (to read the ensemble's clock); when the lock node is gone or expired, the key's
// places are read too (places.go) and one of them is reported. A free or expired lock gives an
// error wrapping backends.ErrNotHeld. A node whose data is not lockwarden's record is reported
// held by its data, with zero times.
func (b *Backend) Inspect(ctx context.Context, key string) (backends.Lease, error) {
	if key == "" {
		return backends.Lease{}, errors.New("zookeeper backend: key must not be empty")
	}
	c, err := b.session(ctx)
	if err != nil {
		return backends.Lease{}, err
	}
	n, err := b.get(ctx, c, key, b.nodePath(key), false)
	if err != nil {
		return backends.Lease{}, err
	}
	if n.exists {
		if n.foreign {
			return n.lease(key, time.Time{}, time.Time{}), nil
		}
		serverNow, err := b.serverTime(ctx, c)
		if err != nil {
			return backends.Lease{}, err
		}
		if !n.expired(serverNow) {
			return n.lease(key, serverNow, b.clock.Now()), nil
		}
	}
	return b.inspectPlaces(ctx, c, key)
}

// lease is the hold the lock node records, its expiry told on the caller's clock (localNow) from
// serverNow, the ensemble's; a foreign node's hold has no times.
func (n node) lease(key string, serverNow, localNow time.Time) backends.Lease {
	l := backends.Lease{
		Key:         key,
		Identity:    n.rec.Holder,
		TTL:         time.Duration(n.rec.TTLMillis) * time.Millisecond,
		AcquireTime: n.rec.AcquireTime,
		Version:     version(n.stat),
	}
	if !n.foreign {
		l.ExpireTime = localExpiry(n.expiry(), serverNow, localNow)
	}
	return l
}

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
