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

// Package etcd keeps locks on an etcd v3 cluster: the lock key's value is the holder identity,
// and the key is attached to a lease of the controller's session, so that it disappears when the
// session stops renewing. Raft makes every grant durable on a quorum of members before it is
// acknowledged, so a failover of the etcd leader, or the loss of a minority of members, loses no
// lock.
//
// # Keys
//
// TryAcquire is one transaction: if the key's create revision is 0 (it does not exist) and the
// key has no shared place, put it with the identity as value and the session's lease; else, if
// its value is the identity
// (reentrancy, or a restarted controller resuming), put it again with this session's lease, which
// keeps its create revision; else report who holds it. Beside each lock key, a hold record key
// (HoldKeyPrefix + key, on the same lease) keeps when the hold began, which Lease.AcquireTime
// reports. Keys are stored as given, without a prefix. Other etcd clients that lock by
// create revision (etcd's concurrency.Mutex does not: it uses key prefixes) are excluded as long
// as they write the key only when its create revision is 0.
//
// Shared places (backends.Sharer) are keys of their own beside the lock key, under
// PlaceKeyPrefix, one per identity; places.go says how they are laid out and why an exclusive
// hold and places exclude each other atomically. Outside clients see only the lock key, so a key
// held in places does not exclude them.
//
// Lease.Version is the lock key's create revision, in decimal: it stays the same while one hold
// lasts (reentrant acquires, renewals and resumption by a new session re-put the key, which
// changes its mod revision but not its create revision) and is new, and higher, for every new
// hold. Renew treats a lease whose Version is set and differs from the key's create revision as
// lost: the identity holds the key again, but as a new hold.
//
// # Leases and TTLs
//
// etcd leases have TTLs in whole seconds, and every key on a lease lives as long as the lease.
// A session therefore keeps one etcd lease per distinct lock TTL, rounded up to whole seconds,
// granted lazily by the first TryAcquire or Renew with that TTL. Renew(leases, ttl) refreshes the
// session's lease for ttl with one KeepAliveOnce and, in one transaction, checks every lock's
// owner and moves the locks that sit on another lease (a lease of a previous session, or of
// another TTL) onto it: two round trips however many locks, plus one more per 100 locks beyond
// the first 100 (etcd refuses transactions of more than 128 operations by default). Renewal is
// explicit, not a background KeepAlive: a lock lives only as long as the controller renews it,
// and the leases of a session are kept alive together, so a lock on a session lease that is not
// in the batch lives as long as the batch is renewed. TryAcquire refreshes the lease it puts the
// key on (one KeepAliveOnce, or Grant the first time) before its transaction, so that the key
// lives at least TTL from the start of the call. Close does not revoke the leases: locks outlive
// the session by their TTL, so that a restarted controller can resume them.
//
// # Time
//
// etcd expires leases by the leader's clock. A lease's ExpireTime is the controller's clock at the
// start of the call that refreshed its etcd lease, plus the TTL: the lease was refreshed after
// that instant, so it expires no earlier while the two clocks run at the same rate. Inspect and
// LockedError report the same for keys on the session's own leases; for keys on other sessions'
// leases they estimate expiry from the lease's remaining TTL, which etcd reports in whole
// seconds, truncated, and add half a second. A change of etcd leader extends every lease by up to
// its TTL (etcd's own behaviour), which delays the expiry of a dead controller's locks, never
// hastens it.
//
// # Client version
//
// The client is go.etcd.io/etcd/client/v3 v3.7.0, the version k8s.io/apiserver v0.37.2 already
// puts in the module graph (pinning v3.6.x would downgrade controller-runtime and the k8s.io
// modules). It speaks the same v3 gRPC API as the v3.6.16 servers the tests run.
package etcd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// DefaultCallTimeout bounds each request unless WithCallTimeout says otherwise: far below the
// minimum lock TTL of 5 s, and far above a healthy cluster's few milliseconds per commit.
const DefaultCallTimeout = time.Second

// HoldKeyPrefix starts the key beside each lock key that keeps when the hold began.
const HoldKeyPrefix = "lockwarden-hold:"

