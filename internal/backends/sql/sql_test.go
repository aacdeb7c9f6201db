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
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lockwarden/lockwarden/internal/backends"
	sqlbackend "github.com/lockwarden/lockwarden/internal/backends/sql"
	"github.com/lockwarden/lockwarden/internal/testutil/sqltest"
)

// q rewrites a statement written with ? placeholders for the server's driver.
func q(srv *sqltest.Server, stmt string) string {
	if srv.Driver != sqlbackend.DriverPostgres {
		return stmt
	}
	out, n := []byte{}, 0
	for i := 0; i < len(stmt); i++ {
		if stmt[i] == '?' {
			n++
			out = append(out, []byte("$"+strconv.Itoa(n))...)
			continue
		}
		out = append(out, stmt[i])
	}
	return string(out)
}

// dbNow is the database's clock in SQL.
func dbNow(srv *sqltest.Server) string {
	if srv.Driver == sqlbackend.DriverPostgres {
		return "now()"
	}
	return "UTC_TIMESTAMP(6)"
}

// expireRow makes key's row expire one second ago by the database's clock, as if its TTL had run
// out and its session had stopped renewing it (the row names a session that never renewed),
// without touching anything else.
func expireRow(t *testing.T, db *sql.DB, srv *sqltest.Server, key string) {
	t.Helper()
	shift := "now() - interval '1 second'"
	if srv.Driver != sqlbackend.DriverPostgres {
		shift = "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"
	}
	res, err := db.ExecContext(t.Context(), q(srv, "UPDATE "+sqlbackend.DefaultTable+" SET expires_at = "+shift+
		", session_id = 'lapsed-session' WHERE lock_key = ?"), key)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	n, _ := res.RowsAffected()
	NewWithT(t).Expect(n).To(BeEquivalentTo(1), "the row of %q exists", key)
}

// rawRow is a lock row read with a plain client.
type rawRow struct {
	Holder, Session string
	Grant, TTLUs    int64
	Acquired        time.Time
	Expires         time.Time
}

func readRaw(t *testing.T, db *sql.DB, srv *sqltest.Server, key string) (rawRow, bool) {
	t.Helper()
	var r rawRow
	err := db.QueryRowContext(t.Context(), q(srv, "SELECT holder, session_id, grant_id, ttl_us, acquired_at, expires_at FROM "+
		sqlbackend.DefaultTable+" WHERE lock_key = ?"), key).Scan(&r.Holder, &r.Session, &r.Grant, &r.TTLUs, &r.Acquired, &r.Expires)
	if err == sql.ErrNoRows {
		return rawRow{}, false
	}
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return r, true
}

// The table is created on first use, with one row per lock as the documentation describes: the
// holder, the grant id as Version, the TTL, and times by the database's clock.
func TestTableAndRows(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		db := srv.DB()
		b := newBackend(t, srv)
		l, err := b.TryAcquire(ctx, "ns/lock", "pod-a", 5*time.Second)
		g.Expect(err).NotTo(HaveOccurred())

		r, ok := readRaw(t, db, srv, "ns/lock")
		g.Expect(ok).To(BeTrue())
		g.Expect(r.Holder).To(Equal("pod-a"))
		g.Expect(strconv.FormatInt(r.Grant, 10)).To(Equal(l.Version))
		g.Expect(r.TTLUs).To(BeEquivalentTo(5_000_000))
		g.Expect(r.Acquired.Equal(l.AcquireTime)).To(BeTrue(), "AcquireTime is the row's, %s vs %s", r.Acquired, l.AcquireTime)
		g.Expect(r.Expires.Equal(l.ExpireTime)).To(BeTrue(), "ExpireTime is the row's")
		g.Expect(r.Expires.Sub(r.Acquired)).To(Equal(5 * time.Second))

		// A refused acquire changes nothing in the row (MySQL's assignments are order-sensitive).
		_, err = b.TryAcquire(ctx, "ns/lock", "pod-b", holdTTL)
		g.Expect(err).To(MatchError(backends.ErrLocked))
		after, _ := readRaw(t, db, srv, "ns/lock")
		g.Expect(after).To(Equal(r))

		// A reentrant acquire keeps the grant and the start, and moves the expiry.
		time.Sleep(10 * time.Millisecond)
		again, err := b.TryAcquire(ctx, "ns/lock", "pod-a", holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.Version).To(Equal(l.Version))
		r2, _ := readRaw(t, db, srv, "ns/lock")
		g.Expect(r2.Grant).To(Equal(r.Grant))
		g.Expect(r2.Acquired).To(BeTemporally("==", r.Acquired))
		g.Expect(r2.Expires).To(BeTemporally(">", r.Expires))
		g.Expect(r2.TTLUs).To(BeEquivalentTo(holdTTL.Microseconds()))

		// Release deletes the row.
		g.Expect(b.Release(ctx, again)).To(Succeed())
		_, ok = readRaw(t, db, srv, "ns/lock")
		g.Expect(ok).To(BeFalse())
	})
}

