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

package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockwarden/lockwarden/internal/backends"
)

const (
	// renewChunk is how many SetData ops one renewal Multi carries.
	renewChunk = 100
)

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
