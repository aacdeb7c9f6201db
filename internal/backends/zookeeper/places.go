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

// Shared places (backends.Sharer).
//
// # Nodes
//
// A key held in places has no lock node. Its guard holds instead a CONTAINER node,
// PlacesNodeName, and every place is an EPHEMERAL child of that node, owned by the session that
// took the place (or last moved it, when a restarted controller resumes it):
//
//	<Root>/<escaped key>                             guard, as for an exclusive hold
//	<Root>/<escaped key>/lock                        the exclusive hold, unchanged (absent here)
//	<Root>/<escaped key>/places                      container of the places
//	<Root>/<escaped key>/places/<escaped id>;<rand>  one place, data: the same record as a lock's
//
// A place's name is its identity escaped as keys are (url.PathEscape, which escapes '/', ';',
// control characters and every non-ASCII byte, none of which a node name may hold as written),
// then ';' and 16 random hex digits. The random part means that a place node's path is never used
// twice: a version the session cached names the very node it wrote, and not a later node that
// reached the same version at the same path (the reason lock nodes need their guard). So Renew
// extends a place with one versioned SetData and no guard check, and a place taken by another
// identity, which bumps the guard, does not invalidate the cached versions of the other places.
//
// A place lives while its session lives and its record has not expired (the node's mtime plus
// the record's TTL, by the ensemble's clock: serverclock.go), exactly as a lock node.
//
// # Why it is atomic
//
// Each side checks and writes in one Multi, so no interleaving of two sessions can break the
// rules; a Multi that fails on a version or on a node's presence is read again and retried.
//
//   - Places against places. A Multi that adds a place sets the guard's data at the version read
//     before the places were counted. Two acquirers that both counted places-1 live places read
//     the same version, so only one of them commits; the other reads again and counts the place
//     that was taken.
//   - Places against an exclusive hold. The same Multi deletes an expired lock node by the
//     version read or, when there was none, creates the lock node and deletes it again: that
//     Create fails if a lock node exists by then, whoever made it (a client outside lockwarden
//     does not touch the guard). No place is ever added beside a lock node.
//   - An exclusive hold against places. Every Multi that creates the lock node (put) either
//     creates and deletes the places node, which fails if it exists, or deletes each expired
//     place by the version read and then the places node itself, which ZooKeeper refuses while it
//     has a child. No lock node is ever created beside a place.
//
// A writer that finds a place expired deletes it, by the version it read, in the Multi that
// relies on its being expired: a holder that renewed it in the meantime makes that Multi fail,
// so an expired place is never counted free and then revived.
//
// # Costs
//
// TryAcquireShared reads the guard (its version and children: one request), the places node's
// children (one) and each place (one each, sent concurrently), then writes one Multi; the first
// place of a key costs one more request to create the places node. The holder taking its place
// again from the session that wrote it is one versioned SetData. Renew extends places in the
// same Multi as lock nodes, one op per place: a batch of places and locks costs one round trip
// per 100 leases. Release lists the places node and deletes the identity's node: two requests.
// The places node outlives the last place until ZooKeeper reaps the empty container (within a
// minute by default) or an exclusive acquire deletes it; until then an exclusive acquire of the
// key reads it first (two requests more than on a free key).

import (
	"cmp"
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
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockwarden/lockwarden/internal/backends"
)

var _ backends.Sharer = (*Backend)(nil)

// place is a place node as read.
type place struct {
	// node is the node's record and Stat, read as a lock node's. rec.Holder is the identity.
	node
	// name is the node's name under the places node.
	name string
}

// placeID names a place in the session's cache.
type placeID struct{ key, identity string }

// placeWritten is what the session last wrote to a place node.
type placeWritten struct {
	path string
	written
}

// hold names a hold in a Renew batch: a key's exclusive hold (whoever the lease names), or one
// identity's place.
type hold struct {
	shared        bool
	key, identity string
}

// holdID is the hold l asks to renew.
func holdID(l backends.Lease) hold {
	if l.Shared {
		return hold{shared: true, key: l.Key, identity: l.Identity}
	}
	return hold{key: l.Key}
}

// placesPath is key's places node, the parent of its places.
func (b *Backend) placesPath(key string) string { return b.guardPath(key) + "/" + PlacesNodeName }

