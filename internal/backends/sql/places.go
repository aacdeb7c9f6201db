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

package sqlbackend

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// Shared places (backends.Sharer).
//
// # Layout
//
// A key held in shared places has one row per holding identity in the places table (the lock
// table's name with "_places", primary key (lock_key, holder)), with the columns of a lock row: a
// random grant id (Lease.Version), the session that keeps the place alive, the TTL, when the hold
// began and the row's own expiry. A place lives as a lock row does, while GREATEST(expires_at,
// its session's renewed_at + ttl_us) is after the database's now; so Renew's one session write
// renews places and exclusive locks alike, and first deletes the session's expired places as it
// deletes its expired locks (renew_*.sql). The key's row in the lock table keeps its layout:
// while the key is shared it is the key's marker, a row no identity holds (holder '', session '',
// expired since 1970), which every exclusive statement sees as a free lock and no release
// deletes.
//
// # Why it is atomic
//
// The key's row in the lock table is what shared and exclusive acquires of the key both lock, so
// they take turns on it:
//
//   - TryAcquireShared is one transaction. Its first statement (places_mark_*.sql) inserts the
//     marker, or rewrites the row as the marker with a fresh grant_id, unless a live exclusive
//     hold is there, which refuses the place; either way the row stays locked until the
//     transaction ends. Only then does its second statement (places_acquire_*.sql) count the
//     live places of other identities and insert or refresh its own: every other shared acquire
//     of the key waits at the marker meanwhile, so the count is exact. On PostgreSQL the two
//     statements go in one round trip (a pgx batch is one implicit transaction, and each of its
//     statements takes its own snapshot), so the row is locked for no longer than the server
//     takes to run them; on MySQL they are an explicit transaction.
//   - TryAcquire's one upsert locks the same row and takes it only if the key has no live place
//     (acquire_*.sql). On MySQL, InnoDB reads the places in that statement as they are committed
//     once it has the row, so it sees a place committed while it waited. A PostgreSQL statement
//     reads them from the snapshot it began with, which misses such a place; but the shared
//     acquire that made it gave the row a new grant_id, and the upsert takes the row only if its
//     grant_id is still the one its snapshot saw.
//   - TryAcquire inserts a missing row without looking at places. A key with live places always
//     has its marker: shared acquires insert it, nothing else deletes it (a release deletes the
//     identity's row, or an expired one that names a holder; a renewal deletes rows of its
//     session; the marker names no holder and no session), and TryAcquire replaces it only when
//     no place is live.
//
// Expiry is judged as for locks, by the database's clock, reading session rows with a shared lock
// so that a renewal in flight is waited for; a session renewal locks its row exclusively and
// never revives a place that has expired.
//
// TestPlaces holds a shared acquire's transaction open, and an exclusive one's, to check that the
// other kind waits for it and is then refused.

// placeTableSuffix makes the places table's name from the lock table's.
const placeTableSuffix = "_places"

// placeTable is the name of the places table of a lock table.
func placeTable(table string) string { return table + placeTableSuffix }

var _ backends.Sharer = (*Backend)(nil)

// placeDialect is what differs between PostgreSQL and MySQL in the statements of places.
type placeDialect struct {
	// mark makes the key's lock row its places marker, unless a live exclusive hold is there
	// (parameters: key, grant id).
	mark string
	// prune deletes the key's expired places of other identities (parameters: key, identity);
	// empty when acquire does it too (PostgreSQL).
	prune string
	// acquire inserts or refreshes the identity's place if the limit lets it, once mark has
	// locked the key's row (parameters: see the files).
	acquire string
	// take sends mark and acquire in one transaction; taken is false when the key is held
	// exclusively or every place is taken. acquireReturns: take returns the place it took
	// (PostgreSQL); else the place is read back (MySQL).
	take           func(ctx context.Context, b *Backend, op, key, identity string, ttlUs int64, places int) (r row, taken bool, err error)
	acquireReturns bool
	// holders reads a key's lock row and places: a flag that is true for places, then rowColumns.
	// holdersArgs are its parameters.
	holders     string
	holdersArgs func(key string) []any
	// release deletes the identity's place of a key (parameters: key, identity).
	release string
	// adopt is dialect.adopt for a place.
	adopt string
}

