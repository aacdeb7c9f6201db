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

package sqlbackend_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
	sqlbackend "github.com/lockwarden/lockwarden/internal/backends/sql"
	"github.com/lockwarden/lockwarden/internal/testutil/sqltest"
)

// placesTable is the places table of the default lock table.
const placesTable = sqlbackend.DefaultTable + "_places"

// TestPlaces checks how shared places are stored and why they exclude exclusive holds, beyond
// what the conformance suite can see: the rows, the interleavings the row lock decides, a
// database from an earlier version, and renewal. One server per dialect.
func TestPlaces(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		t.Run("Rows", func(t *testing.T) { placeRows(t, srv) })
		t.Run("ExclusiveWaitsForPlaceInFlight", func(t *testing.T) {
			t.Run("MarkerExists", func(t *testing.T) { exclusiveWaitsForPlace(t, srv, true) })
			t.Run("NoRowYet", func(t *testing.T) { exclusiveWaitsForPlace(t, srv, false) })
		})
		t.Run("SharedWaitsForExclusiveInFlight", func(t *testing.T) { sharedWaitsForExclusive(t, srv) })
		t.Run("EarlierDatabase", func(t *testing.T) { earlierDatabase(t, srv) })
		t.Run("Renewal", func(t *testing.T) { placeRenewal(t, srv) })
	})
}

// inAMinute is the database's clock a minute from now, in SQL.
func inAMinute(srv *sqltest.Server) string {
	if srv.Driver == sqlbackend.DriverPostgres {
		return "now() + interval '1 minute'"
	}
	return "UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE"
}

// readPlace reads a place's row with a plain client.
func readPlace(t *testing.T, db *sql.DB, srv *sqltest.Server, key, holder string) (rawRow, bool) {
	t.Helper()
	var r rawRow
	err := db.QueryRowContext(t.Context(), q(srv, "SELECT holder, session_id, grant_id, ttl_us, acquired_at, expires_at FROM "+
		placesTable+" WHERE lock_key = ? AND holder = ?"), key, holder).Scan(&r.Holder, &r.Session, &r.Grant, &r.TTLUs, &r.Acquired, &r.Expires)
	if err == sql.ErrNoRows {
		return rawRow{}, false
	}
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return r, true
}