// placeName is the name of a place node of identity, made unique by suffix.
func placeName(identity, suffix string) string { return url.PathEscape(identity) + ";" + suffix }

// placeIdentity is the identity a place node's name was made from; ok is false for a name that
// placeName did not make.
func placeIdentity(name string) (identity string, ok bool) {
	escaped, _, found := strings.Cut(name, ";")
	if !found || escaped == "" {
		return "", false
	}
	identity, err := url.PathUnescape(escaped)
	return identity, err == nil
}

// newSuffix is the random part of a new place node's name.
func newSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// splitPlaces sorts places, in their order, into those that hold at serverNow, the ensemble's
// time, and those whose record expired. A place whose data is not our record never expires.
func splitPlaces(places []place, serverNow time.Time) (live, expired []place) {
	for _, p := range places {
		if p.expired(serverNow) {
			expired = append(expired, p)
		} else {
			live = append(live, p)
		}
	}
	return live, expired
}

// sharedPlan is what TryAcquireShared does with a key as read.
type sharedPlan struct {
	// blocker, when set, is the hold that refuses the place: the lock node, or the first live
	// place of another identity when places are all taken.
	blocker *node
	// own is identity's live place, which is refreshed (keeping its AcquireTime) and counts
	// whatever the limit is now; nil when a new place is taken.
	own *place
	// prune are the places to delete, by version, in the Multi that takes or moves the place:
	// the expired ones, whoever held them, and any second node of identity. A refresh of own
	// leaves them: it counts nothing.
	prune []place
}

// planShared decides how identity takes one of limit places of a key whose lock node is lock and
// whose places are places, at serverNow by the ensemble's clock.
func planShared(lock node, places []place, identity string, limit int, serverNow time.Time) sharedPlan {
	if lock.exists && !lock.expired(serverNow) {
		return sharedPlan{blocker: &lock}
	}
	var plan sharedPlan
	live, expired := splitPlaces(places, serverNow)
	plan.prune = expired
	var others []place
	for _, p := range live {
		switch {
		case p.rec.Holder != identity || p.foreign:
			others = append(others, p)
		case plan.own == nil:
			plan.own = &p
		default:
			plan.prune = append(plan.prune, p)
		}
	}
	if plan.own == nil && len(others) >= limit {
		return sharedPlan{blocker: &others[0].node}
	}
	return plan
}

// lockedBy is the error for a key that n holds, its expiry told on the caller's clock.
func (b *Backend) lockedBy(key string, n node, serverNow time.Time) error {
	locked := &backends.LockedError{Key: key, Holder: n.rec.Holder}
	if !n.foreign {
		locked.ExpireTime = localExpiry(n.expiry(), serverNow, b.clock.Now())
	}
	return locked
}

// noPlacesOps are the ops that make a Multi creating key's lock node fail while the key has a
// place. With no places node read (exists false), they create the places node and delete it
// again, which fails if one exists by then. With one read, they delete each expired place by the
// version read and then the places node, which fails if any place is left or was added.
func (b *Backend) noPlacesOps(key string, exists bool, expired []place) []any {
	path := b.placesPath(key)
	if !exists {
		return []any{&zk.CreateRequest{Path: path, Acl: b.acl}, &zk.DeleteRequest{Path: path, Version: -1}}
	}
	ops := make([]any, 0, len(expired)+1)
	for _, p := range expired {
		ops = append(ops, &zk.DeleteRequest{Path: path + "/" + p.name, Version: p.stat.Version})
	}
	return append(ops, &zk.DeleteRequest{Path: path, Version: -1})
}

