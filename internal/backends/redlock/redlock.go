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

// Package redlock keeps locks on N independent Redis masters with the Redlock algorithm: a lock
// is held while a majority (the quorum, N/2+1) of the nodes hold it. N is odd and at least 3; the
// nodes must be independent masters, not replicas of one another, and each must appear once.
//
// On every node the keys are those of the redis backend (package redisnode): the lock key holds
// the holder identity, written with `SET key identity NX PX ttl`, and a hold record beside it
// keeps when the hold began. So a client running Redlock with SET NX on the same nodes (redsync,
// for one) is excluded too, and a restarted controller resumes a hold by identity.
//
// # Acquire
//
// TryAcquire asks every node at once, each under the per-node timeout, and measures the time
// from its start to the last answer. The lock is granted only if a quorum of nodes granted it
// and the validity, TTL − elapsed − drift, is positive; drift = TTL/100 + 2 ms allows for the
// nodes' clocks running faster than the controller's. Otherwise the attempt is undone on every
// node that did not answer that another holder has the key (owner-checked, so nobody else's key
// is touched), and the call fails with a *QuorumError: it unwraps to backends.ErrLocked (with a
// *backends.LockedError naming the holder) when other holders make a quorum impossible, and to
// ErrUnavailable when too few nodes answered, or answered too late, to decide. When concurrent
// contenders split the nodes so that nobody reached a quorum, the attempt is retried up to
// splitRetries times after a random pause shorter than the per-node timeout, so that one of
// them wins.
//
// # Per-node timeout
//
// NodeTimeout(ttl) is ttl/50, at least 100 ms and at most 200 ms: 2 % of lockwarden's minimum
// TTL of 5 s, and less above 10 s. A node that is down, partitioned or paused (SIGSTOP) thus costs
// a call at most that long, however long the TTL, while a healthy node on a busy machine is not
// given up on for a scheduling hiccup. WithNodeTimeout sets a fixed value instead. Ping allows
// PingTimeout per node, since it may be the first to dial and handshake.
//
// # Renew
//
// Renew sends every node one pipeline that resets the TTL of each lease whose identity still
// holds its key there; a lease that a quorum renewed within its validity is renewed. On the
// nodes where such a lease is missing (a node restarted without persistence), it is taken again
// with SET NX, so that its quorum does not erode one restart at a time. A lease that fewer than a
// quorum renewed is lost, and its keys left on the other nodes are released. Renewal therefore
// costs one round trip per node however many leases there are, plus one more per node only when
// some lease needed repair or cleanup. If fewer than a quorum of nodes answered, nothing is known
// and Renew returns an error.
//
// # Shared locks
//
// A shared acquire (TryAcquireShared, places.go) takes a place on every node as the redis backend
// does, and needs more nodes than a majority: SharedQuorum(N, places). Renew keeps that rule, and
// does not re-create a place on a node that lost it. See places.go.
//
// # What it does not promise
//
// Redlock's safety rests on bounded network delay, bounded process pauses and clocks that run at
// about the same rate; a node that restarts without persistence while it held a vote can hand
// that vote to another holder (Kleppmann, "How to do distributed locking"; antirez, "Is Redlock
// safe?"). lockwarden uses it as a lock service whose every grant is fenced by a token that the
// protected resource must check.
//
// A lease's ExpireTime is the controller's clock at the start of the call plus the TTL. The
// drift allowance is used to decide whether a grant or renewal is valid, not subtracted from
// ExpireTime, so ExpireTime may be up to the drift (about 1 % of the TTL) later than the moment
// a fast-clocked node lets the key go.
package redlock

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/internal/redisnode"
)

const (
	// MinNodeTimeout and MaxNodeTimeout bound the per-node timeout, NodeTimeout.
	MinNodeTimeout = 100 * time.Millisecond
	// MaxNodeTimeout is the per-node timeout of TTLs from 10 s up, and of Release and Inspect.
	MaxNodeTimeout = 200 * time.Millisecond
	// PingTimeout bounds each node's answer to Ping.
	PingTimeout = time.Second
	// PingKeyPrefix starts the key that Ping writes and deletes on each node.
	PingKeyPrefix = "lockwarden-ping:"
	// splitRetries is how often TryAcquire tries again when concurrent contenders split the
	// nodes so that none of them reached a quorum.
	splitRetries = 3
)

