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

package redlock

// Shared locks (backends.Sharer) over independent nodes.
//
// # On each node
//
// Each node keeps a lock's places as the redis backend does (package redisnode): the lock key
// becomes a sorted set of places, one per identity, scored with its expiry by the node's clock,
// beside a hash of place records; one Lua script per acquire, renewal or release decides on the
// key's type and its live places with no other command in between. So on every node, atomically,
// a place is refused while the key is held exclusively (by lockwarden or any SET NX client), an
// exclusive hold is refused while a place is live, and no more than the asked number of places
// is admitted.
//
// # Quorum
//
// A majority is not enough for places. With 3 nodes and 2 places, three holders can each win two
// nodes (A on nodes 1 and 2, B on 2 and 3, C on 1 and 3) while no node holds more than two
// places. SharedQuorum(N, k) is the fewest nodes that rule this out: if k+1 holders each held a
// place on q nodes, the nodes would hold (k+1)·q places together, and they hold at most N·k; so
// q must satisfy (k+1)·q > N·k. An exclusive hold keeps its majority m: m + q > N because q ≥ m,
// so an exclusive holder and a place holder would need one node to hold both a string and a
// sorted set at the same key, which no node does.
//
// The price is availability: more places need more of the nodes to answer. With 3 nodes any
// shared lock of 2 places or more needs all 3; with 5 nodes, 2 or 3 places need 4 and 4 places
// or more need all 5.
//
// # Renewal
//
// Renew extends a place where its node still holds it and keeps it only if as many nodes as its
// quorum did. The quorum is that of the number of places the place was taken under, which each
// node stores with the place (the lease does not carry it), the highest the nodes report. A place
// missing on a node (a node restarted empty) is not taken again there: the node may hold its limit
// of places by now, and a place taken beyond the limit would break the count above. A place thus
// survives as many node losses as N exceeds its quorum, and is then reported lost, as on the other
// backends when a place expired; the holder may acquire again.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/internal/redisnode"
)

// SharedQuorum is the number of nodes out of n that must grant a place of a lock with the given
// number of places (at least 1): the smallest q with (places+1)·q > n·places, so that places+1
// holders can never each hold a place on q nodes when no node admits more than places of them.
// For one place it is the majority, Quorum(n).
func SharedQuorum(n, places int) int {
	return n*places/(places+1) + 1
}

// placeQuorum is the quorum a place must keep, given the numbers of places it was taken under as
// the nodes that hold it report them: that of the highest, the most demanding. A node that lost
// the place's record (0) reports nothing, and the place then needs every node.
func placeQuorum(n int, limits []int) int {
	most := 1
	for _, l := range limits {
		if l <= 0 {
			return n
		}
		most = max(most, l)
	}
	return SharedQuorum(n, most)
}

// TryAcquireShared takes one of key's places for identity on SharedQuorum(N, places) nodes within
// the validity, or extends the identity's place. As TryAcquire: a failed attempt is undone on
// every node that may hold the place, and a split vote is tried again. The error is a
// *QuorumError that unwraps to backends.ErrLocked when the key is held exclusively on a majority,
// when places other holders hold their place on the quorum each, or when other holders leave too
// few nodes with a free place; else to ErrUnavailable.
func (b *Backend) TryAcquireShared(ctx context.Context, key, identity string, ttl time.Duration, places int) (backends.Lease, error) {
	if err := b.usable(); err != nil {
		return backends.Lease{}, err
	}
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	if places < 1 {
		return backends.Lease{}, fmt.Errorf("redlock backend: places must be at least 1, got %d", places)
	}
	return b.retrySplits(ctx, ttl, func() (backends.Lease, bool, error) {
		return b.tryShared(ctx, key, identity, ttl, places)
	})
}