// Renewal costs two statements (the session's renewal and one read) whatever the number of
// leases, writes one row (the session's) however many locks it renews, and extends every lease.
func TestRenewStatements(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		db := srv.DB()
		b := newBackend(t, srv)
		leases := make([]backends.Lease, 600)
		for i := range leases {
			l, err := b.TryAcquire(ctx, fmt.Sprintf("renew-cost/k%03d", i), fmt.Sprintf("id%03d", i), holdTTL)
			g.Expect(err).NotTo(HaveOccurred())
			leases[i] = l
		}
		time.Sleep(10 * time.Millisecond)
		_, _, err := b.Renew(ctx, leases[:1], holdTTL) // the session row exists: each renewal below updates it
		g.Expect(err).NotTo(HaveOccurred())
		// The session's row, once: MariaDB's handler counts an upsert's update as a write (the
		// insert it tried) and an update.
		wantWrites := map[string]int64{sqlbackend.DriverPostgres: 1, sqlbackend.DriverMySQL: 2}[srv.Driver]
		for _, n := range []int{1, 50, 600} {
			w := startWriteCount(t, db, srv)
			before := b.Statements()
			renewed, lost, err := b.Renew(ctx, leases[:n], holdTTL)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lost).To(BeEmpty())
			g.Expect(renewed).To(HaveLen(n))
			statements, writes := b.Statements()-before, w.rowsWritten()
			t.Logf("Renewing %d leases: %d statements, %d rows written", n, statements, writes)
			g.Expect(statements).To(BeEquivalentTo(2), "statements to renew %d leases", n)
			g.Expect(writes).To(Equal(wantWrites), "rows written to renew %d leases", n)
			for _, i := range []int{0, n - 1} {
				g.Expect(renewed[i].ExpireTime).To(BeTemporally(">", leases[i].ExpireTime), "lease %d was extended", i)
				got, err := b.Inspect(ctx, leases[i].Key)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got.ExpireTime).To(BeTemporally("==", renewed[i].ExpireTime), "the database agrees on lease %d", i)
			}
		}
		// The session renewed the locks it was not asked about too.
		got, err := b.Inspect(ctx, leases[599].Key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.ExpireTime).To(BeTemporally(">", leases[599].ExpireTime))
	})
}

// writeCount counts the rows the server writes from its start to rowsWritten.
type writeCount struct {
	t   *testing.T
	db  *sql.DB
	srv *sqltest.Server
	// xid: PostgreSQL's next transaction id at the start; rows written later carry a later xmin.
	xid int64
	// handler: MariaDB's rows written, updated and deleted by table handlers at the start.
	handler int64
}

func startWriteCount(t *testing.T, db *sql.DB, srv *sqltest.Server) *writeCount {
	t.Helper()
	w := &writeCount{t: t, db: db, srv: srv}
	if srv.Driver == sqlbackend.DriverPostgres {
		NewWithT(t).Expect(db.QueryRowContext(t.Context(), "SELECT txid_current()").Scan(&w.xid)).To(Succeed())
	} else {
		w.handler = w.handlerRows()
	}
	return w
}

// rowsWritten is, on PostgreSQL, the number of row versions in both tables written by
// transactions after the start (inserts and updates; nothing is deleted in these tests); on
// MariaDB, the change of the rows that table handlers wrote, updated and deleted, for every
// table and session (the reads of the test write nothing).
func (w *writeCount) rowsWritten() int64 {
	w.t.Helper()
	var n int64
	if w.srv.Driver == sqlbackend.DriverPostgres {
		// xmin is a 32-bit transaction id; txid_current() adds an epoch that is 0 on a new server.
		err := w.db.QueryRowContext(w.t.Context(), "SELECT (SELECT count(*) FROM "+sqlbackend.DefaultTable+" WHERE xmin::text::bigint > $1)"+
			" + (SELECT count(*) FROM "+sqlbackend.DefaultTable+"_sessions WHERE xmin::text::bigint > $1)", w.xid).Scan(&n)
		NewWithT(w.t).Expect(err).NotTo(HaveOccurred())
		return n
	}
	return w.handlerRows() - w.handler
}