// ErrUnavailable means that too few nodes answered, or answered in time, to decide: nothing was
// granted. QuorumError unwraps to it unless other holders make a quorum impossible.
var ErrUnavailable = errors.New("too few Redis nodes answered in time")

// NodeTimeout is the default per-node timeout of a call with the given TTL: ttl/50, at least
// MinNodeTimeout and at most MaxNodeTimeout.
func NodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/50, MinNodeTimeout), MaxNodeTimeout)
}

// Drift is the allowance for clock drift between the controller and the nodes: ttl/100 + 2 ms,
// Redlock's customary factor.
func Drift(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// Quorum is the number of nodes out of n that must agree: a majority.
func Quorum(n int) int { return n/2 + 1 }

// Config says how to reach the nodes.
type Config struct {
	// Addresses are the nodes' host:port, an odd number of at least 3, each once.
	Addresses []string
	// Password is sent with AUTH to every node when set. It never appears in errors.
	Password string
	// TLS turns on TLS to every node when set.
	TLS *tls.Config
}

// Option configures New.
type Option func(*Backend)

// WithClock sets the clock that elapsed and expiry times are measured with. Default: the real
// clock.
func WithClock(c clock.PassiveClock) Option {
	return func(b *Backend) { b.clock = c }
}

// WithNodeTimeout sets a fixed per-node timeout for every call but Ping. Default: NodeTimeout of
// the call's TTL.
func WithNodeTimeout(d time.Duration) Option {
	return func(b *Backend) { b.nodeTimeout = d }
}

// Backend is one session with a set of Redis nodes. It is safe for concurrent use.
type Backend struct {
	nodes  []*redisnode.Node
	quorum int
	clock  clock.PassiveClock
	// nodeTimeout is fixed by WithNodeTimeout; zero means NodeTimeout of the TTL.
	nodeTimeout time.Duration
	// pingKey is this session's probe key.
	pingKey string

	// requests counts requests sent to all nodes (see RoundTrips).
	requests atomic.Int64
	closed   atomic.Bool
}

var (
	_ backends.Backend = (*Backend)(nil)
	_ backends.Sharer  = (*Backend)(nil)
)

// New returns a session with the nodes at cfg.Addresses. It does not connect: Ping checks that a
// quorum of nodes can be reached, authenticated with and written to.
func New(cfg Config, opts ...Option) (*Backend, error) {
	b := &Backend{clock: clock.RealClock{}, quorum: Quorum(len(cfg.Addresses))}
	for _, opt := range opts {
		opt(b)
	}
	n := len(cfg.Addresses)
	switch {
	case n < 3 || n%2 == 0:
		return nil, fmt.Errorf("redlock backend: needs an odd number of at least 3 independent Redis nodes, got %d", n)
	case b.clock == nil:
		return nil, errors.New("redlock backend: the clock must not be nil")
	case b.nodeTimeout < 0:
		return nil, fmt.Errorf("redlock backend: the node timeout must not be negative, got %s", b.nodeTimeout)
	}
	seen := map[string]bool{}
	for _, addr := range cfg.Addresses {
		switch {
		case addr == "":
			return nil, errors.New("redlock backend: a node address is empty")
		case seen[addr]:
			// A node listed twice would cast two votes.
			return nil, fmt.Errorf("redlock backend: node %s is listed more than once", addr)
		}
		seen[addr] = true
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id) // crypto/rand.Read never fails
	b.pingKey = PingKeyPrefix + hex.EncodeToString(id)
	for _, addr := range cfg.Addresses {
		b.nodes = append(b.nodes, redisnode.New(redisnode.Config{Address: addr, Password: cfg.Password, TLS: cfg.TLS}, &b.requests))
	}
	return b, nil
}

// RoundTrips returns how many requests (commands, script runs or pipelines) the session has sent
// to all nodes together, failed ones included.
func (b *Backend) RoundTrips() int64 { return b.requests.Load() }

// timeout is the per-node timeout of a call with the given TTL.
func (b *Backend) timeout(ttl time.Duration) time.Duration {
	switch {
	case b.nodeTimeout > 0:
		return b.nodeTimeout
	case ttl > 0:
		return NodeTimeout(ttl)
	}
	return MaxNodeTimeout
}

// TryAcquire takes key for identity on a quorum of nodes within the validity, or refreshes
// identity's hold. See the package documentation.
func (b *Backend) TryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	if err := b.usable(); err != nil {
		return backends.Lease{}, err
	}
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	return b.retrySplits(ctx, ttl, func() (backends.Lease, bool, error) {
		return b.tryOnce(ctx, key, identity, ttl)
	})
}

