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
// out, without touching anything else.
func expireRow(t *testing.T, db *sql.DB, srv *sqltest.Server, key string) {
	t.Helper()
	shift := "now() - interval '1 second'"
	if srv.Driver != sqlbackend.DriverPostgres {
		shift = "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"
	}
	res, err := db.ExecContext(t.Context(), q(srv, "UPDATE "+sqlbackend.DefaultTable+" SET expires_at = "+shift+" WHERE lock_key = ?"), key)
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

// Renewal costs one statement on PostgreSQL and two per 500 leases on MySQL, whatever the number
// of leases, and extends every lease in the database.
func TestRenewStatements(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		db := srv.DB()
		b := newBackend(t, srv)
		leases := make([]backends.Lease, 600)
		for i := range leases {
			l, err := b.TryAcquire(ctx, fmt.Sprintf("renew-cost/k%03d", i), fmt.Sprintf("id%03d", i), 30*time.Second)
			g.Expect(err).NotTo(HaveOccurred())
			leases[i] = l
		}
		want := map[int]int64{1: 1, 50: 1, 600: 1}
		if srv.Driver == sqlbackend.DriverMySQL {
			want = map[int]int64{1: 2, 50: 2, 600: 4} // an UPDATE and a SELECT per 500 leases
		}
		for _, n := range []int{1, 50, 600} {
			updatesBefore := comUpdate(t, db, srv)
			before := b.Statements()
			renewed, lost, err := b.Renew(ctx, leases[:n], holdTTL)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lost).To(BeEmpty())
			g.Expect(renewed).To(HaveLen(n))
			g.Expect(b.Statements()-before).To(Equal(want[n]), "statements to renew %d leases", n)
			if srv.Driver == sqlbackend.DriverMySQL {
				// The server agrees: it ran one UPDATE per 500 leases.
				g.Expect(comUpdate(t, db, srv)-updatesBefore).To(Equal((want[n])/2), "UPDATE statements the server ran for %d leases", n)
			}
		}
		for _, i := range []int{0, 49, 599} {
			r, _ := readRaw(t, db, srv, leases[i].Key)
			g.Expect(r.Expires).To(BeTemporally(">", leases[i].ExpireTime.Add(20*time.Second)), "lease %d was extended to the minute", i)
		}
	})
}

// comUpdate is MariaDB's count of UPDATE statements run, by every session; 0 on PostgreSQL.
func comUpdate(t *testing.T, db *sql.DB, srv *sqltest.Server) int64 {
	t.Helper()
	if srv.Driver != sqlbackend.DriverMySQL {
		return 0
	}
	var name string
	var n int64
	err := db.QueryRowContext(t.Context(), "SHOW GLOBAL STATUS LIKE 'Com_update'").Scan(&name, &n)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return n
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