// tryShared makes one attempt at a place. split says that other holders kept it from a quorum
// without holding so much that trying again is in vain.
func (b *Backend) tryShared(ctx context.Context, key, identity string, ttl time.Duration, places int) (backends.Lease, bool, error) {
	quorum := SharedQuorum(len(b.nodes), places)
	timeout := b.timeout(ttl)
	start := b.clock.Now()
	rec := redisnode.NewRecord(start, identity)
	results := make([]redisnode.AcquireResult, len(b.nodes))
	errs := make([]error, len(b.nodes))
	b.each(ctx, timeout, func(ctx context.Context, i int, n *redisnode.Node) {
		results[i], errs[i] = n.AcquireShared(ctx, key, ttl, places, rec)
	})
	elapsed := b.clock.Since(start)
	validity := ttl - elapsed - Drift(ttl)

	var granted []redisnode.Record
	var grantedBy, failed []int
	exclusive := map[string][]time.Duration{} // exclusive holders' remaining TTLs, by node
	placed := map[string][]time.Duration{}    // other identities' places, by node
	qe := &QuorumError{Op: "acquire", Key: key, Nodes: len(b.nodes), Quorum: quorum, Places: places}
	for i, err := range errs {
		switch r := results[i]; {
		case err != nil:
			qe.Failed = append(qe.Failed, NodeError{Address: b.nodes[i].Addr(), Err: err})
			failed = append(failed, i)
		case r.Outcome == redisnode.Locked && r.Places == nil:
			exclusive[r.Holder] = append(exclusive[r.Holder], r.PTTL)
		case r.Outcome == redisnode.Locked:
			for _, p := range r.Places {
				placed[p.Identity] = append(placed[p.Identity], p.PTTL)
			}
		default:
			granted = append(granted, r.Record)
			grantedBy = append(grantedBy, i)
		}
	}
	if len(granted) >= quorum && validity > 0 {
		r := mostCommon(granted)
		return backends.Lease{
			Key:         key,
			Identity:    identity,
			TTL:         ttl,
			AcquireTime: r.AcquireTime,
			ExpireTime:  start.Add(ttl),
			Version:     r.HoldID,
			Shared:      true,
		}, false, nil
	}

	b.release(ctx, key, identity, true, timeout, grantedBy, failed)
	qe.Agreed = len(granted)
	if len(granted) >= quorum {
		qe.Elapsed, qe.TTL = elapsed, ttl
		return backends.Lease{}, false, qe
	}
	now := b.clock.Now()
	if holder, pttls := strongest(exclusive); len(pttls) >= b.quorum {
		qe.Exclusive, qe.HolderNodes = true, len(pttls)
		qe.Locked = &backends.LockedError{Key: key, Holder: holder, ExpireTime: quorumExpiry(now, pttls, b.quorum)}
		return backends.Lease{}, false, qe
	}
	if holder, expire, n := fullPlaces(now, placed, quorum); n >= places {
		qe.Full = true
		qe.HolderNodes = len(placed[holder])
		qe.Locked = &backends.LockedError{Key: key, Holder: holder, ExpireTime: expire}
		return backends.Lease{}, false, qe
	}
	contended := len(exclusive) > 0 || len(placed) > 0
	if contended && len(granted)+len(qe.Failed) < quorum {
		// Other holders take so many nodes that this identity cannot reach the quorum, though
		// they do not fill the places on a quorum either: contenders split the nodes.
		holder, votes := strongest(placed)
		if h, v := strongest(exclusive); len(v) > len(votes) {
			holder, votes = h, v
		}
		qe.HolderNodes = len(votes)
		qe.Locked = &backends.LockedError{Key: key, Holder: holder}
	}
	// Try again only if the nodes that answered could make up a quorum without the others.
	return backends.Lease{}, contended && len(b.nodes)-len(qe.Failed) >= quorum, qe
}