// A key held in places has a row per place, and its lock row is the marker: a row nobody holds,
// expired since 1970, which neither a refused exclusive acquire nor any release changes, and
// which the next exclusive acquire takes as a new hold once the places are gone.
func placeRows(t *testing.T, srv *sqltest.Server) {
	g := NewWithT(t)
	ctx := t.Context()
	db := srv.DB()
	b := newBackend(t, srv)
	const key = "places/rows"
	la, err := b.TryAcquireShared(ctx, key, "pod-a", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	lb, err := b.TryAcquireShared(ctx, key, "pod-b", 5*time.Second, 2)
	g.Expect(err).NotTo(HaveOccurred())

	marker, ok := readRaw(t, db, srv, key)
	g.Expect(ok).To(BeTrue(), "the key has its lock row")
	g.Expect(marker.Holder).To(BeEmpty())
	g.Expect(marker.Session).To(BeEmpty())
	g.Expect(marker.Expires.UTC().Year()).To(Equal(1970))
	for _, l := range []backends.Lease{la, lb} {
		p, ok := readPlace(t, db, srv, key, l.Identity)
		g.Expect(ok).To(BeTrue())
		g.Expect(strconv.FormatInt(p.Grant, 10)).To(Equal(l.Version))
		g.Expect(p.TTLUs).To(BeEquivalentTo(l.TTL.Microseconds()))
		g.Expect(p.Acquired.Equal(l.AcquireTime)).To(BeTrue(), "AcquireTime is the row's")
		g.Expect(p.Expires.Equal(l.ExpireTime)).To(BeTrue(), "ExpireTime is the row's")
	}

	_, err = b.TryAcquire(ctx, key, "writer", holdTTL)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	g.Expect(b.Release(ctx, backends.Lease{Key: key, Identity: "ghost"})).To(Succeed(), "a stale exclusive lease")
	g.Expect(b.Release(ctx, la)).To(Succeed())
	_, ok = readPlace(t, db, srv, key, "pod-a")
	g.Expect(ok).To(BeFalse(), "release deletes the place")
	_, ok = readPlace(t, db, srv, key, "pod-b")
	g.Expect(ok).To(BeTrue(), "and no other")
	after, _ := readRaw(t, db, srv, key)
	g.Expect(after).To(Equal(marker), "the marker is untouched")
	_, err = b.TryAcquire(ctx, key, "writer", holdTTL)
	g.Expect(err).To(MatchError(backends.ErrLocked), "one place still excludes")

	g.Expect(b.Release(ctx, lb)).To(Succeed())
	lw, err := b.TryAcquire(ctx, key, "writer", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	taken, _ := readRaw(t, db, srv, key)
	g.Expect(taken.Holder).To(Equal("writer"))
	g.Expect(strconv.FormatInt(taken.Grant, 10)).To(Equal(lw.Version))
	g.Expect(taken.Grant).NotTo(Equal(marker.Grant), "a new hold")
	got, err := b.Inspect(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Shared).To(BeFalse())
	g.Expect(got.Identity).To(Equal("writer"))
}

// waitingBackend opens a session whose statements wait up to 10 s for row locks (MySQL's default
// in the backend is 1 s), so that a test can hold a row lock while it checks that the session
// waits.
func waitingBackend(t *testing.T, srv *sqltest.Server) *sqlbackend.Backend {
	t.Helper()
	dsn := srv.DSN()
	if srv.Driver == sqlbackend.DriverMySQL {
		cfg, err := mysql.ParseDSN(dsn)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		cfg.Params = map[string]string{"innodb_lock_wait_timeout": "10"}
		dsn = cfg.FormatDSN()
	}
	b, err := sqlbackend.New(sqlbackend.Config{Driver: srv.Driver, DSN: dsn}, sqlbackend.WithCallTimeout(10*time.Second))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	NewWithT(t).Expect(b.Ping(t.Context())).To(Succeed()) // tables made, connections open
	return b
}

// waitForLockWait returns once some statement on the server waits for a lock. It fails at once
// if the acquire under test (done) answers before any statement waits, with that answer, and on
// timeout it names what the server's sessions were doing: a wait that never shows is otherwise
// a bare "0 > 0" (once in CI, on a loaded MariaDB).
func waitForLockWait(t *testing.T, srv *sqltest.Server, done <-chan error) {
	t.Helper()
	query := "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
	activity := "SELECT COALESCE(state, '') || ' ' || COALESCE(wait_event_type, '') || ' ' || COALESCE(query, '') FROM pg_stat_activity WHERE backend_type = 'client backend'"
	every := 5 * time.Millisecond
	if srv.Driver == sqlbackend.DriverMySQL {
		query = "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
		activity = "SELECT CONCAT(COALESCE(COMMAND, ''), ' ', COALESCE(STATE, ''), ' ', COALESCE(INFO, '')) FROM information_schema.PROCESSLIST"
		// InnoDB refills the cache behind INNODB_TRX only when nobody has read it for 100 ms,
		// so polling faster shows the table as it was at the first poll, forever: a wait that
		// began after it (a loaded CI machine) never appeared, and the test failed.
		every = 150 * time.Millisecond
	}
	// One pool for every poll: a pool a poll (each kept until the test ends) ran the server out
	// of connections within the 5 s ("Too many connections" on MariaDB, in CI).
	admin := srv.AdminDB()
	// The bound is generous: under make test the controller suite shares the two cores.
	const bound = 30 * time.Second
	deadline := time.Now().Add(bound)
	for {
		select {
		case err := <-done:
			t.Fatalf("the acquire answered before any statement waited for a lock: %v", err)
		default:
		}
		var n int
		err := admin.QueryRowContext(t.Context(), query).Scan(&n)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no statement waited for a lock within %v (last poll: %d, %v); sessions:\n%s", bound, n, err, sessions(t, admin, activity))
		}
		time.Sleep(every)
	}
}

// sessions lists what each session on the server is doing, for a failure message.
func sessions(t *testing.T, admin *sql.DB, query string) string {
	rows, err := admin.QueryContext(t.Context(), query)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = rows.Close() }()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err.Error()
		}
		lines = append(lines, "  "+line)
	}
	return strings.Join(lines, "\n")
}