// PingKeyPrefix starts the key that Ping writes and deletes.
const PingKeyPrefix = "lockwarden-ping:"

// renewChunk is how many locks one renewal transaction checks; etcd's default --max-txn-ops
// is 128.
const renewChunk = 100

// Config says how to reach the etcd cluster.
type Config struct {
	// Endpoints are the client URLs (or host:port) of the cluster's members.
	Endpoints []string
	// Username and Password authenticate the session when Username is set. The password never
	// appears in errors.
	Username, Password string
	// TLS turns on TLS when set.
	TLS *tls.Config
}

// Option configures New.
type Option func(*Backend)

// WithClock sets the clock that expiry times are computed with. Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(b *Backend) { b.clock = c }
}

// WithCallTimeout sets the timeout of each request, and of connecting. Default
// DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option {
	return func(b *Backend) { b.callTimeout = d }
}

// Backend is one session with an etcd cluster. It is safe for concurrent use.
type Backend struct {
	cfg         Config
	clock       clock.PassiveClock
	callTimeout time.Duration
	// pingKey is this session's probe key, so that sessions never share one.
	pingKey string

	// requests counts requests sent (see RoundTrips).
	requests atomic.Int64
	closed   atomic.Bool

	// mu guards client and leases.
	mu sync.Mutex
	// client is connected on first use.
	client *clientv3.Client
	// leases holds the session's etcd leases by TTL in whole seconds.
	leases map[int64]*sessionLease
	// tlsErr is the last error of verifying a server certificate (an error), reported with
	// timeouts: gRPC retries failed handshakes until the call times out.
	tlsErr atomic.Value
	// grantMu serializes granting and refreshing leases, so that concurrent calls share one
	// lease per TTL.
	grantMu sync.Mutex
}

// sessionLease is one etcd lease of the session.
type sessionLease struct {
	id clientv3.LeaseID
	// ttl is the lease's TTL.
	ttl time.Duration
	// refreshed is the session clock's time before the last Grant or KeepAliveOnce of the lease
	// was sent: the lease lives at least until refreshed + ttl.
	refreshed time.Time
}

var _ backends.Backend = (*Backend)(nil)

// New returns a session with the cluster at cfg.Endpoints. It does not connect: the first call
// does, and Ping checks that the cluster can be reached, authenticated with and written to.
func New(cfg Config, opts ...Option) (*Backend, error) {
	b := &Backend{cfg: cfg, clock: clock.RealClock{}, callTimeout: DefaultCallTimeout, leases: map[int64]*sessionLease{}}
	for _, opt := range opts {
		opt(b)
	}
	switch {
	case len(cfg.Endpoints) == 0:
		return nil, errors.New("etcd backend: Config.Endpoints is required")
	case cfg.Password != "" && cfg.Username == "":
		return nil, errors.New("etcd backend: a password needs a username")
	case b.clock == nil:
		return nil, errors.New("etcd backend: the clock must not be nil")
	case b.callTimeout <= 0:
		return nil, fmt.Errorf("etcd backend: the call timeout must be positive, got %s", b.callTimeout)
	}
	for _, ep := range cfg.Endpoints {
		if ep == "" {
			return nil, errors.New("etcd backend: endpoints must not be empty")
		}
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id) // crypto/rand.Read never fails
	b.pingKey = PingKeyPrefix + hex.EncodeToString(id)
	return b, nil
}

// RoundTrips returns how many requests the session has sent (connecting not included), failed
// ones included.
func (b *Backend) RoundTrips() int64 { return b.requests.Load() }

// conn returns the session's client, connecting on first use.
func (b *Backend) conn() (*clientv3.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return nil, errors.New("etcd backend: session is closed")
	}
	if b.client != nil {
		return b.client, nil
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   b.cfg.Endpoints,
		Username:    b.cfg.Username,
		Password:    b.cfg.Password,
		TLS:         b.pinServerName(b.cfg.TLS),
		DialTimeout: b.callTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, b.wrap("connecting", err)
	}
	b.client = c
	return c, nil
}

