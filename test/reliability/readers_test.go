//go:build reliability

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

package reliability

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"

	sqlbackend "github.com/lockwarden/lockwarden/internal/backends/sql"
	"github.com/lockwarden/lockwarden/internal/backends/zookeeper"
)

// listTimeout bounds one listing of a backend's keys (held), as etcdReader's does.
const listTimeout = 5 * time.Second

// zkReader reads the zookeeper backend's nodes (package zookeeper): key's guard node is
// zookeeper.DefaultRoot + "/" + url.PathEscape(key) ("." and ".." as %2E and %2E%2E). An
// exclusive hold is its EPHEMERAL child zookeeper.LockNodeName, which lives only as long as the
// holder's session; shared places are EPHEMERAL children of its child zkPlacesNode, one per place.
// A lock or place node's data is a JSON record {"holder", "acquireTime", "expireTime",
// "ttlMillis"}: the node is held by record.holder until its mtime plus the TTL by the server's
// clock (the record's TTL is enforced by its readers, not by ZooKeeper); data that is no such
// record is held by the raw data, with no expiry, as the backend's Inspect reports it
// (zkNodeHolder).
type zkReader struct{ conn *zk.Conn }

// zkGuardPath is key's guard node, as the backend names it.
func zkGuardPath(key string) string {
	name := url.PathEscape(key)
	switch name { // ZooKeeper refuses the path components "." and ".."
	case ".":
		name = "%2E"
	case "..":
		name = "%2E%2E"
	}
	return zookeeper.DefaultRoot + "/" + name
}