// An exclusive acquire that began before a shared acquire committed its place, and waited for
// the key's row meanwhile, is refused: on PostgreSQL its snapshot misses the place, and the
// marker's new grant_id is what refuses it. The shared acquire here is done by hand, as
// places_mark_*.sql and places_acquire_*.sql do it, so that the test holds its transaction open.
func exclusiveWaitsForPlace(t *testing.T, srv *sqltest.Server, markerExists bool) {
	g := NewWithT(t)
	ctx := t.Context()
	db := srv.DB()
	b := waitingBackend(t, srv)
	key := fmt.Sprintf("places/inflight/x-%t", markerExists)
	tx, err := db.BeginTx(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = tx.Rollback() }()
	if markerExists {
		l, err := b.TryAcquireShared(ctx, key, "pod-0", holdTTL, 2)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Release(ctx, l)).To(Succeed())
		_, err = tx.ExecContext(ctx, q(srv, "UPDATE "+sqlbackend.DefaultTable+" SET grant_id = grant_id + 1 WHERE lock_key = ?"), key)
		g.Expect(err).NotTo(HaveOccurred())
	} else {
		_, err = tx.ExecContext(ctx, q(srv, "INSERT INTO "+sqlbackend.DefaultTable+
			" (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at) VALUES (?, '', 1, '', 0, "+dbNow(srv)+", "+dbNow(srv)+")"), key)
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = tx.ExecContext(ctx, q(srv, "INSERT INTO "+placesTable+
		" (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at) VALUES (?, 'pod-1', 1, 'raw-session', 60000000, "+
		dbNow(srv)+", "+inAMinute(srv)+")"), key)
	g.Expect(err).NotTo(HaveOccurred())

	done := make(chan error, 1)
	go func() {
		_, err := b.TryAcquire(ctx, key, "writer", holdTTL)
		done <- err
	}()
	waitForLockWait(t, srv, done)
	g.Expect(tx.Commit()).To(Succeed())
	g.Expect(<-done).To(MatchError(backends.ErrLocked), "the exclusive acquire sees the place committed while it waited")
	holders, err := b.Holders(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders).To(HaveLen(1))
	g.Expect(holders[0].Identity).To(Equal("pod-1"))
	g.Expect(holders[0].Shared).To(BeTrue())
}

// A shared acquire that waited for the key's row while an exclusive acquire committed is
// refused, and leaves no place.
func sharedWaitsForExclusive(t *testing.T, srv *sqltest.Server) {
	g := NewWithT(t)
	ctx := t.Context()
	db := srv.DB()
	b := waitingBackend(t, srv)
	const key = "places/inflight/s"
	tx, err := db.BeginTx(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, q(srv, "INSERT INTO "+sqlbackend.DefaultTable+
		" (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at) VALUES (?, 'writer', 1, 'raw-session', 60000000, "+
		dbNow(srv)+", "+inAMinute(srv)+")"), key)
	g.Expect(err).NotTo(HaveOccurred())

	done := make(chan error, 1)
	go func() {
		_, err := b.TryAcquireShared(ctx, key, "reader", holdTTL, 3)
		done <- err
	}()
	waitForLockWait(t, srv, done)
	g.Expect(tx.Commit()).To(Succeed())
	err = <-done
	g.Expect(err).To(MatchError(backends.ErrLocked))
	g.Expect(err).To(MatchError(ContainSubstring("writer")), "the error names the exclusive holder")
	_, found := readPlace(t, db, srv, key, "reader")
	g.Expect(found).To(BeFalse())
}