// pinServerName makes the client check the server certificate against cfg.ServerName. gRPC
// replaces tls.Config.ServerName with the host of the endpoint it dials, so the check is done in
// VerifyConnection instead, which also records why a certificate was refused.
func (b *Backend) pinServerName(cfg *tls.Config) *tls.Config {
	if cfg == nil || cfg.ServerName == "" || cfg.InsecureSkipVerify {
		return cfg
	}
	cfg = cfg.Clone()
	name, roots := cfg.ServerName, cfg.RootCAs
	cfg.InsecureSkipVerify = true //nolint:gosec // verified below, against name
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: the server presented no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, DNSName: name, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			err = fmt.Errorf("the server certificate is not trusted for %q: %w", name, err)
			b.tlsErr.Store(err)
			return err
		}
		return nil
	}
	return cfg
}

// wrap makes an error name the cluster and the operation; etcd's errors carry no credentials.
func (b *Backend) wrap(op string, err error) error {
	if tlsErr, ok := b.tlsErr.Load().(error); ok && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (last TLS error: %v)", err, tlsErr)
	}
	return fmt.Errorf("etcd backend: %s (endpoints %s): %w", op, strings.Join(b.cfg.Endpoints, ","), err)
}

// leaseSeconds is ttl rounded up to whole seconds.
func leaseSeconds(ttl time.Duration) int64 {
	s := int64((ttl + time.Second - 1) / time.Second)
	return max(s, 1)
}

// leaseFor returns the session's lease for ttl, refreshed (or granted) so that it lives at least
// ttl from start.
func (b *Backend) leaseFor(ctx context.Context, c *clientv3.Client, ttl time.Duration, start time.Time) (clientv3.LeaseID, error) {
	secs := leaseSeconds(ttl)
	b.grantMu.Lock()
	defer b.grantMu.Unlock()
	b.mu.Lock()
	l := b.leases[secs]
	b.mu.Unlock()
	if l != nil {
		if !start.After(l.refreshed.Add(l.ttl - ttl)) {
			return l.id, nil // refreshed since start, or within the rounding slack
		}
		sent := b.clock.Now()
		b.requests.Add(1)
		_, err := c.KeepAliveOnce(ctx, l.id)
		switch {
		case err == nil:
			b.mu.Lock()
			l.refreshed = sent
			b.mu.Unlock()
			return l.id, nil
		case !errors.Is(err, rpctypes.ErrLeaseNotFound):
			return 0, b.wrap("renewing the session lease", err)
		}
		// The lease expired (the session stopped renewing for longer than the TTL): its keys
		// are gone. Grant a new one.
	}
	sent := b.clock.Now()
	b.requests.Add(1)
	resp, err := c.Grant(ctx, secs)
	if err != nil {
		return 0, b.wrap("granting a session lease", err)
	}
	b.mu.Lock()
	b.leases[secs] = &sessionLease{id: resp.ID, ttl: time.Duration(secs) * time.Second, refreshed: sent}
	b.mu.Unlock()
	return resp.ID, nil
}

// ownLease reports when lease id expires if it is one of the session's leases: it was refreshed
// at or after l.refreshed, so it lives at least until l.refreshed + l.ttl.
func (b *Backend) ownLease(id clientv3.LeaseID) (time.Time, time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.leases {
		if l.id == id {
			return l.refreshed.Add(l.ttl), l.ttl, true
		}
	}
	return time.Time{}, 0, false
}

// forget drops the session's lease id after etcd said it does not exist.
func (b *Backend) forget(id clientv3.LeaseID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for secs, l := range b.leases {
		if l.id == id {
			delete(b.leases, secs)
		}
	}
}

// txn sends one transaction.
func (b *Backend) txn(ctx context.Context, c *clientv3.Client, op string, lease clientv3.LeaseID, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	b.requests.Add(1)
	resp, err := c.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	if err != nil {
		if lease != 0 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			b.forget(lease)
		}
		return nil, b.wrap(op, err)
	}
	return resp, nil
}