// zkCall runs one request of the client library, which takes no context, bounded by ctx; on
// timeout the request is abandoned and finishes in the background.
func zkCall[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (r zkReader) read(ctx context.Context, key string) BackendView {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	guard := zkGuardPath(key)
	exclusive, ok := r.holderOf(ctx, guard+"/"+zookeeper.LockNodeName)
	if !ok {
		return BackendView{}
	}
	// The places are read after the lock node, not at the same moment; a state is dated at the
	// start of its read, and a place taken after the lock node went shows up beside it only for
	// holds that began after that start (KeyState.Polled).
	names, err := zkCall(ctx, func() ([]string, error) {
		names, _, err := r.conn.Children(guard + "/" + zkPlacesNode)
		return names, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		return BackendView{}
	}
	var places []string
	for _, name := range names {
		holder, ok := r.holderOf(ctx, guard+"/"+zkPlacesNode+"/"+name)
		if !ok {
			return BackendView{}
		}
		if holder != "" {
			places = append(places, holder)
		}
	}
	return placesView(exclusive, places)
}

// holderOf reads a lock or place node: its holder while it holds, "" when it is gone or its
// record expired; ok is false when the server did not answer.
func (r zkReader) holderOf(ctx context.Context, path string) (holder string, ok bool) {
	var stat *zk.Stat
	data, err := zkCall(ctx, func() ([]byte, error) {
		data, st, err := r.conn.Get(path)
		stat = st
		return data, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return "", true
	case err != nil || stat == nil:
		return "", false
	}
	// The server runs on this machine, so its clock is ours.
	holder, validUntil, forever := zkNodeHolder(data, stat.Mtime)
	if !forever && !validUntil.After(time.Now()) {
		return "", true
	}
	return holder, true
}

// held lists Root's children (one guard per key, named by the escaped key), decodes their names
// and reads the keys under prefix. Ping's probe nodes (zookeeper.PingNodePrefix, never a guard's
// name, since ';' is always escaped) are skipped.
func (r zkReader) held(ctx context.Context, prefix string) ([]BackendKey, error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	names, err := zkCall(lctx, func() ([]string, error) {
		names, _, err := r.conn.Children(zookeeper.DefaultRoot)
		return names, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil // no lock was ever taken
	case err != nil:
		return nil, err
	}
	var keys []string
	for _, name := range names {
		if strings.HasPrefix(name, zookeeper.PingNodePrefix) {
			continue
		}
		if key, err := url.PathUnescape(name); err == nil && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	return readHeld(ctx, r, "zookeeper", keys)
}

// readHeld reads keys through r and returns their holds (heldKeys: the exclusive one, or each
// place). A key r cannot read fails the listing: a partial answer would let the orphan check pass
// on what it never saw.
func readHeld(ctx context.Context, r backendReader, backend string, keys []string) ([]BackendKey, error) {
	var out []BackendKey
	for _, k := range keys {
		v := r.read(ctx, k)
		if !v.Known {
			return nil, fmt.Errorf("%s: reading %q: no answer", backend, k)
		}
		out = append(out, heldKeys(k, v)...)
	}
	return out, nil
}

// sqlReader reads the SQL backend's tables (package sqlbackend): one row per key held
// exclusively in table (lock_key, holder, session_id, ttl_us, expires_at, ...), one row per place
// of a key held in shared places in table + sqlPlacesTableSuffix (the same columns, primary key
// (lock_key, holder)), and one row per controller session in table + "_sessions" (session_id,
// renewed_at). A lock or place row is held by its holder while GREATEST(expires_at, its session's
// renewed_at + ttl_us) is after the database's clock (now() on PostgreSQL, UTC_TIMESTAMP(6) on
// MySQL/MariaDB, whose DATETIMEs are UTC); a missing session row counts as never renewed. The
// row a shared key keeps in the lock table as its marker names no holder and has expired since
// 1970, so it holds nothing. The rule is evaluated in SQL, by the database's clock, as the
// backend's statements do, and each read is one statement, so one snapshot of both tables.
type sqlReader struct {
	db *sql.DB
	// dialect is sqlbackend.DriverPostgres or sqlbackend.DriverMySQL (LockBackend spec.sql.driver).
	dialect string
	// table is the lock table (spec.sql.table); empty means sqlbackend.DefaultTable.
	table string
}

// liveFrom is the FROM of the rows l of table (the lock table or its places table) joined with
// their session rows s, and the condition that the row lives.
func (r sqlReader) liveFrom(table string) (from, live string) {
	from = " FROM " + table + " AS l LEFT JOIN " + r.lockTable() + "_sessions AS s ON s.session_id = l.session_id"
	if r.dialect == sqlbackend.DriverMySQL {
		// GREATEST is NULL if an argument is: a missing session row leaves expires_at.
		return from, "GREATEST(l.expires_at, COALESCE(s.renewed_at + INTERVAL l.ttl_us MICROSECOND, l.expires_at)) > UTC_TIMESTAMP(6)"
	}
	// PostgreSQL's GREATEST ignores NULLs.
	return from, "GREATEST(l.expires_at, s.renewed_at + l.ttl_us * interval '1 microsecond') > now()"
}

func (r sqlReader) lockTable() string {
	if r.table == "" {
		return sqlbackend.DefaultTable
	}
	return r.table
}

// liveRows selects, in one statement, the live rows of the lock table and of the places table
// whose lock_key satisfies cond (cond holds the parameter as "$p", replaced by the dialect's
// placeholder of the first and the second table's), with arg for both.
func (r sqlReader) liveRows(ctx context.Context, cond string, arg string) ([]sqlHoldRow, error) {
	p1, p2 := "$1", "$2"
	if r.dialect == sqlbackend.DriverMySQL {
		p1, p2 = "?", "?"
	}
	lockFrom, lockLive := r.liveFrom(r.lockTable())
	placeFrom, placeLive := r.liveFrom(r.lockTable() + sqlPlacesTableSuffix)
	q := "SELECT l.lock_key, l.holder, FALSE" + lockFrom + " WHERE " + strings.ReplaceAll(cond, "$p", p1) + " AND " + lockLive +
		" UNION ALL SELECT l.lock_key, l.holder, TRUE" + placeFrom + " WHERE " + strings.ReplaceAll(cond, "$p", p2) + " AND " + placeLive
	rows, err := r.db.QueryContext(ctx, q, arg, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqlHoldRow
	for rows.Next() {
		var h sqlHoldRow
		if err := rows.Scan(&h.key, &h.holder, &h.shared); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func (r sqlReader) read(ctx context.Context, key string) BackendView {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	rows, err := r.liveRows(ctx, "l.lock_key = $p", key)
	if err != nil {
		return BackendView{}
	}
	return sqlView(rows) // no live row: free
}

// held selects the live rows whose key starts with prefix (LIKE, with '!' escaping the pattern's
// special characters, which both dialects accept as written): one hold per row.
func (r sqlReader) held(ctx context.Context, prefix string) ([]BackendKey, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	pattern := strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(prefix) + "%"
	rows, err := r.liveRows(ctx, "l.lock_key LIKE $p ESCAPE '!'", pattern)
	if err != nil {
		return nil, err
	}
	var out []BackendKey
	for _, h := range rows {
		if h.holder != "" {
			out = append(out, BackendKey{Key: h.key, Holder: h.holder})
		}
	}
	return out, nil
}

// redlockReader reads the redlock backend's N independent Redis nodes (package redlock): each
// node keeps a key as the redis backend does (a string valued with its exclusive holder, or a
// sorted set of places beside a hash of place records; the hold record "lockwarden-hold:" + key
// decides nothing), each read in one MULTI (readRedisNode), and redlockView decides over the
// nodes: held exclusively by the identity that holds it on a majority, N/2+1, of the nodes, and
// in places by each identity whose place is on its shared quorum of them, as the backend does.
type redlockReader struct{ nodes []*goredis.Client }

// redlockRecordPrefix starts the hold records' keys (redisnode.RecordKeyPrefix).
const redlockRecordPrefix = "lockwarden-hold:"

// redisGlobEscaper quotes the characters that KEYS patterns treat specially.
var redisGlobEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

func (r redlockReader) quorum() int { return len(r.nodes)/2 + 1 }

func (r redlockReader) read(ctx context.Context, key string) BackendView {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	holdings := make([]*nodeHolding, len(r.nodes))
	var wg sync.WaitGroup
	for i, c := range r.nodes {
		wg.Go(func() {
			if h, err := readRedisNode(ctx, c, key); err == nil {
				holdings[i] = &h
			}
		})
	}
	wg.Wait()
	return redlockView(len(r.nodes), holdings)
}

// held unions KEYS prefix* over the nodes and reads each key. A key held on a quorum is on at
// least one of any quorum of nodes, so the union is complete once a quorum answered.
func (r redlockReader) held(ctx context.Context, prefix string) ([]BackendKey, error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	lists := make([][]string, len(r.nodes))
	errs := make([]error, len(r.nodes))
	var wg sync.WaitGroup
	for i, c := range r.nodes {
		wg.Go(func() { lists[i], errs[i] = c.Keys(lctx, redisGlobEscaper.Replace(prefix)+"*").Result() })
	}
	wg.Wait()
	answered := 0
	seen := map[string]bool{}
	var keys []string
	for i, list := range lists {
		if errs[i] != nil {
			continue
		}
		answered++
		for _, k := range list {
			if !seen[k] && !strings.HasPrefix(k, redlockRecordPrefix) {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	if answered < r.quorum() {
		return nil, fmt.Errorf("redlock: only %d of %d nodes listed their keys: %w", answered, len(r.nodes), errors.Join(errs...))
	}
	return readHeld(ctx, r, "redlock", keys)
}