// readPlaces lists key's places node and reads its places, all of them or, when only is set,
// only's: one request, and one per place read, sent concurrently. exists is false when there is
// no places node. Places come sorted by identity, so that the place reported for a key is the
// same from one call to the next.
func (b *Backend) readPlaces(ctx context.Context, c *zk.Conn, key, only string) (places []place, exists bool, err error) {
	path := b.placesPath(key)
	var names []string
	err = b.call(ctx, c, "listing the places of lock "+strconv.Quote(key), true, func() error {
		var err error
		names, _, err = c.Children(path)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	if only != "" {
		names = slices.DeleteFunc(names, func(name string) bool {
			id, ok := placeIdentity(name)
			return !ok || id != only
		})
	}
	read := make([]place, len(names))
	found := make([]bool, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			var data []byte
			var stat *zk.Stat
			err := b.call(ctx, c, "reading a place of lock "+strconv.Quote(key), true, func() error {
				var err error
				data, stat, err = c.Get(path + "/" + name)
				return err
			})
			switch {
			case errors.Is(err, zk.ErrNoNode): // released since it was listed
			case err != nil:
				errs[i] = err
			default:
				read[i], found[i] = parsePlace(name, data, stat), true
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	for i, p := range read {
		if found[i] {
			places = append(places, p)
		}
	}
	slices.SortFunc(places, func(a, b place) int {
		return cmp.Or(strings.Compare(a.rec.Holder, b.rec.Holder), strings.Compare(a.name, b.name))
	})
	return places, true, nil
}

// parsePlace makes a place of a node read under the places node. Its identity is the one its
// name was made from, whatever the data says; data that is not our record makes a foreign place,
// which never expires.
func parsePlace(name string, data []byte, stat *zk.Stat) place {
	p := place{node: node{stat: stat, exists: true, guard: -1}, name: name}
	if err := json.Unmarshal(data, &p.rec); err != nil || p.rec.Holder == "" {
		p.rec, p.foreign = record{}, true
	}
	if id, ok := placeIdentity(name); ok {
		p.rec.Holder = id
	} else {
		p.rec.Holder, p.foreign = name, true
	}
	return p
}

// TryAcquireShared takes one of key's places for identity: two reads, one per place held, and
// one Multi (see the file comment).
func (b *Backend) TryAcquireShared(ctx context.Context, key, identity string, ttl time.Duration, places int) (backends.Lease, error) {
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	if places < 1 {
		return backends.Lease{}, fmt.Errorf("zookeeper backend: places must be at least 1, got %d", places)
	}
	c, err := b.session(ctx)
	if err != nil {
		return backends.Lease{}, err
	}
	if err := b.ensureRoot(ctx, c, false); err != nil {
		return backends.Lease{}, err
	}
	op := "taking a place of " + strconv.Quote(key)
	for range attempts {
		n, err := b.get(ctx, c, key, b.nodePath(key), true)
		if err != nil {
			return backends.Lease{}, err
		}
		if n.guard < 0 {
			if err := b.ensureGuard(ctx, c, key); err != nil {
				return backends.Lease{}, err
			}
			continue
		}
		var held []place
		if n.places {
			if held, n.places, err = b.readPlaces(ctx, c, key, ""); err != nil {
				return backends.Lease{}, err
			}
		}
		var serverNow time.Time
		if (n.exists && !n.foreign) || len(held) > 0 {
			if serverNow, err = b.serverTime(ctx, c); err != nil {
				return backends.Lease{}, err
			}
		}
		plan := planShared(n, held, identity, places, serverNow)
		if plan.blocker != nil {
			return backends.Lease{}, b.lockedBy(key, *plan.blocker, serverNow)
		}
		if !n.places {
			created, err := b.ensurePlaces(ctx, c, key)
			if err != nil {
				return backends.Lease{}, err
			}
			if !created {
				continue // someone else made it, and maybe took a place: read again
			}
		}
		lease, err := b.takePlace(ctx, c, op, key, identity, ttl, n, plan)
		if !errors.Is(err, errRace) {
			return lease, err
		}
	}
	return backends.Lease{}, b.wrap(op, fmt.Errorf("%w %d times; try again", errRace, attempts))
}

// ensurePlaces creates key's places node, a container (ZooKeeper deletes it some time after its
// last place is gone). created is false when it was there already, or the guard was not.
func (b *Backend) ensurePlaces(ctx context.Context, c *zk.Conn, key string) (created bool, err error) {
	err = b.call(ctx, c, "creating the places node of lock "+strconv.Quote(key), true, func() error {
		_, err := c.CreateContainer(b.placesPath(key), nil, zk.FlagContainer, b.acl)
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
		return false, nil
	}
	return false, err
}

// takePlace writes what plan says for identity's place of key, whose lock node and guard are as
// in lock: one Multi. errRace says that the key changed since it was read.
func (b *Backend) takePlace(ctx context.Context, c *zk.Conn, op, key, identity string, ttl time.Duration, lock node, plan sharedPlan) (backends.Lease, error) {
	now := b.clock.Now()
	rec := record{Holder: identity, AcquireTime: now, ExpireTime: now.Add(ttl), TTLMillis: ttl.Milliseconds()}
	session := c.SessionID()
	parent := b.placesPath(key)
	var path string
	var ops []any
	own := plan.own
	if own != nil {
		rec.AcquireTime = own.rec.AcquireTime // reentrancy or resumption
	}
	if own != nil && own.stat.EphemeralOwner == session && session != 0 {
		// The holder again, on the session that owns its place: nothing is counted and the
		// place lived all along, so no lock node can have been created beside it.
		path = parent + "/" + own.name
		ops = append(ops, &zk.SetDataRequest{Path: path, Data: encode(rec), Version: own.stat.Version})
	} else {
		path = parent + "/" + placeName(identity, newSuffix())
		data := encode(rec)
		ops = append(ops, &zk.SetDataRequest{Path: b.guardPath(key), Version: lock.guard})
		if lock.exists {
			ops = append(ops, &zk.DeleteRequest{Path: b.nodePath(key), Version: lock.stat.Version})
		} else {
			ops = append(ops, &zk.CreateRequest{Path: b.nodePath(key), Acl: b.acl, Flags: zk.FlagEphemeral},
				&zk.DeleteRequest{Path: b.nodePath(key), Version: -1})
		}
		for _, p := range plan.prune {
			ops = append(ops, &zk.DeleteRequest{Path: parent + "/" + p.name, Version: p.stat.Version})
		}
		if own != nil {
			ops = append(ops, &zk.DeleteRequest{Path: parent + "/" + own.name, Version: own.stat.Version})
		}
		ops = append(ops, &zk.CreateRequest{Path: path, Data: data, Acl: b.acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: path, Data: data, Version: 0})
	}
	res, err := b.multi(ctx, c, op, ops)
	at := time.Now()
	if err != nil {
		b.forgetPlace(key, identity)
		return backends.Lease{}, err
	}
	stat := res[len(res)-1].Stat
	if stat == nil {
		return backends.Lease{}, b.wrap(op, errors.New("the server returned no stat for the written node"))
	}
	b.server.observe(stat.Mtime, at)
	b.rememberPlace(key, path, rec, stat, session)
	return backends.Lease{Key: key, Identity: identity, TTL: ttl, AcquireTime: rec.AcquireTime, ExpireTime: rec.ExpireTime,
		Version: version(stat), Shared: true}, nil
}

// renewPlace extends l's place if its identity still holds it, as the hold l was given: it reads
// the identity's place, then sets its data by version or, when another session owns it, moves it
// to this one by deleting it by version and creating a new node, in one Multi. Moving needs no
// guard: the place lives on under another name, so the count of places does not change, and the
// delete by version fails if anyone acted on the place since it was read.
func (b *Backend) renewPlace(ctx context.Context, c *zk.Conn, l backends.Lease, now, serverNow time.Time, ttl time.Duration) (bool, error) {
	op := "renewing a place of " + strconv.Quote(l.Key)
	parent := b.placesPath(l.Key)
	for range attempts {
		held, _, err := b.readPlaces(ctx, c, l.Key, l.Identity)
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(held, func(p place) bool {
			return !p.foreign && !p.expired(serverNow) && (l.AcquireTime.IsZero() || p.rec.AcquireTime.Equal(l.AcquireTime))
		})
		if i < 0 {
			b.forgetPlace(l.Key, l.Identity)
			return false, nil
		}
		own := held[i]
		rec := record{Holder: l.Identity, AcquireTime: own.rec.AcquireTime, ExpireTime: now.Add(ttl), TTLMillis: ttl.Milliseconds()}
		data := encode(rec)
		path := parent + "/" + own.name
		var ops []any
		session := c.SessionID()
		if own.stat.EphemeralOwner == session && session != 0 {
			ops = append(ops, &zk.SetDataRequest{Path: path, Data: data, Version: own.stat.Version})
		} else {
			path = parent + "/" + placeName(l.Identity, newSuffix())
			ops = append(ops, &zk.DeleteRequest{Path: parent + "/" + own.name, Version: own.stat.Version},
				&zk.CreateRequest{Path: path, Data: data, Acl: b.acl, Flags: zk.FlagEphemeral},
				&zk.SetDataRequest{Path: path, Data: data, Version: 0})
		}
		res, err := b.multi(ctx, c, op, ops)
		at := time.Now()
		switch {
		case errors.Is(err, errRace):
			continue
		case err != nil:
			return false, err
		}
		if stat := res[len(res)-1].Stat; stat != nil {
			b.server.observe(stat.Mtime, at)
			b.rememberPlace(l.Key, path, rec, stat, session)
		}
		return true, nil
	}
	return false, b.wrap(op, fmt.Errorf("%w %d times", errRace, attempts))
}

// releasePlace deletes the place of lease.Identity, whatever its state: two requests. A place
// that is gone counts as released.
func (b *Backend) releasePlace(ctx context.Context, c *zk.Conn, lease backends.Lease) error {
	b.forgetPlace(lease.Key, lease.Identity)
	parent := b.placesPath(lease.Key)
	var names []string
	err := b.call(ctx, c, "listing the places of lock "+strconv.Quote(lease.Key), true, func() error {
		var err error
		names, _, err = c.Children(parent)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil
	case err != nil:
		return err
	}
	for _, name := range names {
		if id, ok := placeIdentity(name); !ok || id != lease.Identity {
			continue
		}
		err := b.call(ctx, c, "releasing a place of "+strconv.Quote(lease.Key), true, func() error {
			return c.Delete(parent+"/"+name, -1)
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return nil
}

// Holders lists key's live holds: the lock node's, and each place. It reads the guard, the lock
// node and the places (see readPlaces), plus a probe write when the session has not written for
// a minute (to read the ensemble's clock).
func (b *Backend) Holders(ctx context.Context, key string) ([]backends.Lease, error) {
	if key == "" {
		return nil, errors.New("zookeeper backend: key must not be empty")
	}
	c, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	n, err := b.get(ctx, c, key, b.nodePath(key), true)
	if err != nil {
		return nil, err
	}
	var held []place
	if n.places {
		if held, _, err = b.readPlaces(ctx, c, key, ""); err != nil {
			return nil, err
		}
	}
	var serverNow time.Time
	if (n.exists && !n.foreign) || len(held) > 0 {
		if serverNow, err = b.serverTime(ctx, c); err != nil {
			return nil, err
		}
	}
	localNow := b.clock.Now()
	holders := []backends.Lease{}
	if n.exists && !n.expired(serverNow) {
		holders = append(holders, n.lease(key, serverNow, localNow))
	}
	live, _ := splitPlaces(held, serverNow)
	for _, p := range live {
		holders = append(holders, p.lease(key, serverNow, localNow))
	}
	return holders, nil
}

// lease is the place's hold, its expiry told on the caller's clock (localNow) from serverNow.
func (p place) lease(key string, serverNow, localNow time.Time) backends.Lease {
	l := p.node.lease(key, serverNow, localNow)
	l.Shared = true
	return l
}

// inspectPlaces reports the first of key's live places, for Inspect.
func (b *Backend) inspectPlaces(ctx context.Context, c *zk.Conn, key string) (backends.Lease, error) {
	held, _, err := b.readPlaces(ctx, c, key, "")
	if err != nil {
		return backends.Lease{}, err
	}
	var serverNow time.Time
	if len(held) > 0 {
		if serverNow, err = b.serverTime(ctx, c); err != nil {
			return backends.Lease{}, err
		}
	}
	live, _ := splitPlaces(held, serverNow)
	if len(live) == 0 {
		return backends.Lease{}, fmt.Errorf("zookeeper backend: lock %q: %w", key, backends.ErrNotHeld)
	}
	return live[0].lease(key, serverNow, b.clock.Now()), nil
}

// rememberPlace caches what the session wrote to the place of rec.Holder at path.
func (b *Backend) rememberPlace(key, path string, rec record, stat *zk.Stat, session int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.placesWritten[placeID{key: key, identity: rec.Holder}] = placeWritten{path: path,
		written: written{rec: rec, version: stat.Version, czxid: stat.Czxid, mtime: stat.Mtime, session: session, guard: -1}}
}

// forgetPlace drops identity's place of key from the cache.
func (b *Backend) forgetPlace(key, identity string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.placesWritten, placeID{key: key, identity: identity})
}