// keepHold re-puts the hold record of key on lease, if it exists, keeping its value.
func keepHold(key string, lease clientv3.LeaseID) clientv3.Op {
	hk := HoldKeyPrefix + key
	return clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Version(hk), ">", 0)},
		[]clientv3.Op{clientv3.OpPut(hk, "", clientv3.WithLease(lease), clientv3.WithIgnoreValue())},
		nil)
}

// TryAcquire takes key for identity, or, if identity already holds it, moves it onto this
// session's lease for ttl and returns the hold as it began: two round trips (three the first time
// a TTL is used). If another value holds the key the error is a *backends.LockedError naming it,
// with its expiry when the key has a lease (one more round trip).
func (b *Backend) TryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	c, err := b.conn()
	if err != nil {
		return backends.Lease{}, err
	}
	start := b.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	lease, err := b.leaseFor(ctx, c, ttl, start)
	if err != nil {
		return backends.Lease{}, err
	}
	hk := HoldKeyPrefix + key
	begun := start.UTC().Format(time.RFC3339Nano)
	resp, err := b.txn(ctx, c, "acquiring "+strconv.Quote(key), lease,
		[]clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			// No shared place either (places.go): true only of an empty range.
			clientv3.Compare(clientv3.CreateRevision(placePrefix(key)), "=", 0).WithPrefix(),
		},
		[]clientv3.Op{
			clientv3.OpPut(key, identity, clientv3.WithLease(lease)),
			clientv3.OpPut(hk, begun, clientv3.WithLease(lease)),
			clientv3.OpGet(key),
		},
		[]clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", identity)},
			[]clientv3.Op{
				clientv3.OpPut(key, identity, clientv3.WithLease(lease)),
				clientv3.OpTxn(
					[]clientv3.Cmp{clientv3.Compare(clientv3.Version(hk), ">", 0)},
					[]clientv3.Op{clientv3.OpPut(hk, "", clientv3.WithLease(lease), clientv3.WithIgnoreValue())},
					[]clientv3.Op{clientv3.OpPut(hk, begun, clientv3.WithLease(lease))}),
				clientv3.OpGet(key),
				clientv3.OpGet(hk),
			},
			readOps(key),
		)})
	if err != nil {
		return backends.Lease{}, err
	}
	l := backends.Lease{Key: key, Identity: identity, TTL: ttl, AcquireTime: start, ExpireTime: start.Add(ttl)}
	if resp.Succeeded {
		kvs := resp.Responses[2].GetResponseRange().GetKvs()
		if len(kvs) == 1 {
			l.Version = strconv.FormatInt(kvs[0].CreateRevision, 10)
		}
		return l, nil
	}
	inner := resp.Responses[0].GetResponseTxn()
	if !inner.GetSucceeded() {
		// Held by another value, or free of it but held in places: name whichever it is.
		return backends.Lease{}, b.sharedLocked(ctx, c, key, readView(resp.Header.GetRevision(), inner.GetResponses()), -1)
	}
	if kvs := inner.GetResponses()[2].GetResponseRange().GetKvs(); len(kvs) == 1 {
		l.Version = strconv.FormatInt(kvs[0].CreateRevision, 10)
	}
	if kvs := inner.GetResponses()[3].GetResponseRange().GetKvs(); len(kvs) == 1 {
		if t, ok := parseHold(kvs[0].Value); ok {
			l.AcquireTime = t
		}
	}
	return l, nil
}

var _ backends.FreeWatcher = (*Backend)(nil)