// postgresPlaces is the PostgreSQL dialect of places for table.
func postgresPlaces(table string) placeDialect {
	sessions, places := sessionTable(table), placeTable(table)
	cols := rowColumns(pgExpiry, "now()")
	join := " AS l LEFT JOIN " + sessions + " AS s ON s.session_id = l.session_id WHERE l.lock_key = $1"
	return placeDialect{
		mark:           forTable(placesMarkPostgres, table),
		acquire:        forTable(placesAcquirePostgres, table),
		take:           pgTakePlace,
		acquireReturns: true,
		holders:        "SELECT false, " + cols + " FROM " + table + join + " UNION ALL SELECT true, " + cols + " FROM " + places + join,
		holdersArgs:    func(key string) []any { return []any{key} },
		release:        "DELETE FROM " + places + " WHERE lock_key = $1 AND holder = $2",
		adopt:          pgAdopt(places, sessions),
	}
}

// mysqlPlaces is the MySQL and MariaDB dialect of places for table.
func mysqlPlaces(table string) placeDialect {
	sessions, places := sessionTable(table), placeTable(table)
	cols := rowColumns(mysqlExpiry, "UTC_TIMESTAMP(6)")
	join := " AS l LEFT JOIN " + sessions + " AS s ON s.session_id = l.session_id WHERE l.lock_key = ?"
	return placeDialect{
		mark:        forTable(placesMarkMySQL, table),
		prune:       forTable(placesPruneMySQL, table),
		acquire:     forTable(placesAcquireMySQL, table),
		take:        mysqlTakePlace,
		holders:     "SELECT FALSE, " + cols + " FROM " + table + join + " UNION ALL SELECT TRUE, " + cols + " FROM " + places + join,
		holdersArgs: func(key string) []any { return []any{key, key} },
		release:     "DELETE FROM " + places + " WHERE lock_key = ? AND holder = ?",
		adopt:       mysqlAdopt(places, sessions),
	}
}

// TryAcquireShared takes one of key's places for identity, or refreshes the identity's place
// (same Version and AcquireTime, later ExpireTime) whatever the limit is now. It fails with a
// *backends.LockedError while the key is held exclusively, or while at least places other
// identities hold live places. One transaction: one round trip on PostgreSQL; on MySQL six statements (a prune of
// expired places, BEGIN, two statements, COMMIT, and a read of the place), plus one to name a
// holder when it is refused.
func (b *Backend) TryAcquireShared(ctx context.Context, key, identity string, ttl time.Duration, places int) (backends.Lease, error) {
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	if places < 1 {
		return backends.Lease{}, fmt.Errorf("sql backend: places must be at least 1, got %d", places)
	}
	ctx, cancel, err := b.begin(ctx)
	if err != nil {
		return backends.Lease{}, err
	}
	defer cancel()
	return b.tryAcquireShared(ctx, key, identity, ttl, places)
}

func (b *Backend) tryAcquireShared(ctx context.Context, key, identity string, ttl time.Duration, places int) (backends.Lease, error) {
	op := "acquiring a place of " + strconv.Quote(key)
	ttlUs := max(ttl.Microseconds(), 1)
	pd := &b.dialect.places
	// As in tryAcquire: holders seen after a refusal may have left in between; try again.
	for range 3 {
		r, taken, err := pd.take(ctx, b, op, key, identity, ttlUs, places)
		if err != nil {
			return backends.Lease{}, err
		}
		if taken && pd.acquireReturns {
			l := r.lease(key)
			l.TTL = ttl
			return l, nil
		}
		// MySQL reads back what its transaction did; PostgreSQL, refused, who holds the key.
		rows, err := b.holdsOf(ctx, op, key)
		if err != nil {
			return backends.Lease{}, err
		}
		own, locked := afterRefusal(key, liveHolders(key, rows), identity, true)
		switch {
		case own != nil && !pd.acquireReturns:
			l := *own
			l.TTL = ttl
			return l, nil
		case locked != nil:
			return backends.Lease{}, locked
		}
	}
	return backends.Lease{}, &backends.LockedError{Key: key}
}