// A database that an earlier version made has no places table: the first session creates it,
// leaves the other tables and their rows alone, and the shipped DDL can run again harmlessly.
func earlierDatabase(t *testing.T, srv *sqltest.Server) {
	g := NewWithT(t)
	ctx := t.Context()
	db := srv.DB()
	const table = "earlier_locks"
	// The earlier DDL: the shipped one without the places table and its index.
	ddl, err := os.ReadFile("ddl_" + srv.Driver + ".sql")
	g.Expect(err).NotTo(HaveOccurred())
	var places []string
	for _, stmt := range strings.Split(strings.ReplaceAll(string(ddl), sqlbackend.DefaultTable, table), ";\n") {
		if strings.Contains(stmt, table+"_places") {
			places = append(places, stmt)
			continue
		}
		_, err := db.ExecContext(ctx, stmt)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(places).NotTo(BeEmpty())
	_, err = db.ExecContext(ctx, q(srv, "INSERT INTO "+table+
		" (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at) VALUES ('earlier/k', 'old-pod', 5, 'old-session', 60000000, "+
		dbNow(srv)+", "+inAMinute(srv)+")"))
	g.Expect(err).NotTo(HaveOccurred())

	open := func() *sqlbackend.Backend {
		b, err := sqlbackend.New(sqlbackend.Config{Driver: srv.Driver, DSN: srv.DSN(), Table: table})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		return b
	}
	b := open()
	_, err = b.TryAcquire(ctx, "earlier/k", "new-pod", holdTTL)
	g.Expect(err).To(MatchError(ContainSubstring("old-pod")), "the earlier hold still excludes")
	got, err := b.Inspect(ctx, "earlier/k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Identity).To(Equal("old-pod"))
	g.Expect(got.Version).To(Equal("5"))
	_, err = b.TryAcquireShared(ctx, "earlier/k", "reader", holdTTL, 2)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	_, err = b.TryAcquireShared(ctx, "earlier/shared", "reader", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred(), "the places table was created")

	// Every statement is IF NOT EXISTS: the whole DDL runs again on the tables it made.
	for _, stmt := range strings.Split(strings.ReplaceAll(string(ddl), sqlbackend.DefaultTable, table), ";\n") {
		_, err := db.ExecContext(ctx, stmt)
		g.Expect(err).NotTo(HaveOccurred())
	}
	other := open()
	g.Expect(other.Ping(ctx)).To(Succeed())
	holders, err := other.Holders(ctx, "earlier/shared")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders).To(HaveLen(1), "the place survives the DDL")
}

// Renewing a mixed batch costs two statements whatever its size, as renewing exclusive locks
// does; the session keeps its places alive, listed or not; a place that expired before the
// renewal is deleted, not revived; and a place moves into the session that renews it.
func placeRenewal(t *testing.T, srv *sqltest.Server) {
	g := NewWithT(t)
	ctx := t.Context()
	db := srv.DB()
	b := newBackend(t, srv)
	var leases []backends.Lease
	for i := range 60 {
		var (
			l   backends.Lease
			err error
		)
		if i%4 == 0 {
			l, err = b.TryAcquire(ctx, fmt.Sprintf("places/renew/x%02d", i), fmt.Sprintf("id%02d", i), holdTTL)
		} else {
			l, err = b.TryAcquireShared(ctx, fmt.Sprintf("places/renew/k%02d", i/4), fmt.Sprintf("id%02d", i), holdTTL, 3)
		}
		g.Expect(err).NotTo(HaveOccurred())
		leases = append(leases, l)
	}
	unlisted, err := b.TryAcquireShared(ctx, "places/renew/unlisted", "pod-u", 2*time.Second, 2)
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = b.Renew(ctx, leases[:1], holdTTL) // the session row exists
	g.Expect(err).NotTo(HaveOccurred())
	for _, n := range []int{2, 60} {
		before := b.Statements()
		renewed, lost, err := b.Renew(ctx, leases[:n], holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(BeEmpty())
		g.Expect(renewed).To(HaveLen(n))
		g.Expect(b.Statements()-before).To(BeEquivalentTo(2), "statements to renew %d mixed leases", n)
		for i, l := range renewed {
			g.Expect(l.Shared).To(Equal(leases[i].Shared))
			g.Expect(l.Version).To(Equal(leases[i].Version))
		}
	}

	short, err := b.TryAcquireShared(ctx, "places/renew/short", "pod-s", time.Second, 2)
	g.Expect(err).NotTo(HaveOccurred())
	for range 4 { // 4 s: the unlisted place (2 s) lives on by the session; the short one expires
		time.Sleep(time.Second)
		_, _, err = b.Renew(ctx, leases[1:2], holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, found := readPlace(t, db, srv, short.Key, short.Identity)
	g.Expect(found).To(BeFalse(), "the renewal deleted the place that had expired before it")
	renewed, lost, err := b.Renew(ctx, []backends.Lease{short, unlisted}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(ConsistOf(short))
	g.Expect(renewed).To(HaveLen(1))
	holders, err := b.Holders(ctx, short.Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders).To(BeEmpty())

	// Another session (a restarted controller) renews a place: it moves into that session.
	other := newBackend(t, srv)
	was, _ := readPlace(t, db, srv, leases[1].Key, leases[1].Identity)
	renewed, lost, err = other.Renew(ctx, leases[1:2], holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(1))
	g.Expect(renewed[0].Version).To(Equal(leases[1].Version))
	now, _ := readPlace(t, db, srv, leases[1].Key, leases[1].Identity)
	g.Expect(now.Session).NotTo(Equal(was.Session))
}