// WatchFree watches key and its shared places from their current revision on and calls notify
// once, when the key or any place is deleted (released, its lease expired or was revoked, removed
// by hand: with places, one freed place may be enough for the caller), when the watch ends
// without that (the session closed, the member lost its leader, the revision was compacted), or
// at once when neither the key nor any place exists. The watch outlives ctx, which bounds only
// the first read.
func (b *Backend) WatchFree(ctx context.Context, key string, notify func()) error {
	if key == "" {
		return errors.New("etcd backend: the key must not be empty")
	}
	c, err := b.conn()
	if err != nil {
		return err
	}
	getCtx, cancel := context.WithTimeout(ctx, b.callTimeout)
	prefix := placePrefix(key)
	resp, err := b.txn(getCtx, c, "watching "+strconv.Quote(key), 0, nil, []clientv3.Op{
		clientv3.OpGet(key, clientv3.WithKeysOnly()),
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
	}, nil)
	cancel()
	if err != nil {
		return err
	}
	if resp.Responses[0].GetResponseRange().GetCount() == 0 && resp.Responses[1].GetResponseRange().GetCount() == 0 {
		go notify()
		return nil
	}
	watchCtx, stop := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	from := clientv3.WithRev(resp.Header.Revision + 1)
	held := c.Watch(watchCtx, key, from, clientv3.WithFilterPut())
	places := c.Watch(watchCtx, prefix, clientv3.WithPrefix(), from, clientv3.WithFilterPut())
	go func() {
		defer stop()
		for {
			var wr clientv3.WatchResponse
			var ok bool
			select {
			case wr, ok = <-held:
			case wr, ok = <-places:
			}
			if !ok || len(wr.Events) > 0 || wr.Canceled || wr.Err() != nil {
				break
			}
		}
		notify()
	}()
	return nil
}

// parseHold reads a hold record's value.
func parseHold(v []byte) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, string(v))
	return t, err == nil
}

// leaseExpiry estimates when the etcd lease id expires: zero when the key has no lease or the
// lease cannot be asked about.
func (b *Backend) leaseExpiry(ctx context.Context, c *clientv3.Client, id clientv3.LeaseID) time.Time {
	if id == 0 {
		return time.Time{}
	}
	t, _, err := b.timeToLive(ctx, c, id)
	if err != nil {
		return time.Time{}
	}
	return t
}

// timeToLive tells when lease id expires, and its granted TTL: from what the session knows when
// the lease is its own, else by asking etcd (one round trip). etcd truncates the remaining TTL to
// whole seconds: add half a second. A lease that has expired (or does not exist) gives a zero
// time.
func (b *Backend) timeToLive(ctx context.Context, c *clientv3.Client, id clientv3.LeaseID) (time.Time, time.Duration, error) {
	start := b.clock.Now()
	if exp, ttl, ok := b.ownLease(id); ok {
		if !exp.After(start) {
			return time.Time{}, 0, nil
		}
		return exp, ttl, nil
	}
	b.requests.Add(1)
	resp, err := c.TimeToLive(ctx, id)
	if err != nil {
		return time.Time{}, 0, b.wrap("reading a lease's time to live", err)
	}
	if resp.TTL <= 0 {
		return time.Time{}, 0, nil
	}
	return start.Add(time.Duration(resp.TTL)*time.Second + time.Second/2), time.Duration(resp.GrantedTTL) * time.Second, nil
}