// pgTakePlace sends places_mark_postgres.sql and places_acquire_postgres.sql in one pgx batch:
// one round trip, run as one implicit transaction, again from the start when the database
// aborted it for a deadlock.
func pgTakePlace(ctx context.Context, b *Backend, op, key, identity string, ttlUs int64, places int) (r row, taken bool, err error) {
	pd := &b.dialect.places
	for {
		r, taken = row{}, false
		b.statements.Add(1)
		err = b.withPgx(ctx, func(c *pgx.Conn) error {
			mark := newGrant()
			batch := &pgx.Batch{}
			batch.Queue(pd.mark, key, mark)
			batch.Queue(pd.acquire, key, identity, newGrant(), b.session, ttlUs, places, mark)
			br := c.SendBatch(ctx, batch)
			var marked bool
			err := br.QueryRow().Scan(&marked)
			if err == nil || errors.Is(err, pgx.ErrNoRows) { // no row: held exclusively
				err = br.QueryRow().Scan(&r.grant, &r.acquired, &r.expires)
				taken = err == nil
				if errors.Is(err, pgx.ErrNoRows) { // held exclusively, or every place is taken
					err = nil
				}
			}
			return errors.Join(err, br.Close())
		})
		switch {
		case err == nil:
			if taken {
				r.key, r.holder, r.session, r.ttl = key, identity, b.session, time.Duration(ttlUs)*time.Microsecond
				r.live, r.shared = true, true
			}
			return r, taken, nil
		case !b.dialect.retryable(err) || ctx.Err() != nil:
			return row{}, false, b.wrap(op, err)
		}
	}
}

// withPgx runs f on one of the pool's connections as pgx sees it, for what database/sql cannot
// send (batches).
func (b *Backend) withPgx(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the PostgreSQL driver connection is a %T", dc)
		}
		return f(c.Conn())
	})
}

// mysqlTakePlace prunes the key's expired places on its own, then sends places_mark_mysql.sql and
// places_acquire_mysql.sql in one transaction, again from the start when InnoDB aborted it for a
// deadlock.
func mysqlTakePlace(ctx context.Context, b *Backend, op, key, identity string, ttlUs int64, places int) (r row, taken bool, err error) {
	pd := &b.dialect.places
	if _, err := b.exec(ctx, "deleting expired places of "+strconv.Quote(key), pd.prune, key, identity); err != nil {
		return row{}, false, err
	}
	err = b.inTx(ctx, op, func(tx *dbsql.Tx) error {
		taken = false
		res, err := b.txExec(ctx, tx, pd.mark, key, newGrant())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // held exclusively, when err is nil
		}
		res, err = b.txExec(ctx, tx, pd.acquire,
			key, identity, newGrant(), b.session, ttlUs, ttlUs, key, identity, places, key, identity)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		taken = err == nil && n > 0 // else every place is taken
		return err
	})
	return row{}, taken, err
}

// Holders lists who holds key: the exclusive holder, or every live place by identity (Shared
// set), with the database's times; a free key gives an empty list. One statement.
func (b *Backend) Holders(ctx context.Context, key string) ([]backends.Lease, error) {
	if key == "" {
		return nil, errors.New("sql backend: key must not be empty")
	}
	ctx, cancel, err := b.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := b.holdsOf(ctx, "listing the holders of "+strconv.Quote(key), key)
	if err != nil {
		return nil, err
	}
	return liveHolders(key, rows), nil
}

// holdsOf reads key's lock row, if it has one, and its places, live or not, in one statement.
func (b *Backend) holdsOf(ctx context.Context, op, key string) ([]row, error) {
	pd := &b.dialect.places
	rows, err := b.query(ctx, op, pd.holders, pd.holdersArgs(key)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var shared bool
		r, err := scanRow(rows, &shared)
		if err != nil {
			return nil, b.wrap(op, err)
		}
		r.key, r.shared = key, shared
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, b.wrap(op, err)
	}
	return out, nil
}