// fullPlaces counts the holders whose place is on at least quorum nodes, and returns the one whose
// place is the first to fall below it, and when.
func fullPlaces(now time.Time, placed map[string][]time.Duration, quorum int) (first string, expire time.Time, n int) {
	for holder, pttls := range placed {
		if len(pttls) < quorum {
			continue
		}
		n++
		e := quorumExpiry(now, pttls, quorum)
		if first == "" || e.Before(expire) || e.Equal(expire) && holder < first {
			first, expire = holder, e
		}
	}
	return first, expire, n
}

// Holders lists the exclusive holder of key on a majority of nodes, or else every place held on
// its quorum of nodes, by identity. It fails with a *QuorumError when the nodes that did not
// answer could change the list.
func (b *Backend) Holders(ctx context.Context, key string) ([]backends.Lease, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, errors.New("redlock backend: key must not be empty")
	}
	holds, undecided, qe := b.holds(ctx, "holders", key)
	if undecided {
		return nil, qe
	}
	return holds, nil
}

// holds asks every node who holds key and decides: the exclusive holder on a majority, or every
// place on its quorum (placeQuorum), by identity. undecided says that the nodes that failed (qe
// lists them) could make up a quorum for a hold not in the list.
func (b *Backend) holds(ctx context.Context, op, key string) (holds []backends.Lease, undecided bool, qe *QuorumError) {
	holdings := make([]redisnode.Holding, len(b.nodes))
	errs := make([]error, len(b.nodes))
	b.each(ctx, b.timeout(0), func(ctx context.Context, i int, n *redisnode.Node) {
		holdings[i], errs[i] = n.Inspect(ctx, key)
	})
	now := b.clock.Now()
	qe = &QuorumError{Op: op, Key: key, Nodes: len(b.nodes), Quorum: b.quorum}
	pttls := map[string][]time.Duration{}
	records := map[string][]redisnode.Record{}
	placed := map[string][]redisnode.Place{}
	for i, err := range errs {
		if err != nil {
			qe.Failed = append(qe.Failed, NodeError{Address: b.nodes[i].Addr(), Err: err})
			continue
		}
		qe.Agreed++
		h := holdings[i]
		if h.Holder != "" {
			pttls[h.Holder] = append(pttls[h.Holder], h.PTTL)
			if h.HasRecord {
				records[h.Holder] = append(records[h.Holder], h.Record)
			}
		}
		for _, p := range h.Places {
			placed[p.Identity] = append(placed[p.Identity], p)
		}
	}
	failed := len(qe.Failed)

	holder, votes := strongest(pttls)
	if len(votes) >= b.quorum {
		l := backends.Lease{Key: key, Identity: holder, ExpireTime: quorumExpiry(now, votes, b.quorum)}
		if recs := records[holder]; len(recs) > 0 {
			r := mostCommon(recs)
			l.AcquireTime, l.Version = r.AcquireTime, r.HoldID
		}
		return []backends.Lease{l}, false, qe
	}
	undecided = len(votes)+failed >= b.quorum
	for identity, ps := range placed {
		var limits []int
		var left []time.Duration
		var recs []redisnode.Record
		for _, p := range ps {
			limits = append(limits, p.Places)
			left = append(left, p.PTTL)
			if p.HasRecord {
				recs = append(recs, p.Record)
			}
		}
		quorum := placeQuorum(len(b.nodes), limits)
		if len(ps) < quorum {
			undecided = undecided || len(ps)+failed >= quorum
			continue
		}
		l := backends.Lease{Key: key, Identity: identity, ExpireTime: quorumExpiry(now, left, quorum), Shared: true}
		if len(recs) > 0 {
			r := mostCommon(recs)
			l.AcquireTime, l.Version = r.AcquireTime, r.HoldID
		}
		holds = append(holds, l)
	}
	slices.SortFunc(holds, func(a, b backends.Lease) int { return strings.Compare(a.Identity, b.Identity) })
	if holds == nil {
		holds = []backends.Lease{}
	}
	return holds, undecided, qe
}
