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

// Shared places (backends.Sharer).
//
// Each place of a lock key is its own etcd key, placePrefix(key) + identity, whose value is when
// the place was taken and which sits on the session's etcd lease for the place's TTL, exactly as
// an exclusive lock key does: renewal, expiry and the per-TTL leases work the same for both.
// The exclusive hold is still the lock key itself, untouched, so that outside clients taking the
// key by create revision are excluded by lockwarden's exclusive holds as before.
//
// Why the prefixes of two lock keys never overlap: placePrefix(key) is PlaceKeyPrefix, the
// length of key in decimal, ":", key, "/". Reading a place key from the left, the length ends at
// the first ":" after PlaceKeyPrefix (digits contain none), and the lock key is the next that
// many bytes, whatever they are ("/" and ":" included). So one place key belongs to exactly one
// lock key, and the range of one key's places never holds another key's places. Place keys start
// with PlaceKeyPrefix, which neither Namespaced lock keys (lockwarden/...) nor hold records nor
// probe keys start with; a Verbatim lock key written to start with it is not supported.
//
// Why it is atomic: etcd applies a transaction's compares and writes at one revision.
//   - An exclusive acquire (TryAcquire) also compares that no key exists in the place range
//     (CreateRevision = 0 over a range holds only when the range is empty: etcd's applyCompare
//     compares an empty range as one key with revisions 0, a non-empty one key by key, and every
//     existing key has a create revision above 0).
//   - A shared acquire compares that the lock key does not exist, and that no place key was
//     created or re-put after the revision at which it counted the places (ModRevision < rev + 1
//     over the range; true of an empty range too). Places freed since only make the count an
//     overestimate, which may refuse a newcomer that a later call admits, never admit one too
//     many. When the compare fails, the same transaction reads the key and its places afresh,
//     and the acquire decides again from that read, a bounded number of times (sharedAttempts).
//
// Expired places are pruned by etcd: it deletes the keys of a lease when the lease expires by the
// leader's clock, within a second as a rule (its lessor looks for expired leases twice a second).
// Until then they still count against the limit, as an expired exclusive key still excludes:
// only etcd's clock says when a lease of another session has ended.

package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// PlaceKeyPrefix starts the key of every shared place (see placePrefix).
const PlaceKeyPrefix = "lockwarden-places:"

// sharedAttempts bounds the transactions of one TryAcquireShared. Each failed attempt means
// another session wrote one of the key's places in between; past this many the key is too
// contended to decide in one call, and the caller retries later as after any ErrLocked.
const sharedAttempts = 8

var _ backends.Sharer = (*Backend)(nil)

// placePrefix starts the key of each place of key; it is never a prefix of another key's places
// (see the file comment).
func placePrefix(key string) string {
	return PlaceKeyPrefix + strconv.Itoa(len(key)) + ":" + key + "/"
}

// placeKey is the key of identity's place of key.
func placeKey(key, identity string) string { return placePrefix(key) + identity }

// step is what a shared acquire does next.
type step int

const (
	// stepTake puts a new place.
	stepTake step = iota
	// stepRefresh re-puts the identity's place on the session's lease.
	stepRefresh
	// stepLocked gives up with ErrLocked.
	stepLocked
)

// sharedStep decides a shared acquire from what it last read of a key: whether the key is held
// exclusively, and the identities holding places, in key order. The index is the identity's own
// place for stepRefresh, and the holder to name for stepLocked (-1: the exclusive holder).
func sharedStep(exclusive bool, holders []string, identity string, places int) (step, int) {
	if exclusive {
		return stepLocked, -1
	}
	for i, h := range holders {
		if h == identity {
			return stepRefresh, i // kept whatever the limit is now: a lower limit never evicts
		}
	}
	if len(holders) >= places {
		return stepLocked, 0
	}
	return stepTake, -1
}

// keyView is what one transaction read of a lock key, at revision rev.
type keyView struct {
	rev       int64
	exclusive *mvccpb.KeyValue
	places    []*mvccpb.KeyValue
}

// readView reads a view from the responses of OpGet(key) and OpGet(placePrefix(key),
// WithPrefix()), in that order.
func readView(rev int64, resps []*pb.ResponseOp) keyView {
	v := keyView{rev: rev, places: resps[1].GetResponseRange().GetKvs()}
	if kvs := resps[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
		v.exclusive = kvs[0]
	}
	return v
}