func (w *writeCount) handlerRows() int64 {
	w.t.Helper()
	rows, err := w.db.QueryContext(w.t.Context(), "SHOW GLOBAL STATUS WHERE Variable_name IN ('Handler_write', 'Handler_update', 'Handler_delete')")
	NewWithT(w.t).Expect(err).NotTo(HaveOccurred())
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var v int64
		NewWithT(w.t).Expect(rows.Scan(&name, &v)).To(Succeed())
		sum += v
	}
	NewWithT(w.t).Expect(rows.Err()).NotTo(HaveOccurred())
	return sum
}

// Renewing the session renews every lock it keeps alive, listed or not, as the kubernetes
// backend's session Lease does; a released lock is gone, not kept alive.
func TestSessionKeepsUnlistedLocks(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		b := newBackend(t, srv)
		other := newBackend(t, srv)
		listed, err := b.TryAcquire(ctx, "session/listed", "pod-a", time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		unlisted, err := b.TryAcquire(ctx, "session/unlisted", "pod-b", time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		released, err := b.TryAcquire(ctx, "session/released", "pod-c", time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Release(ctx, released)).To(Succeed())
		for range 6 { // 3 s, three times the TTL
			time.Sleep(500 * time.Millisecond)
			renewed, lost, err := b.Renew(ctx, []backends.Lease{listed}, time.Second)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lost).To(BeEmpty())
			g.Expect(renewed).To(HaveLen(1))
		}
		got, err := other.Inspect(ctx, unlisted.Key)
		g.Expect(err).NotTo(HaveOccurred(), "the session kept the unlisted lock")
		g.Expect(got.Version).To(Equal(unlisted.Version))
		g.Expect(got.ExpireTime).To(BeTemporally(">", unlisted.ExpireTime.Add(2*time.Second)))
		_, err = other.TryAcquire(ctx, unlisted.Key, "pod-rival", holdTTL)
		g.Expect(err).To(MatchError(backends.ErrLocked))
		_, err = other.Inspect(ctx, released.Key)
		g.Expect(err).To(MatchError(backends.ErrNotHeld), "a released lock is not kept alive")
		_, err = other.TryAcquire(ctx, released.Key, "pod-rival", holdTTL)
		g.Expect(err).NotTo(HaveOccurred())

		// The session stops renewing: its locks expire by TTL after its last renewal.
		g.Expect(b.Close(ctx)).To(Succeed())
		time.Sleep(1500 * time.Millisecond)
		_, err = other.TryAcquire(ctx, unlisted.Key, "pod-rival", holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
	})
}