// retrySplits makes attempts until one is not split (other holders had some nodes, but too few to
// settle the outcome), at most splitRetries times more than once, after a random pause shorter
// than the per-node timeout, so that one of the contenders wins.
func (b *Backend) retrySplits(ctx context.Context, ttl time.Duration, attempt func() (backends.Lease, bool, error)) (backends.Lease, error) {
	for n := 0; ; n++ {
		lease, split, err := attempt()
		if !split || n == splitRetries || ctx.Err() != nil {
			return lease, err
		}
		pause := randomDuration(b.timeout(ttl))
		select {
		case <-ctx.Done():
			return backends.Lease{}, err
		case <-time.After(pause):
		}
	}
}

// tryOnce makes one Redlock attempt. split says that other holders had some nodes but none a
// quorum, so that trying again may succeed.
func (b *Backend) tryOnce(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, bool, error) {
	timeout := b.timeout(ttl)
	start := b.clock.Now()
	rec := redisnode.NewRecord(start, identity)
	results := make([]redisnode.AcquireResult, len(b.nodes))
	errs := make([]error, len(b.nodes))
	b.each(ctx, timeout, func(ctx context.Context, i int, n *redisnode.Node) {
		results[i], errs[i] = n.Acquire(ctx, key, ttl, rec)
	})
	elapsed := b.clock.Since(start)
	validity := ttl - elapsed - Drift(ttl)

	var granted []redisnode.Record
	var grantedBy, failed []int // nodes that may hold the key for identity
	holders := map[string][]time.Duration{}
	qe := &QuorumError{Op: "acquire", Key: key, Nodes: len(b.nodes), Quorum: b.quorum}
	for i, err := range errs {
		switch {
		case err != nil:
			qe.Failed = append(qe.Failed, NodeError{Address: b.nodes[i].Addr(), Err: err})
			failed = append(failed, i)
		case results[i].Outcome == redisnode.Locked:
			holders[results[i].Holder] = append(holders[results[i].Holder], results[i].PTTL)
		default:
			granted = append(granted, results[i].Record)
			grantedBy = append(grantedBy, i)
		}
	}
	if len(granted) >= b.quorum && validity > 0 {
		r := mostCommon(granted)
		return backends.Lease{
			Key:         key,
			Identity:    identity,
			TTL:         ttl,
			AcquireTime: r.AcquireTime,
			ExpireTime:  start.Add(ttl),
			Version:     r.HoldID,
		}, false, nil
	}

	b.release(ctx, key, identity, false, timeout, grantedBy, failed)
	qe.Agreed = len(granted)
	if len(granted) >= b.quorum {
		qe.Elapsed, qe.TTL = elapsed, ttl
		return backends.Lease{}, false, qe
	}
	holder, pttls := strongest(holders)
	now := b.clock.Now()
	qe.HolderNodes = len(pttls)
	if len(pttls) >= b.quorum {
		qe.Locked = &backends.LockedError{Key: key, Holder: holder, ExpireTime: quorumExpiry(now, pttls, b.quorum)}
		return backends.Lease{}, false, qe
	}
	if len(holders) > 0 && len(granted)+len(qe.Failed) < b.quorum {
		// Other holders have enough nodes that this identity cannot reach a quorum, though none of
		// them has one either: contenders split the vote.
		qe.Locked = &backends.LockedError{Key: key, Holder: holder}
	}
	// Try again only if the nodes that answered could make up a quorum without the others.
	return backends.Lease{}, len(holders) > 0 && len(b.nodes)-len(qe.Failed) >= b.quorum, qe
}

