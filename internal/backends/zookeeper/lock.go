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
	"slices"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockwarden/lockwarden/internal/backends"
)

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
	var guard int32
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