// A lock that expired before its session was renewed again stays lost, listed or not: the
// renewal deletes it rather than revive it.
func TestSessionRenewalRevivesNothing(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		db := srv.DB()
		b := newBackend(t, srv)
		short, err := b.TryAcquire(ctx, "revive/short", "pod-a", time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		unlisted, err := b.TryAcquire(ctx, "revive/unlisted", "pod-b", time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		long, err := b.TryAcquire(ctx, "revive/long", "pod-c", holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		_, _, err = b.Renew(ctx, []backends.Lease{long}, holdTTL) // the session row exists
		g.Expect(err).NotTo(HaveOccurred())
		time.Sleep(1500 * time.Millisecond) // the short locks expire: the session was renewed too long ago

		renewed, lost, err := b.Renew(ctx, []backends.Lease{short, long}, holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(ConsistOf(short))
		g.Expect(renewed).To(HaveLen(1))
		g.Expect(renewed[0].Key).To(Equal(long.Key))
		for _, l := range []backends.Lease{short, unlisted} {
			_, err := b.Inspect(ctx, l.Key)
			g.Expect(err).To(MatchError(backends.ErrNotHeld), "%s was not revived", l.Key)
			_, found := readRaw(t, db, srv, l.Key)
			g.Expect(found).To(BeFalse(), "the renewal deleted the expired row of %s", l.Key)
		}
		_, lost, err = b.Renew(ctx, []backends.Lease{unlisted}, holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(HaveLen(1))
	})
}

// A lock about to expire is renewed by its session while another session tries to take it, round
// after round: never do both succeed.
func TestRaceRenewalAgainstTakeover(t *testing.T) {
	const rounds = 30
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		holder := newBackend(t, srv, sqlbackend.WithCallTimeout(5*time.Second))
		rival := newBackend(t, srv, sqlbackend.WithCallTimeout(5*time.Second))
		outcomes := map[string]int{}
		for round := range rounds {
			key := fmt.Sprintf("renew-race/k%d", round)
			ttl := 100 * time.Millisecond
			l, err := holder.TryAcquire(ctx, key, "holder", ttl)
			g.Expect(err).NotTo(HaveOccurred())
			_, _, err = holder.Renew(ctx, []backends.Lease{l}, ttl) // kept alive by the session from now on
			g.Expect(err).NotTo(HaveOccurred())
			time.Sleep(ttl - time.Duration(round%10)*time.Millisecond)
			var (
				renewed []backends.Lease
				taken   error
				wg      sync.WaitGroup
			)
			start := make(chan struct{})
			wg.Go(func() {
				<-start
				renewed, _, err = holder.Renew(ctx, []backends.Lease{l}, ttl)
			})
			wg.Go(func() {
				<-start
				_, taken = rival.TryAcquire(ctx, key, "rival", holdTTL)
			})
			close(start)
			wg.Wait()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(len(renewed) == 1 && taken == nil).To(BeFalse(), "round %d: the lock was renewed and taken", round)
			if taken != nil {
				g.Expect(taken).To(MatchError(backends.ErrLocked))
			}
			outcomes[fmt.Sprintf("renewed=%t taken=%t", len(renewed) == 1, taken == nil)]++
		}
		t.Logf("Outcomes: %v", outcomes)
	})
}

// Many sessions race for many expired rows at once, round after round: for every row exactly one
// wins, the row names it, and its hold is new.
func TestRaceForExpiredRows(t *testing.T) {
	const (
		rounds   = 10
		keys     = 8
		racers   = 6
		sessions = 4
	)
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		db := srv.DB()
		ss := make([]*sqlbackend.Backend, sessions)
		for i := range ss {
			ss[i] = newBackend(t, srv, sqlbackend.WithCallTimeout(5*time.Second)) // the machine is shared
		}
		prev := map[string]string{}
		for k := range keys {
			key := fmt.Sprintf("race/k%d", k)
			l, err := ss[0].TryAcquire(ctx, key, "first", holdTTL)
			g.Expect(err).NotTo(HaveOccurred())
			prev[key] = l.Version
		}
		for round := range rounds {
			for k := range keys {
				expireRow(t, db, srv, fmt.Sprintf("race/k%d", k))
			}
			type result struct {
				lease backends.Lease
				err   error
			}
			results := make([][]result, keys)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for k := range keys {
				results[k] = make([]result, racers)
				for i := range racers {
					wg.Go(func() {
						<-start
						l, err := ss[(k+i)%sessions].TryAcquire(ctx, fmt.Sprintf("race/k%d", k), fmt.Sprintf("r%d-k%d-racer%d", round, k, i), holdTTL)
						results[k][i] = result{l, err}
					})
				}
			}
			close(start)
			wg.Wait()
			for k := range keys {
				key := fmt.Sprintf("race/k%d", k)
				var winners []backends.Lease
				for _, r := range results[k] {
					if r.err == nil {
						winners = append(winners, r.lease)
						continue
					}
					g.Expect(r.err).To(MatchError(backends.ErrLocked), "round %d, %s: losers are told the lock is held", round, key)
				}
				g.Expect(winners).To(HaveLen(1), "round %d, %s: exactly one winner", round, key)
				row, _ := readRaw(t, db, srv, key)
				g.Expect(row.Holder).To(Equal(winners[0].Identity), "round %d, %s: the row names the winner", round, key)
				g.Expect(winners[0].Version).NotTo(Equal(prev[key]), "round %d, %s: a new hold", round, key)
				prev[key] = winners[0].Version
			}
		}
	})
}