// release undoes an attempt (of a place when shared), owner-checked, even if ctx is done: keys
// left behind would block every contender until they expire. It waits for the nodes that granted
// the attempt, so that none of its keys is left on a node that answers; the nodes that failed to
// answer may or may not have taken the key, and are asked in the background, so that a paused
// node does not cost the call a second timeout.
func (b *Backend) release(ctx context.Context, key, identity string, shared bool, timeout time.Duration, granted, failed []int) {
	ctx = context.WithoutCancel(ctx)
	releaseOn := func(i int) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// Best effort: what is left expires by TTL.
		if shared {
			_, _ = b.nodes[i].ReleaseShared(ctx, key, identity)
		} else {
			_, _ = b.nodes[i].Release(ctx, key, identity)
		}
	}
	for _, i := range failed {
		go releaseOn(i)
	}
	var wg sync.WaitGroup
	for _, i := range granted {
		wg.Go(func() { releaseOn(i) })
	}
	wg.Wait()
}

// Renew extends every lease that a quorum of nodes still holds for its identity (for a shared
// lease, the quorum of its place: placeQuorum), in one pipeline per node, exclusive and shared
// leases alike. See the package documentation.
func (b *Backend) Renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) (renewed, lost []backends.Lease, err error) {
	if err := b.usable(); err != nil {
		return nil, nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, nil, err
	}
	var claims []redisnode.Claim
	var asked []backends.Lease
	var goneEarly []backends.Lease
	for _, l := range leases {
		if l.Key == "" || l.Identity == "" {
			goneEarly = append(goneEarly, l) // nothing can hold an empty key for an empty identity
			continue
		}
		claims = append(claims, redisnode.Claim{Key: l.Key, Record: recordOf(l), Shared: l.Shared})
		asked = append(asked, l)
	}
	if len(claims) == 0 {
		return nil, goneEarly, nil
	}

	timeout := b.timeout(ttl)
	start := b.clock.Now()
	held := make([][]redisnode.Renewal, len(b.nodes))
	errs := make([]error, len(b.nodes))
	b.each(ctx, timeout, func(ctx context.Context, i int, n *redisnode.Node) {
		held[i], errs[i] = n.Renew(ctx, claims, ttl)
	})
	elapsed := b.clock.Since(start)

	qe := &QuorumError{Op: "renew", Nodes: len(b.nodes), Quorum: b.quorum}
	for i, err := range errs {
		if err != nil {
			qe.Failed = append(qe.Failed, NodeError{Address: b.nodes[i].Addr(), Err: err})
		}
	}
	qe.Agreed = len(b.nodes) - len(qe.Failed)
	if qe.Agreed < b.quorum {
		return nil, nil, qe
	}
	if ttl-elapsed-Drift(ttl) <= 0 {
		qe.Elapsed, qe.TTL = elapsed, ttl
		return nil, nil, qe
	}

	take := make([][]redisnode.Claim, len(b.nodes))
	drop := make([][]redisnode.Claim, len(b.nodes))
	for j, l := range asked {
		count := 0
		var limits []int
		for i := range b.nodes {
			if errs[i] == nil && held[i][j].Held {
				count++
				limits = append(limits, held[i][j].Places)
			}
		}
		quorum := b.quorum
		if l.Shared {
			quorum = placeQuorum(len(b.nodes), limits)
		}
		if count >= quorum {
			for i := range b.nodes {
				// A missing place is not restored: its node might hold its limit of places by now.
				if errs[i] == nil && !held[i][j].Held && !l.Shared {
					take[i] = append(take[i], claims[j])
				}
			}
			l.TTL, l.ExpireTime = ttl, start.Add(ttl)
			renewed = append(renewed, l)
			continue
		}
		for i := range b.nodes {
			if errs[i] == nil && held[i][j].Held {
				drop[i] = append(drop[i], claims[j])
			}
		}
		lost = append(lost, l)
	}
	// Best effort: a node that misses the repair is repaired at the next renewal, and what a
	// cleanup misses expires by TTL.
	b.each(ctx, timeout, func(ctx context.Context, i int, n *redisnode.Node) {
		_ = n.Settle(ctx, take[i], drop[i], ttl)
	})
	return renewed, append(lost, goneEarly...), nil
}