// Renew refreshes this session's etcd lease for ttl and, in one transaction, checks that every
// lease's identity still holds its key, or its place of the key for a shared lease (and, when
// Version is set, that the key's create revision is still Version) and moves the keys that sit on
// another etcd lease onto it. A lease whose key is free, held by another value or re-created
// comes back in lost, untouched: a lost lock is never revived. Two round trips for up to 100
// leases, exclusive and shared alike, one more per further 100.
func (b *Backend) Renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) (renewed, lost []backends.Lease, err error) {
	if err := checkTTL(ttl); err != nil {
		return nil, nil, err
	}
	c, err := b.conn()
	if err != nil {
		return nil, nil, err
	}
	type ask struct {
		lease backends.Lease
		// key is the etcd key that holds the lease: the lock key, or the place key.
		key  string
		cmps []clientv3.Cmp
	}
	var asks []ask
	first := map[string]int{} // etcd key to its index in asks
	var dups []backends.Lease
	for _, l := range leases {
		if l.Key == "" || l.Identity == "" {
			lost = append(lost, l) // nothing can hold an empty key for an empty identity
			continue
		}
		key, owned := l.Key, clientv3.Compare(clientv3.Value(l.Key), "=", l.Identity)
		if l.Shared {
			// A place key names its identity; its value is when it was taken.
			key = placeKey(l.Key, l.Identity)
			owned = clientv3.Compare(clientv3.Version(key), ">", 0)
		}
		if _, ok := first[key]; ok {
			dups = append(dups, l) // etcd refuses two writes of one key in a transaction
			continue
		}
		cmps := []clientv3.Cmp{owned}
		if rev, err := strconv.ParseInt(l.Version, 10, 64); err == nil {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
		}
		first[key] = len(asks)
		asks = append(asks, ask{lease: l, key: key, cmps: cmps})
	}
	if len(asks) == 0 {
		return nil, lost, nil
	}
	start := b.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	lease, err := b.leaseFor(ctx, c, ttl, start)
	if err != nil {
		return nil, nil, err
	}
	held := make([]bool, len(asks))
	for from := 0; from < len(asks); from += renewChunk {
		chunk := asks[from:min(from+renewChunk, len(asks))]
		ops := make([]clientv3.Op, len(chunk))
		for i, a := range chunk {
			move := []clientv3.Op{clientv3.OpPut(a.key, "", clientv3.WithLease(lease), clientv3.WithIgnoreValue())}
			if !a.lease.Shared {
				move = []clientv3.Op{clientv3.OpPut(a.key, a.lease.Identity, clientv3.WithLease(lease)), keepHold(a.key, lease)}
			}
			onLease := append([]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(a.key), "=", lease)}, a.cmps...)
			ops[i] = clientv3.OpTxn(onLease, nil, []clientv3.Op{clientv3.OpTxn(a.cmps, move, nil)})
		}
		resp, err := b.txn(ctx, c, "renewing locks", lease, nil, ops, nil)
		if err != nil {
			return nil, nil, err
		}
		for i, r := range resp.Responses {
			t := r.GetResponseTxn()
			held[from+i] = t.GetSucceeded() || t.GetResponses()[0].GetResponseTxn().GetSucceeded()
		}
	}
	extend := func(l backends.Lease) backends.Lease {
		l.TTL, l.ExpireTime = ttl, start.Add(ttl)
		return l
	}
	for i, a := range asks {
		if held[i] {
			renewed = append(renewed, extend(a.lease))
		} else {
			lost = append(lost, a.lease)
		}
	}
	for _, l := range dups {
		i := first[l.Key]
		if l.Shared {
			i = first[placeKey(l.Key, l.Identity)]
		}
		if held[i] && asks[i].lease.Identity == l.Identity && asks[i].lease.Version == l.Version {
			renewed = append(renewed, extend(l))
		} else {
			lost = append(lost, l)
		}
	}
	return renewed, lost, nil
}

// Release deletes the key (and its hold record) if lease.Identity holds it, in one transaction.
// A free key counts as released; a key held by another value is left alone and the error wraps
// backends.ErrNotHeld. A shared lease deletes the identity's place key alone, which no other
// identity can hold.
func (b *Backend) Release(ctx context.Context, lease backends.Lease) error {
	if lease.Key == "" || lease.Identity == "" {
		return fmt.Errorf("etcd backend: cannot release a lease without key and identity (key %q, identity %q)", lease.Key, lease.Identity)
	}
	c, err := b.conn()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	if lease.Shared {
		_, err := b.txn(ctx, c, "releasing a place of "+strconv.Quote(lease.Key), 0, nil,
			[]clientv3.Op{clientv3.OpDelete(placeKey(lease.Key, lease.Identity))}, nil)
		return err
	}
	resp, err := b.txn(ctx, c, "releasing "+strconv.Quote(lease.Key), 0,
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(lease.Key), "=", lease.Identity)},
		[]clientv3.Op{clientv3.OpDelete(lease.Key), clientv3.OpDelete(HoldKeyPrefix + lease.Key)},
		[]clientv3.Op{clientv3.OpGet(lease.Key)})
	if err != nil {
		return err
	}
	if resp.Succeeded {
		return nil
	}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
		return fmt.Errorf("etcd backend: lock %q is held by %q, not %q: %w", lease.Key, kvs[0].Value, lease.Identity, backends.ErrNotHeld)
	}
	return nil
}