// Only the database's clock decides expiry: a controller clock ten years ahead does not free a
// lock, one ten years behind does not keep an expired lock, and a row the database sees expired
// is free whatever the controller's clock says.
func TestDatabaseClockDecides(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		ctx := t.Context()
		db := srv.DB()
		realNow := time.Now()
		for name, offset := range map[string]time.Duration{
			"ControllerClockAhead":  10 * 365 * 24 * time.Hour,
			"ControllerClockBehind": -10 * 365 * 24 * time.Hour,
		} {
			t.Run(name, func(t *testing.T) {
				g := NewWithT(t)
				fake := clocktesting.NewFakeClock(realNow.Add(offset))
				b := newBackend(t, srv, sqlbackend.WithClock(fake))
				other := newBackend(t, srv, sqlbackend.WithClock(clocktesting.NewFakeClock(realNow.Add(-offset))))

				held, err := b.TryAcquire(ctx, "clock/"+name+"/held", "pod-a", holdTTL)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(held.ExpireTime).To(BeTemporally("~", time.Now().Add(holdTTL), 10*time.Second), "expiry is the database's now plus the TTL")
				fake.Step(offset) // the controller's clock jumps on, twice as far
				_, err = other.TryAcquire(ctx, "clock/"+name+"/held", "pod-b", holdTTL)
				g.Expect(err).To(MatchError(backends.ErrLocked), "the lock has not expired by the database's clock")
				_, err = b.Inspect(ctx, "clock/"+name+"/held")
				g.Expect(err).NotTo(HaveOccurred())
				renewed, lost, err := b.Renew(ctx, []backends.Lease{held}, holdTTL)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(lost).To(BeEmpty())
				g.Expect(renewed).To(HaveLen(1))

				short, err := b.TryAcquire(ctx, "clock/"+name+"/short", "pod-a", time.Second)
				g.Expect(err).NotTo(HaveOccurred())
				time.Sleep(1500 * time.Millisecond) // real time: the database's clock moves on
				_, err = b.Inspect(ctx, "clock/"+name+"/short")
				g.Expect(err).To(MatchError(backends.ErrNotHeld), "the lock has expired by the database's clock")
				_, lost, err = b.Renew(ctx, []backends.Lease{short}, holdTTL)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(lost).To(HaveLen(1), "an expired lock is not revived")
				_, err = other.TryAcquire(ctx, "clock/"+name+"/short", "pod-b", holdTTL)
				g.Expect(err).NotTo(HaveOccurred())

				// The database says the long hold has expired: it is free at once, though no
				// controller clock has reached its expiry.
				expireRow(t, db, srv, "clock/"+name+"/held")
				_, err = other.TryAcquire(ctx, "clock/"+name+"/held", "pod-b", holdTTL)
				g.Expect(err).NotTo(HaveOccurred())
				_, lost, err = b.Renew(ctx, renewed, holdTTL)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(lost).To(HaveLen(1))
			})
		}
	})
}

// Rows are durable: a database killed while locks are held comes back with them, and the sessions
// reconnect by themselves to renew, release and refuse as before.
func TestDatabaseRestart(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		b := newBackend(t, srv)
		other := newBackend(t, srv)
		var held []backends.Lease
		for i := range 5 {
			l, err := b.TryAcquire(ctx, fmt.Sprintf("restart/k%d", i), fmt.Sprintf("pod-%d", i), holdTTL)
			g.Expect(err).NotTo(HaveOccurred())
			held = append(held, l)
		}
		g.Expect(other.Ping(ctx)).To(Succeed()) // both pools have connections to lose

		srv.Kill()
		start := time.Now()
		_, _, err := b.Renew(ctx, held, holdTTL)
		g.Expect(err).To(HaveOccurred(), "a dead database renews nothing")
		g.Expect(err).NotTo(MatchError(backends.ErrLocked))
		_, err = other.TryAcquire(ctx, "restart/new", "pod-new", holdTTL)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err).NotTo(MatchError(backends.ErrLocked))
		g.Expect(other.Ping(ctx)).NotTo(Succeed())
		g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second), "calls to a dead database fail fast")

		srv.Restart()
		var renewed, lost []backends.Lease
		g.Eventually(func() error {
			renewed, lost, err = b.Renew(ctx, held, holdTTL)
			return err
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "the session reconnects")
		g.Expect(lost).To(BeEmpty(), "no lock was lost with the restart")
		g.Expect(renewed).To(HaveLen(len(held)))
		for i, l := range renewed {
			g.Expect(l.Version).To(Equal(held[i].Version), "the holds go on")
		}
		g.Eventually(func() error { return other.Ping(ctx) }, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		_, err = other.TryAcquire(ctx, held[0].Key, "pod-rival", holdTTL)
		g.Expect(err).To(MatchError(backends.ErrLocked))
		got, err := other.Inspect(ctx, held[1].Key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Identity).To(Equal(held[1].Identity))
		g.Expect(b.Release(ctx, held[2])).To(Succeed())
		_, err = other.TryAcquire(ctx, held[2].Key, "pod-rival", holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
	})
}