// holders returns the identities of the view's places.
func (v keyView) holders(prefix string) []string {
	ids := make([]string, len(v.places))
	for i, kv := range v.places {
		ids[i] = strings.TrimPrefix(string(kv.Key), prefix)
	}
	return ids
}

// readOps are the reads of a keyView.
func readOps(key string) []clientv3.Op {
	return []clientv3.Op{clientv3.OpGet(key), clientv3.OpGet(placePrefix(key), clientv3.WithPrefix())}
}

// TryAcquireShared takes one of key's places for identity, or refreshes the place identity
// holds, moving it onto this session's lease for ttl. A free key costs one transaction (plus the
// lease's refresh, as for TryAcquire); a key with places one more, which reads them; each
// transaction that loses a race for the places reads them again, up to sharedAttempts. The error
// when the key is held exclusively or every place is taken is a *backends.LockedError naming the
// exclusive holder or the place holder first in key order, with its expiry (one more round trip
// when it is on another session's lease).
func (b *Backend) TryAcquireShared(ctx context.Context, key, identity string, ttl time.Duration, places int) (backends.Lease, error) {
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	if places < 1 {
		return backends.Lease{}, fmt.Errorf("etcd backend: places must be at least 1, got %d", places)
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
	prefix, pk := placePrefix(key), placeKey(key, identity)
	notExclusive := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	// Nothing read yet: the first attempt bets on a free key, which its compare of the places
	// at revision 0 (no key in the range) checks.
	var view keyView
	for range sharedAttempts {
		s, i := sharedStep(view.exclusive != nil, view.holders(prefix), identity, places)
		var cmps []clientv3.Cmp
		var put clientv3.Op
		switch s {
		case stepLocked:
			return backends.Lease{}, b.sharedLocked(ctx, c, key, view, i)
		case stepRefresh:
			cmps = []clientv3.Cmp{notExclusive, clientv3.Compare(clientv3.CreateRevision(pk), "=", view.places[i].CreateRevision)}
			put = clientv3.OpPut(pk, "", clientv3.WithLease(lease), clientv3.WithIgnoreValue())
		case stepTake:
			cmps = []clientv3.Cmp{notExclusive, clientv3.Compare(clientv3.ModRevision(prefix), "<", view.rev+1).WithPrefix()}
			put = clientv3.OpPut(pk, start.UTC().Format(time.RFC3339Nano), clientv3.WithLease(lease))
		}
		resp, err := b.txn(ctx, c, "acquiring a place of "+strconv.Quote(key), lease, cmps,
			[]clientv3.Op{put, clientv3.OpGet(pk)}, readOps(key))
		if err != nil {
			return backends.Lease{}, err
		}
		if !resp.Succeeded {
			view = readView(resp.Header.Revision, resp.Responses)
			continue
		}
		l := backends.Lease{Key: key, Identity: identity, TTL: ttl, AcquireTime: start, ExpireTime: start.Add(ttl), Shared: true}
		if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) == 1 {
			l.Version = strconv.FormatInt(kvs[0].CreateRevision, 10)
			if t, ok := parseHold(kvs[0].Value); ok {
				l.AcquireTime = t
			}
		}
		return l, nil
	}
	return backends.Lease{}, b.sharedLocked(ctx, c, key, view, 0)
}

// sharedLocked says who holds key in view: place i, or with i < 0 the exclusive holder, or the
// first place when there is none.
func (b *Backend) sharedLocked(ctx context.Context, c *clientv3.Client, key string, view keyView, i int) error {
	locked := &backends.LockedError{Key: key}
	if i < 0 && view.exclusive == nil {
		i = 0
	}
	var kv *mvccpb.KeyValue
	switch {
	case i < 0:
		kv = view.exclusive
		locked.Holder = string(kv.Value)
	case i < len(view.places):
		kv = view.places[i]
		locked.Holder = strings.TrimPrefix(string(kv.Key), placePrefix(key))
	}
	if kv != nil {
		locked.ExpireTime = b.leaseExpiry(ctx, c, clientv3.LeaseID(kv.Lease))
	}
	return locked
}

