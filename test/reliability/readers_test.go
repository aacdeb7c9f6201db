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
	"encoding/json"
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
// zookeeper.DefaultRoot + "/" + url.PathEscape(key) ("." and ".." as %2E and %2E%2E), and the lock
// is its EPHEMERAL child zookeeper.LockNodeName, which lives only as long as the holder's session.
// Its data is a JSON record {"holder", "acquireTime", "expireTime", "ttlMillis"}: a lock node is
// held by record.holder while record.expireTime is after now (the record's TTL is enforced by its
// readers, not by ZooKeeper); data that is no such record is held by the raw data, with no expiry,
// as the backend's Inspect reports it.
type zkReader struct{ conn *zk.Conn }

// zkRecord is the part of a lock node's record the reader needs.
type zkRecord struct {
	Holder    string `json:"holder"`
	TTLMillis int64  `json:"ttlMillis"`
}

// zkValidUntil is when a lock node's record stops holding its lock: the node's mtime plus its TTL,
// by the ZooKeeper server's clock (the backend's rule; the record's ExpireTime is the writer's
// clock and informational). The server runs on this machine, so its clock is ours.
func zkValidUntil(rec zkRecord, stat *zk.Stat) time.Time {
	return time.UnixMilli(stat.Mtime).Add(time.Duration(max(rec.TTLMillis, 0)) * time.Millisecond)
}

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
	var stat *zk.Stat
	data, err := zkCall(ctx, func() ([]byte, error) {
		data, st, err := r.conn.Get(zkGuardPath(key) + "/" + zookeeper.LockNodeName)
		stat = st
		return data, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return BackendView{Known: true}
	case err != nil:
		return BackendView{}
	}
	var rec zkRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.Holder == "" {
		// Not lockwarden's record: another client's node, held by its data.
		return BackendView{Known: true, Held: true, Holder: string(data)}
	}
	if stat == nil || !zkValidUntil(rec, stat).After(time.Now()) {
		return BackendView{Known: true}
	}
	return BackendView{Known: true, Held: true, Holder: rec.Holder}
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

// readHeld reads keys through r and returns those held. A key r cannot read fails the listing:
// a partial answer would let the orphan check pass on what it never saw.
func readHeld(ctx context.Context, r backendReader, backend string, keys []string) ([]BackendKey, error) {
	var out []BackendKey
	for _, k := range keys {
		v := r.read(ctx, k)
		switch {
		case !v.Known:
			return nil, fmt.Errorf("%s: reading %q: no answer", backend, k)
		case v.Held:
			out = append(out, BackendKey{Key: k, Holder: v.Holder})
		}
	}
	return out, nil
}

// sqlReader reads the SQL backend's tables (package sqlbackend): one row per key in table
// (lock_key, holder, session_id, ttl_us, expires_at, ...), and one row per controller session in
// table + "_sessions" (session_id, renewed_at). A row is held by its holder while
// GREATEST(expires_at, its session's renewed_at + ttl_us) is after the database's clock (now() on
// PostgreSQL, UTC_TIMESTAMP(6) on MySQL/MariaDB, whose DATETIMEs are UTC); a missing session row
// counts as never renewed. The rule is evaluated in SQL, by the database's clock, as the backend's
// statements do.
type sqlReader struct {
	db *sql.DB
	// dialect is sqlbackend.DriverPostgres or sqlbackend.DriverMySQL (LockBackend spec.sql.driver).
	dialect string
	// table is the lock table (spec.sql.table); empty means sqlbackend.DefaultTable.
	table string
}

// liveFrom is the FROM and the liveness condition of a lock row l joined with its session row s,
// and the dialect's first two placeholders.
func (r sqlReader) liveFrom() (from, live, p1 string) {
	table := r.table
	if table == "" {
		table = sqlbackend.DefaultTable
	}
	from = " FROM " + table + " AS l LEFT JOIN " + table + "_sessions AS s ON s.session_id = l.session_id"
	if r.dialect == sqlbackend.DriverMySQL {
		// GREATEST is NULL if an argument is: a missing session row leaves expires_at.
		return from, "GREATEST(l.expires_at, COALESCE(s.renewed_at + INTERVAL l.ttl_us MICROSECOND, l.expires_at)) > UTC_TIMESTAMP(6)", "?"
	}
	// PostgreSQL's GREATEST ignores NULLs.
	return from, "GREATEST(l.expires_at, s.renewed_at + l.ttl_us * interval '1 microsecond') > now()", "$1"
}

func (r sqlReader) read(ctx context.Context, key string) BackendView {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	from, live, p1 := r.liveFrom()
	var holder string
	err := r.db.QueryRowContext(ctx, "SELECT l.holder"+from+" WHERE l.lock_key = "+p1+" AND "+live, key).Scan(&holder)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return BackendView{Known: true} // no row, or an expired one: free
	case err != nil:
		return BackendView{}
	}
	return BackendView{Known: true, Held: true, Holder: holder}
}

// held selects the live rows whose key starts with prefix (LIKE, with '!' escaping the pattern's
// special characters, which both dialects accept as written).
func (r sqlReader) held(ctx context.Context, prefix string) ([]BackendKey, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	from, live, p1 := r.liveFrom()
	pattern := strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(prefix) + "%"
	rows, err := r.db.QueryContext(ctx, "SELECT l.lock_key, l.holder"+from+" WHERE l.lock_key LIKE "+p1+" ESCAPE '!' AND "+live, pattern)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []BackendKey
	for rows.Next() {
		var k BackendKey
		if err := rows.Scan(&k.Key, &k.Holder); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// redlockReader reads the redlock backend's N independent Redis nodes (package redlock): on each
// node the key's value is the holder identity (SET key identity NX PX ttl; the hold record beside
// it, "lockwarden-hold:" + key, decides nothing), and a key is held by the identity that holds it
// on a quorum, N/2+1, of the nodes, as the backend's Inspect decides.
type redlockReader struct{ nodes []*goredis.Client }

// redlockRecordPrefix starts the hold records' keys (redisnode.RecordKeyPrefix).
const redlockRecordPrefix = "lockwarden-hold:"

// redisGlobEscaper quotes the characters that KEYS patterns treat specially.
var redisGlobEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

func (r redlockReader) quorum() int { return len(r.nodes)/2 + 1 }

func (r redlockReader) read(ctx context.Context, key string) BackendView {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	holders := make([]string, len(r.nodes))
	errs := make([]error, len(r.nodes))
	var wg sync.WaitGroup
	for i, c := range r.nodes {
		wg.Go(func() {
			v, err := c.Get(ctx, key).Result()
			switch {
			case errors.Is(err, goredis.Nil):
			case err != nil:
				errs[i] = err
			default:
				holders[i] = v
			}
		})
	}
	wg.Wait()
	votes := map[string]int{}
	failed := 0
	for i, err := range errs {
		switch {
		case err != nil:
			failed++
		case holders[i] != "":
			votes[holders[i]]++
		}
	}
	best, most := "", 0
	for h, n := range votes {
		if n > most {
			best, most = h, n
		}
	}
	switch {
	case most >= r.quorum():
		return BackendView{Known: true, Held: true, Holder: best}
	case most+failed >= r.quorum():
		// The nodes that did not answer could make a quorum for someone: nothing is known.
		return BackendView{}
	}
	return BackendView{Known: true}
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