// Release frees the lock on every node where lease.Identity holds it, owner-checked, or for a
// shared lease the identity's place alone. The lock counts as released once so many nodes
// answered that they do not hold it for the identity that it cannot have a quorum (a majority,
// the smallest quorum of any hold); if another identity holds the key exclusively on a quorum,
// the error wraps backends.ErrNotHeld. A place is never held by another identity: a shared
// release never gives ErrNotHeld.
func (b *Backend) Release(ctx context.Context, lease backends.Lease) error {
	if err := b.usable(); err != nil {
		return err
	}
	if lease.Key == "" || lease.Identity == "" {
		return fmt.Errorf("redlock backend: cannot release a lease without key and identity (key %q, identity %q)", lease.Key, lease.Identity)
	}
	results := make([]redisnode.ReleaseResult, len(b.nodes))
	errs := make([]error, len(b.nodes))
	b.each(ctx, b.timeout(lease.TTL), func(ctx context.Context, i int, n *redisnode.Node) {
		if lease.Shared {
			results[i], errs[i] = n.ReleaseShared(ctx, lease.Key, lease.Identity)
		} else {
			results[i], errs[i] = n.Release(ctx, lease.Key, lease.Identity)
		}
	})
	qe := &QuorumError{Op: "release", Key: lease.Key, Nodes: len(b.nodes), Quorum: b.quorum}
	others := map[string][]time.Duration{}
	for i, err := range errs {
		switch {
		case err != nil:
			qe.Failed = append(qe.Failed, NodeError{Address: b.nodes[i].Addr(), Err: err})
		case results[i].Outcome == redisnode.HeldByOther:
			others[results[i].Holder] = append(others[results[i].Holder], 0)
			qe.Agreed++
		default:
			qe.Agreed++
		}
	}
	if holder, votes := strongest(others); len(votes) >= b.quorum {
		return fmt.Errorf("redlock backend: lock %q is held by %q on %d of %d nodes, not by %q: %w",
			lease.Key, holder, len(votes), len(b.nodes), lease.Identity, backends.ErrNotHeld)
	}
	if qe.Agreed >= len(b.nodes)-b.quorum+1 {
		return nil // too few nodes can still hold it for a quorum
	}
	return qe
}

// Inspect reports the identity that holds key on a quorum of nodes, or, for a key held in shared
// places, the place of the lowest identity among those held on their quorum (Shared set).
// ExpireTime is when fewer than a quorum will hold it; AcquireTime and Version come from the
// holder's records (zero and empty for a holder that writes none); TTL is zero. A key that no
// identity holds on a quorum gives an error wrapping backends.ErrNotHeld, unless the nodes that
// did not answer could make up a quorum, which gives a *QuorumError.
func (b *Backend) Inspect(ctx context.Context, key string) (backends.Lease, error) {
	if err := b.usable(); err != nil {
		return backends.Lease{}, err
	}
	if key == "" {
		return backends.Lease{}, errors.New("redlock backend: key must not be empty")
	}
	holds, undecided, qe := b.holds(ctx, "inspect", key)
	switch {
	case len(holds) > 0:
		return holds[0], nil
	case undecided:
		return backends.Lease{}, qe
	}
	return backends.Lease{}, fmt.Errorf("redlock backend: lock %q is held on no quorum of nodes: %w", key, backends.ErrNotHeld)
}

