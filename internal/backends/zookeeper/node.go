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
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockwarden/lockwarden/internal/backends"
)

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

// record is a lock node's data. AcquireTime and ExpireTime are by the writer's clock and
// informational; the record expires at the node's mtime plus TTLMillis, by the ensemble's clock.
type record struct {
	Holder      string    `json:"holder"`
	AcquireTime time.Time `json:"acquireTime"`
	ExpireTime  time.Time `json:"expireTime"`
	TTLMillis   int64     `json:"ttlMillis"`
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