// Inspect reports who holds key: the key, its hold record and its places in one transaction,
// then the etcd lease's time to live of the key, or of its first place in key order. A key
// written by a client that writes no hold record comes back with a zero AcquireTime; a key
// without a lease with a zero ExpireTime. TTL is the etcd lease's granted TTL. A free key gives
// an error wrapping backends.ErrNotHeld.
func (b *Backend) Inspect(ctx context.Context, key string) (backends.Lease, error) {
	if key == "" {
		return backends.Lease{}, errors.New("etcd backend: key must not be empty")
	}
	c, err := b.conn()
	if err != nil {
		return backends.Lease{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	resp, err := b.txn(ctx, c, "inspecting "+strconv.Quote(key), 0, nil,
		append(readOps(key), clientv3.OpGet(HoldKeyPrefix+key)), nil)
	if err != nil {
		return backends.Lease{}, err
	}
	view := readView(resp.Header.Revision, resp.Responses)
	if view.exclusive != nil {
		l, live, err := exclusiveLease(ctx, c, key, view.exclusive, resp.Responses[2].GetResponseRange().GetKvs(), b.leaseTimes())
		switch {
		case err != nil:
			return backends.Lease{}, err
		case !live:
			// The lease has expired and etcd is about to delete the key.
			return backends.Lease{}, fmt.Errorf("etcd backend: lock %q has expired: %w", key, backends.ErrNotHeld)
		}
		return l, nil
	}
	l, live, err := b.firstPlace(ctx, c, key, view.places)
	switch {
	case err != nil:
		return backends.Lease{}, err
	case !live:
		return backends.Lease{}, fmt.Errorf("etcd backend: lock %q: %w", key, backends.ErrNotHeld)
	}
	return l, nil
}

// Ping asks the members for their status until one answers, which proves the cluster reachable
// (and the session authenticated, which connecting does), then writes and deletes a probe key
// (PingKeyPrefix and a random suffix), which proves that the cluster has a quorum and the user
// may write. Errors name the endpoints and say what failed; they never contain the password.
func (b *Backend) Ping(ctx context.Context) error {
	c, err := b.conn()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	if err := b.status(ctx, c); err != nil {
		return err
	}
	b.requests.Add(1)
	if _, err := c.Put(ctx, b.pingKey, "ping"); err != nil {
		return b.wrap("writing the probe key "+strconv.Quote(b.pingKey), err)
	}
	b.requests.Add(1)
	if _, err := c.Delete(ctx, b.pingKey); err != nil {
		return b.wrap("deleting the probe key "+strconv.Quote(b.pingKey), err)
	}
	return nil
}

// status asks every member for its status at once and returns when one answers, so that a dead
// member does not use up the call's time.
func (b *Backend) status(ctx context.Context, c *clientv3.Client) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(b.cfg.Endpoints))
	for _, ep := range b.cfg.Endpoints {
		b.requests.Add(1)
		go func() {
			if _, err := c.Status(ctx, ep); err != nil {
				errs <- fmt.Errorf("%s: %w", ep, err)
				return
			}
			errs <- nil
		}()
	}
	var failed []error
	for range b.cfg.Endpoints {
		err := <-errs
		if err == nil {
			return nil
		}
		failed = append(failed, err)
	}
	return b.wrap("no member answered a status request", errors.Join(failed...))
}

// Close ends the session and closes its connections. It does not revoke the session's etcd
// leases: locks it took stay until their TTL runs out, unless another session resumes or releases
// them. Calls after Close fail.
func (b *Backend) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Swap(true) || b.client == nil {
		return nil
	}
	err := b.client.Close()
	b.client = nil
	if err != nil && !errors.Is(err, context.Canceled) {
		return b.wrap("closing", err)
	}
	return nil
}

// checkArgs rejects calls that cannot be served.
func checkArgs(key, identity string, ttl time.Duration) error {
	switch {
	case key == "":
		return errors.New("etcd backend: key must not be empty")
	case identity == "":
		return errors.New("etcd backend: identity must not be empty")
	}
	return checkTTL(ttl)
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("etcd backend: ttl must be positive, got %s", ttl)
	}
	return nil
}