// Holders lists who holds key, in one transaction that reads the key, its hold record and its
// places, plus one request per etcd lease of another session that they sit on (to tell when it
// expires). Keys whose etcd lease has expired, and that etcd is about to delete, are left out.
func (b *Backend) Holders(ctx context.Context, key string) ([]backends.Lease, error) {
	if key == "" {
		return nil, errors.New("etcd backend: key must not be empty")
	}
	c, err := b.conn()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	resp, err := b.txn(ctx, c, "listing the holders of "+strconv.Quote(key), 0, nil,
		append(readOps(key), clientv3.OpGet(HoldKeyPrefix+key)), nil)
	if err != nil {
		return nil, err
	}
	view := readView(resp.Header.Revision, resp.Responses)
	ttls := b.leaseTimes()
	holders := []backends.Lease{}
	if view.exclusive != nil {
		l, live, err := exclusiveLease(ctx, c, key, view.exclusive, resp.Responses[2].GetResponseRange().GetKvs(), ttls)
		switch {
		case err != nil:
			return nil, err
		case live:
			return append(holders, l), nil
		}
	}
	for _, kv := range view.places {
		l, live, err := placeLease(ctx, c, key, kv, ttls)
		if err != nil {
			return nil, err
		}
		if live {
			holders = append(holders, l)
		}
	}
	return holders, nil
}

// firstPlace reports the first of key's places (in key order) whose etcd lease is live.
func (b *Backend) firstPlace(ctx context.Context, c *clientv3.Client, key string, places []*mvccpb.KeyValue) (backends.Lease, bool, error) {
	ttls := b.leaseTimes()
	for _, kv := range places {
		l, live, err := placeLease(ctx, c, key, kv, ttls)
		if err != nil || live {
			return l, live, err
		}
	}
	return backends.Lease{}, false, nil
}

// placeLease reads a place key as a Lease; live is false when its etcd lease has expired.
func placeLease(ctx context.Context, c *clientv3.Client, key string, kv *mvccpb.KeyValue, ttls leaseTimes) (backends.Lease, bool, error) {
	l := backends.Lease{
		Key:      key,
		Identity: strings.TrimPrefix(string(kv.Key), placePrefix(key)),
		Version:  strconv.FormatInt(kv.CreateRevision, 10),
		Shared:   true,
	}
	if t, ok := parseHold(kv.Value); ok {
		l.AcquireTime = t
	}
	return withExpiry(ctx, c, l, clientv3.LeaseID(kv.Lease), ttls)
}

// exclusiveLease reads a lock key and its hold record (hold, empty when there is none) as a
// Lease; live is false when its etcd lease has expired.
func exclusiveLease(ctx context.Context, c *clientv3.Client, key string, kv *mvccpb.KeyValue, hold []*mvccpb.KeyValue, ttls leaseTimes) (backends.Lease, bool, error) {
	l := backends.Lease{Key: key, Identity: string(kv.Value), Version: strconv.FormatInt(kv.CreateRevision, 10)}
	if len(hold) == 1 {
		if t, ok := parseHold(hold[0].Value); ok {
			l.AcquireTime = t
		}
	}
	return withExpiry(ctx, c, l, clientv3.LeaseID(kv.Lease), ttls)
}

// withExpiry sets l's ExpireTime and TTL from etcd lease id. A key without a lease (written by
// hand or by another client) never expires: zero ExpireTime, live.
func withExpiry(ctx context.Context, c *clientv3.Client, l backends.Lease, id clientv3.LeaseID, ttls leaseTimes) (backends.Lease, bool, error) {
	if id == 0 {
		return l, true, nil
	}
	exp, granted, err := ttls(ctx, c, id)
	if err != nil {
		return backends.Lease{}, false, err
	}
	if exp.IsZero() {
		return backends.Lease{}, false, nil
	}
	l.ExpireTime, l.TTL = exp, granted
	return l, true, nil
}

// leaseTimes is Backend.timeToLive, remembering its answers for one call so that places on one
// etcd lease cost one request.
type leaseTimes func(ctx context.Context, c *clientv3.Client, id clientv3.LeaseID) (time.Time, time.Duration, error)

func (b *Backend) leaseTimes() leaseTimes {
	type answer struct {
		exp time.Time
		ttl time.Duration
	}
	seen := map[clientv3.LeaseID]answer{}
	return func(ctx context.Context, c *clientv3.Client, id clientv3.LeaseID) (time.Time, time.Duration, error) {
		if a, ok := seen[id]; ok {
			return a.exp, a.ttl, nil
		}
		exp, ttl, err := b.timeToLive(ctx, c, id)
		if err == nil {
			seen[id] = answer{exp, ttl}
		}
		return exp, ttl, err
	}
}