// Ping checks every node as the redis backend does (PING, then SET and DEL of a probe key), each
// within PingTimeout. It succeeds when a quorum of nodes passes, since locks can then be granted;
// otherwise the *QuorumError names every node that failed and why.
func (b *Backend) Ping(ctx context.Context) error {
	if err := b.usable(); err != nil {
		return err
	}
	errs := make([]error, len(b.nodes))
	b.each(ctx, PingTimeout, func(ctx context.Context, i int, n *redisnode.Node) {
		errs[i] = n.Ping(ctx, b.pingKey)
	})
	qe := &QuorumError{Op: "ping", Nodes: len(b.nodes), Quorum: b.quorum}
	for i, err := range errs {
		if err != nil {
			qe.Failed = append(qe.Failed, NodeError{Address: b.nodes[i].Addr(), Err: err})
		} else {
			qe.Agreed++
		}
	}
	switch {
	case qe.Agreed == len(b.nodes):
		return nil
	case qe.Agreed >= b.quorum:
		return &backends.DegradedError{Err: qe}
	}
	return qe
}

// Close ends the session and closes its connections. Locks it took stay until their TTL runs out,
// unless another session resumes or releases them. Calls after Close fail.
func (b *Backend) Close(context.Context) error {
	if b.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, n := range b.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// each runs f on every node at once, each under its own timeout, and waits for all of them.
func (b *Backend) each(ctx context.Context, timeout time.Duration, f func(ctx context.Context, i int, n *redisnode.Node)) {
	var wg sync.WaitGroup
	for i, n := range b.nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			f(ctx, i, n)
		})
	}
	wg.Wait()
}

func (b *Backend) usable() error {
	if b.closed.Load() {
		return errors.New("redlock backend: session is closed")
	}
	return nil
}

// recordOf is the hold record a lease stands for, as Renew restores it on a node that lost it.
func recordOf(l backends.Lease) redisnode.Record {
	r := redisnode.Record{AcquireTime: time.UnixMilli(l.AcquireTime.UnixMilli()), HoldID: l.Version, Identity: l.Identity}
	if _, err := hex.DecodeString(r.HoldID); err != nil || r.HoldID == "" {
		r.HoldID = redisnode.NewRecord(l.AcquireTime, l.Identity).HoldID
	}
	return r
}

// mostCommon returns the record most nodes reported (the earliest among equals), so that every
// call reports the same hold however the nodes answered.
func mostCommon(records []redisnode.Record) redisnode.Record {
	counts := map[redisnode.Record]int{}
	for _, r := range records {
		counts[r]++
	}
	best := records[0]
	for r, c := range counts {
		if c > counts[best] || c == counts[best] && r.AcquireTime.Before(best.AcquireTime) {
			best = r
		}
	}
	return best
}

// strongest returns the holder with the most nodes, and its nodes' remaining TTLs ("" and nil for
// none). Ties go to the smaller name, so that the answer does not depend on map order.
func strongest(holders map[string][]time.Duration) (string, []time.Duration) {
	var best string
	var votes []time.Duration
	for h, v := range holders {
		if len(v) > len(votes) || len(v) == len(votes) && h < best {
			best, votes = h, v
		}
	}
	return best, votes
}

// quorumExpiry is when fewer than quorum of the nodes with these remaining TTLs will hold a key,
// counted from now; zero when that is never (keys without TTL).
func quorumExpiry(now time.Time, pttls []time.Duration, quorum int) time.Time {
	if len(pttls) < quorum {
		return time.Time{}
	}
	sorted := append([]time.Duration(nil), pttls...)
	// A key without TTL (negative PTTL) never expires: it sorts last.
	sort.Slice(sorted, func(a, b int) bool {
		return sorted[b] < 0 && sorted[a] >= 0 || sorted[a] >= 0 && sorted[b] >= 0 && sorted[a] < sorted[b]
	})
	d := sorted[len(sorted)-quorum]
	if d < 0 {
		return time.Time{}
	}
	return now.Add(d)
}

// randomDuration returns a random duration in [0, d).
func randomDuration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(d)))
	if err != nil {
		return d / 2
	}
	return time.Duration(n.Int64())
}

// checkArgs rejects calls that cannot be served.
func checkArgs(key, identity string, ttl time.Duration) error {
	switch {
	case key == "":
		return errors.New("redlock backend: key must not be empty")
	case identity == "":
		return errors.New("redlock backend: identity must not be empty")
	}
	return checkTTL(ttl)
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("redlock backend: ttl must be positive, got %s", ttl)
	}
	return nil
}