// releasePlace deletes the identity's place of key, if it has one: one statement. Other places
// and the marker stay.
func (b *Backend) releasePlace(ctx context.Context, key, identity string) error {
	_, err := b.exec(ctx, "releasing the place of "+strconv.Quote(identity)+" in "+strconv.Quote(key), b.dialect.places.release, key, identity)
	return err
}

// inTx runs f in a transaction and commits it, again from the start when the database aborted it
// for a deadlock. f returns the driver's errors as they are, so that those can be told; inTx
// wraps them. BEGIN and COMMIT (or ROLLBACK) count as statements: each is a round trip.
func (b *Backend) inTx(ctx context.Context, op string, f func(*dbsql.Tx) error) error {
	for {
		b.statements.Add(1)
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			return b.wrap(op, err)
		}
		err = f(tx)
		b.statements.Add(1) // COMMIT or ROLLBACK
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
		if err == nil {
			return nil
		}
		if !b.dialect.retryable(err) || ctx.Err() != nil {
			return b.wrap(op, err)
		}
	}
}

// txExec sends one statement of a transaction.
func (b *Backend) txExec(ctx context.Context, tx *dbsql.Tx, query string, args ...any) (dbsql.Result, error) {
	b.statements.Add(1)
	return tx.ExecContext(ctx, query, args...)
}

// liveHolders lists the holds among one key's rows as Holders reports them: the live exclusive
// hold alone if there is one, else the live places by identity (an empty list, not nil, when
// there is neither). Expired rows hold nothing, and neither does the places marker.
func liveHolders(key string, rows []row) []backends.Lease {
	holders := []backends.Lease{}
	for _, r := range rows {
		if !r.live || r.holder == "" {
			continue
		}
		if !r.shared {
			return []backends.Lease{r.lease(key)}
		}
		holders = append(holders, r.lease(key))
	}
	slices.SortFunc(holders, func(a, b backends.Lease) int { return strings.Compare(a.Identity, b.Identity) })
	return holders
}

// afterRefusal tells an acquire that did not get the hold it asked for (a place when shared, else
// the exclusive hold) what the key's live holders mean. own is the identity's hold of that kind:
// the acquire's own on MySQL, whose statements return nothing, or one a concurrent acquire of the
// same identity made. Otherwise locked names a holder, another identity if there is one: the key
// is contended. Neither means the holds went away since: the caller tries again.
func afterRefusal(key string, holders []backends.Lease, identity string, shared bool) (own *backends.Lease, locked *backends.LockedError) {
	for i, h := range holders {
		if h.Identity == identity && h.Shared == shared {
			return &holders[i], nil
		}
	}
	if len(holders) == 0 {
		return nil, nil
	}
	first := holders[0]
	for _, h := range holders {
		if h.Identity != identity {
			first = h
			break
		}
	}
	return nil, &backends.LockedError{Key: key, Holder: first.Identity, ExpireTime: first.ExpireTime}
}

// findHold returns the row of rows that is identity's hold of the kind asked: its place when
// shared, else the lock row if it names identity.
func findHold(rows []row, shared bool, identity string) (row, bool) {
	for _, r := range rows {
		if r.shared == shared && r.holder == identity {
			return r, true
		}
	}
	return row{}, false
}

// renewal is what Renew does with a lease after the session's renewal.
type renewal int

const (
	// renewLost: the lease's hold is gone (free, expired, released, or another hold).
	renewLost renewal = iota
	// renewKeep: this session's renewal renewed it.
	renewKeep
	// renewMove: it lives, but another session keeps it alive (a restarted controller's) or
	// with another TTL: it moves into this session with the new TTL.
	renewMove
)

// judgeRenewal decides a lease's renewal from its row as read back after the session's renewal
// (found is false when there is none): lost unless the row is live and still the lease's hold
// (same kind, identity, and grant when the lease names one); kept when this session keeps it
// alive with this TTL; else moved.
func judgeRenewal(l backends.Lease, r row, found bool, session string, ttl time.Duration) renewal {
	switch {
	case !found || !r.live || r.shared != l.Shared || r.holder != l.Identity || !grantMatches(l.Version, r.grant):
		return renewLost
	case r.session != session || r.ttl != ttl:
		return renewMove
	}
	return renewKeep
}