// Close keeps the session's locks until their TTL; the session refuses calls afterwards.
func TestCloseKeepsLocks(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		b := newBackend(t, srv)
		l, err := b.TryAcquire(ctx, "close/k", "pod-a", holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Close(ctx)).To(Succeed())
		g.Expect(b.Close(ctx)).To(Succeed(), "closing twice is fine")
		_, err = b.TryAcquire(ctx, "close/other", "pod-a", holdTTL)
		g.Expect(err).To(MatchError(ContainSubstring("closed")))

		got, err := newBackend(t, srv).Inspect(ctx, "close/k")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Version).To(Equal(l.Version))
	})
}

// New refuses configurations that cannot work, without connecting.
func TestNewValidates(t *testing.T) {
	const pg = "postgres://u:p@127.0.0.1:5432/db"
	for name, tc := range map[string]struct {
		cfg  sqlbackend.Config
		opts []sqlbackend.Option
	}{
		"unknown driver":    {cfg: sqlbackend.Config{Driver: "sqlite", DSN: pg}},
		"no DSN":            {cfg: sqlbackend.Config{Driver: sqlbackend.DriverPostgres}},
		"bad table":         {cfg: sqlbackend.Config{Driver: sqlbackend.DriverPostgres, DSN: pg, Table: "locks; DROP TABLE x"}},
		"digit table":       {cfg: sqlbackend.Config{Driver: sqlbackend.DriverPostgres, DSN: pg, Table: "1locks"}},
		"MySQL without db":  {cfg: sqlbackend.Config{Driver: sqlbackend.DriverMySQL, DSN: "u:p@tcp(127.0.0.1:3306)/"}},
		"zero call timeout": {cfg: sqlbackend.Config{Driver: sqlbackend.DriverPostgres, DSN: pg}, opts: []sqlbackend.Option{sqlbackend.WithCallTimeout(0)}},
		"zero pool":         {cfg: sqlbackend.Config{Driver: sqlbackend.DriverPostgres, DSN: pg}, opts: []sqlbackend.Option{sqlbackend.WithMaxOpenConns(0)}},
		"nil clock":         {cfg: sqlbackend.Config{Driver: sqlbackend.DriverPostgres, DSN: pg}, opts: []sqlbackend.Option{sqlbackend.WithClock(nil)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sqlbackend.New(tc.cfg, tc.opts...)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

// A dead address fails calls quickly, with the address and without the password.
func TestDeadAddress(t *testing.T) {
	for driver, dsn := range map[string]string{
		sqlbackend.DriverPostgres: "postgres://lockwarden:Dead-Pa55word@127.0.0.1:1/lockwarden?sslmode=disable",
		sqlbackend.DriverMySQL:    "lockwarden:Dead-Pa55word@tcp(127.0.0.1:1)/lockwarden",
	} {
		t.Run(driver, func(t *testing.T) {
			g := NewWithT(t)
			b, err := sqlbackend.New(sqlbackend.Config{Driver: driver, DSN: dsn}, sqlbackend.WithCallTimeout(500*time.Millisecond))
			g.Expect(err).NotTo(HaveOccurred())
			defer b.Close(context.Background())
			start := time.Now()
			err = b.Ping(t.Context())
			g.Expect(err).To(MatchError(ContainSubstring("127.0.0.1:1")))
			g.Expect(err.Error()).NotTo(ContainSubstring("Dead-Pa55word"))
			_, err = b.TryAcquire(t.Context(), "dead/k", "pod-a", holdTTL)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err).NotTo(MatchError(backends.ErrLocked))
			g.Expect(err.Error()).NotTo(ContainSubstring("Dead-Pa55word"))
			g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
		})
	}
}
