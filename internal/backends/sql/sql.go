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

// Package sqlbackend keeps locks in a table of a PostgreSQL or MySQL/MariaDB database, one row
// per lock key, kept alive by one row per controller session in a second table. (The directory is sql, after the backend type; the package is sqlbackend, so that
// it does not shadow database/sql.) PostgreSQL is reached with github.com/jackc/pgx/v5 through
// its database/sql adapter, MySQL and MariaDB with github.com/go-sql-driver/mysql; both dialects
// share this code, and differ only in their statements.
//
// # The tables
//
// The lock table (Config.Table, default DefaultTable), its sessions table (the same name with
// "_sessions") and its places table (with "_places") are created on first use by each session, if
// one is missing, from the DDL in ddl_postgres.sql or ddl_mysql.sql; a DBA may create them
// beforehand instead, so that lockwarden needs only SELECT, INSERT, UPDATE and DELETE on them. Each
// lock row holds a lock: its key, the holder identity, a random grant id (Lease.Version, new for
// every hold and kept while the hold lasts), the session that keeps it alive, the TTL, when the
// hold began and the row's own expiry (its last acquire plus the TTL). Each session row holds a
// controller session's id and when it was last renewed. Rows are deleted on release, and expired
// rows are taken over by the next acquire of their key. Shared locks (backends.Sharer) keep a row
// per place in the places table and leave a marker in the lock table; places.go says how, and why
// exclusive and shared holds exclude each other atomically.
//
// # Session semantics
//
// As in the kubernetes backend, one row per controller session keeps its locks alive: a lock is
// held while GREATEST(its expires_at, its session's renewed_at + its TTL) is after the database's
// now; a missing session row counts as never renewed. Renewing the session renews every lock
// whose row names it, not only the leases passed to Renew: a lock stays held while the session is
// renewed more often than the lock's TTL, and a caller that no longer wants a lock must Release
// it (Release deletes the row, so a released lock is not kept alive). A lock whose row names
// another session (a restarted controller's, or another replica's) moves into this session when
// this session acquires it (TryAcquire by the same identity, as reentrancy) or renews it (one
// UPDATE of that row, once), as does a lock renewed with another TTL than the row's. Close leaves
// the session row: its locks expire by TTL after the session's last renewal, unless another
// session resumes them. Session rows are never deleted (one small row per controller session).
//
// A renewal must not revive a lock that has already expired: before the session's renewed_at
// moves on, its locks that have expired are deleted (as a release would), in the same statement
// on PostgreSQL, and on MySQL by a DELETE sent only when the renewal finds such locks. Acquires
// and releases that judge a lock by its session read the session row with a shared lock, and a
// renewal locks it exclusively, so that no lock is taken on the strength of a session time that a
// concurrent renewal is replacing; Renew reads the leases back only after its write committed,
// and so sees any takeover that came first.
//
// # Time
//
// Every time that decides a lock is the database's: expiry and renewal times are now()
// (PostgreSQL) or UTC_TIMESTAMP(6) (MySQL), plus the TTL, and compared with the same clock, inside
// the statement that acts on them. The controller's clock is never consulted, so a controller whose clock is wrong
// neither frees nor keeps locks early; Lease times (AcquireTime, ExpireTime, LockedError's
// ExpireTime) are the database's too. WithClock exists for symmetry with the other backends and
// changes nothing; the tests prove it.
//
// # Statements
//
// TryAcquire is one upsert that inserts a missing row, or takes the existing one only if it is the
// identity's own or has expired, and the key has no live shared place (acquire_postgres.sql,
// acquire_mysql.sql): exactly one of any number of racing sessions wins. On PostgreSQL it returns
// the row (RETURNING); MySQL reads it back with a second statement, and so does PostgreSQL when the
// key is held by another identity, to name the holder. TryAcquireShared is one transaction
// (places.go). Renew is two statements whatever the number and kinds of leases: one write that
// renews the session (renew_postgres.sql, renew_mysql.sql) and writes only the session row, and one
// read of the leases' rows and places with their sessions (on PostgreSQL the keys travel as arrays;
// on MySQL in IN lists, one read per MiB of keys). Release is one owner-checked DELETE (plus a
// SELECT when it deletes nothing, to tell a free key from another holder's). Statements reports the
// number of statements a session has sent; each is one round trip (MySQL parameters are
// interpolated by the client, PostgreSQL's statements are prepared once per connection).
//
// # Connections and secrets
//
// A session is a small connection pool (DefaultMaxOpenConns). Each call runs under a timeout far
// below any TTL (DefaultCallTimeout); PostgreSQL also gets it as statement_timeout and
// lock_timeout, MySQL as a one-second innodb_lock_wait_timeout. The DSN and its password never
// appear in errors: driver errors are scrubbed of both before they are wrapped.
//
// # What it does not promise
//
// The database must be a single primary: a lock is as durable as the row, so it survives a
// restart of the database, but an asynchronous replica promoted after a failover may not have the
// latest grants and renewals, and can hand a lock to a second holder. Holders must use fencing
// tokens.
package sqlbackend

import (
	"context"
	"crypto/rand"
	dbsql "database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// Drivers: the values of LockBackend spec.sql.driver.
const (
	// DriverPostgres speaks to PostgreSQL.
	DriverPostgres = "postgres"
	// DriverMySQL speaks to MySQL and MariaDB.
	DriverMySQL = "mysql"
)

// DefaultTable is the lock table's name when Config.Table is empty, as in the LockBackend API.
const DefaultTable = "lockwarden_locks"

// DefaultCallTimeout bounds each call (all its statements, and connecting) unless WithCallTimeout
// says otherwise: far below the minimum lock TTL of 5 s, far above a healthy database's
// milliseconds.
const DefaultCallTimeout = time.Second

// DefaultMaxOpenConns is the size of a session's connection pool unless WithMaxOpenConns says
// otherwise. Calls are single short statements, so a few connections serve many locks.
const DefaultMaxOpenConns = 4

// PingKeyPrefix starts the key of the probe row that Ping writes and deletes.
const PingKeyPrefix = "lockwarden-ping:"

// Limits on keys and identities: the MySQL columns are VARBINARY(1024), and PostgreSQL refuses
// index entries of more than about 2.7 kB. lockwarden's keys are at most 512 characters and its
// identities at most 253.
const (
	MaxKeyBytes      = 1024
	MaxIdentityBytes = 1024
)

// mysqlReadBytes bounds the bytes of keys that one MySQL read after a renewal names, far below
// max_allowed_packet (4 MiB in MySQL 5.7, more in later versions and MariaDB); more keys take
// more reads.
const mysqlReadBytes = 1 << 20

// sessionTableSuffix makes the sessions table's name from the lock table's.
const sessionTableSuffix = "_sessions"

// tableName is what Config.Table may be: a plain identifier, short enough that the sessions
// table's name (the suffix added) stays within the 63 characters PostgreSQL allows.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,53}$`)

// Config says how to reach the database.
type Config struct {
	// Driver is DriverPostgres or DriverMySQL.
	Driver string
	// DSN is the data source name in the driver's format: a postgres:// URL or key=value string
	// for PostgreSQL, user:password@tcp(host:port)/database?params for MySQL. It never appears in
	// errors.
	DSN string
	// Table is the lock table's name, a plain identifier; DefaultTable when empty.
	Table string
}

// Option configures New.
type Option func(*Backend)

// WithClock sets the controller's clock. The SQL backend decides and reports every time by the
// database's clock, so this changes nothing; it exists so that callers can configure every
// backend alike. Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(b *Backend) { b.clock = c }
}

// WithCallTimeout sets the timeout of each call, connecting included. Default DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option {
	return func(b *Backend) { b.callTimeout = d }
}

// WithMaxOpenConns sets the size of the session's connection pool. Default DefaultMaxOpenConns.
func WithMaxOpenConns(n int) Option {
	return func(b *Backend) { b.maxOpenConns = n }
}

// Backend is one session with a database. It is safe for concurrent use.
type Backend struct {
	dialect      *dialect
	table        string
	clock        clock.PassiveClock
	callTimeout  time.Duration
	maxOpenConns int
	// target names the database in errors: driver, address, database; never credentials.
	target string
	// redact scrubs the DSN and password from errors.
	redact *redactor
	// session identifies this session in the rows it writes.
	session string
	// pingKey is this session's probe key, so that sessions never share one.
	pingKey string

	db *dbsql.DB
	// statements counts statements sent (see Statements).
	statements atomic.Int64
	closed     atomic.Bool

	// schemaMu guards schemaReady: whether this session has found or created the table.
	schemaMu    sync.Mutex
	schemaReady bool
}

var _ backends.Backend = (*Backend)(nil)

// New returns a session with the database that cfg.DSN names. It checks the configuration but
// does not connect: the first call does, and Ping checks that the database can be reached,
// authenticated with and written to.
func New(cfg Config, opts ...Option) (*Backend, error) {
	b := &Backend{
		table:        cfg.Table,
		clock:        clock.RealClock{},
		callTimeout:  DefaultCallTimeout,
		maxOpenConns: DefaultMaxOpenConns,
	}
	for _, opt := range opts {
		opt(b)
	}
	if b.table == "" {
		b.table = DefaultTable
	}
	switch {
	case cfg.Driver != DriverPostgres && cfg.Driver != DriverMySQL:
		return nil, fmt.Errorf("sql backend: the driver must be %q or %q, got %q", DriverPostgres, DriverMySQL, cfg.Driver)
	case cfg.DSN == "":
		return nil, errors.New("sql backend: the DSN is empty")
	case !tableName.MatchString(b.table):
		return nil, fmt.Errorf("sql backend: the table name %q is not a plain SQL identifier of at most 54 characters (letters, digits and underscores, not starting with a digit; the sessions table adds %q)", b.table, sessionTableSuffix)
	case b.clock == nil:
		return nil, errors.New("sql backend: the clock must not be nil")
	case b.callTimeout <= 0:
		return nil, fmt.Errorf("sql backend: the call timeout must be positive, got %s", b.callTimeout)
	case b.maxOpenConns <= 0:
		return nil, fmt.Errorf("sql backend: the connection pool size must be positive, got %d", b.maxOpenConns)
	}
	var (
		c   connection
		err error
	)
	if cfg.Driver == DriverPostgres {
		b.dialect = postgres(b.table)
		c, err = openPostgres(cfg.DSN, b.callTimeout)
	} else {
		b.dialect = mysqlDialect(b.table)
		c, err = openMySQL(cfg.DSN, b.callTimeout)
	}
	if err != nil {
		// The DSN did not parse, so its password is unknown: scrub the DSN and anything that
		// looks like a password in it.
		return nil, fmt.Errorf("sql backend (%s): the DSN is not valid: %w", cfg.Driver, newRedactor(cfg.DSN, "").scrubDSN(err))
	}
	b.db, b.target, b.redact = c.db, cfg.Driver+" "+c.target, newRedactor(cfg.DSN, c.password)
	b.db.SetMaxOpenConns(b.maxOpenConns)
	b.db.SetMaxIdleConns(b.maxOpenConns)
	b.db.SetConnMaxLifetime(5 * time.Minute) // follow DNS changes after a failover
	b.db.SetConnMaxIdleTime(time.Minute)
	b.session = randomHex(8)
	b.pingKey = PingKeyPrefix + b.session
	return b, nil
}

// connection is an opened (not yet connected) pool, what errors call it, and the password to
// scrub from them.
type connection struct {
	db       *dbsql.DB
	target   string
	password string
}

// Statements returns how many statements the session has sent, failed ones included. Each is one
// round trip to the database; so is a PostgreSQL batch of statements, which counts once.
func (b *Backend) Statements() int64 { return b.statements.Load() }

// Table is the name of the lock table.
func (b *Backend) Table() string { return b.table }

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	p := make([]byte, n)
	_, _ = rand.Read(p) // crypto/rand.Read never fails
	return fmt.Sprintf("%x", p)
}

// newGrant returns a random positive grant id.
func newGrant() int64 {
	p := make([]byte, 8)
	_, _ = rand.Read(p)
	g := int64(binary.BigEndian.Uint64(p) & math.MaxInt64)
	if g == 0 {
		g = 1
	}
	return g
}

// row is a lock row as read back, with its session's renewal.
type row struct {
	key     string
	holder  string
	grant   int64
	session string
	ttl     time.Duration
	// acquired: when the hold began.
	acquired time.Time
	// expires: the later of the row's own expiry and its session's renewal plus the TTL.
	expires time.Time
	// live: expires is after the database's now.
	live bool
	// shared: the row is a place (places.go), not a lock row.
	shared bool
}

func (r row) lease(key string) backends.Lease {
	return backends.Lease{
		Shared:      r.shared,
		Key:         key,
		Identity:    r.holder,
		TTL:         r.ttl,
		AcquireTime: r.acquired,
		ExpireTime:  r.expires,
		Version:     strconv.FormatInt(r.grant, 10),
	}
}

// scanRow reads the columns rowColumns names (holder, grant_id, session_id, ttl_us,
// acquired_at, expiry, live), after the leading columns that lead points to.
func scanRow(s interface{ Scan(...any) error }, lead ...any) (row, error) {
	var (
		r     row
		ttlUs int64
	)
	dest := append(append([]any{}, lead...), &r.holder, &r.grant, &r.session, &ttlUs, &r.acquired, &r.expires, &r.live)
	if err := s.Scan(dest...); err != nil {
		return row{}, err
	}
	r.ttl = time.Duration(ttlUs) * time.Microsecond
	return r, nil
}

// begin starts a call: it refuses calls on a closed session, bounds the call with the timeout,
// and makes sure the table exists.
func (b *Backend) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if b.closed.Load() {
		return nil, nil, fmt.Errorf("sql backend (%s): session is closed", b.target)
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	if err := b.ensureTable(ctx); err != nil {
		cancel()
		return nil, nil, err
	}
	return ctx, cancel, nil
}

// ensureTable creates the lock table, the sessions table, the places table and their indexes if
// a table is missing, once per session. Tables that exist are not created again, so that a user
// without the CREATE privilege can use tables a DBA made; a database made by an earlier version
// gets its places table this way.
func (b *Backend) ensureTable(ctx context.Context) error {
	b.schemaMu.Lock()
	defer b.schemaMu.Unlock()
	if b.schemaReady {
		return nil
	}
	exists, err := b.tablesExist(ctx)
	if err != nil {
		return err
	}
	if !exists {
		for _, stmt := range b.dialect.ddl {
			if _, err := b.exec(ctx, "creating the lock table "+b.table+", its sessions table "+sessionTable(b.table)+
				" and its places table "+placeTable(b.table), stmt); err != nil {
				// Another session may have created them meanwhile.
				if again, err2 := b.tablesExist(ctx); err2 != nil || !again {
					return fmt.Errorf("%w (the user needs the CREATE privilege once, or a DBA creates the tables beforehand)", err)
				}
				break
			}
		}
	}
	b.schemaReady = true
	return nil
}

// tablesExist tells whether the lock table, the sessions table and the places table all exist.
func (b *Backend) tablesExist(ctx context.Context) (bool, error) {
	for _, table := range []string{b.table, sessionTable(b.table), placeTable(b.table)} {
		var exists bool
		if err := b.queryRow(ctx, b.dialect.tableExists, table).Scan(&exists); err != nil {
			return false, b.wrap("looking for the table "+table, err)
		}
		if !exists {
			return false, nil
		}
	}
	return true, nil
}

// exec sends one statement, again if the database aborted it for a deadlock.
func (b *Backend) exec(ctx context.Context, op, query string, args ...any) (dbsql.Result, error) {
	for {
		b.statements.Add(1)
		res, err := b.db.ExecContext(ctx, query, args...)
		if err == nil {
			return res, nil
		}
		if !b.dialect.retryable(err) || ctx.Err() != nil {
			return nil, b.wrap(op, err)
		}
	}
}

// query sends one statement that returns rows, again if the database aborted it for a deadlock.
func (b *Backend) query(ctx context.Context, op, query string, args ...any) (*dbsql.Rows, error) {
	for {
		b.statements.Add(1)
		rows, err := b.db.QueryContext(ctx, query, args...)
		if err == nil {
			return rows, nil
		}
		if !b.dialect.retryable(err) || ctx.Err() != nil {
			return nil, b.wrap(op, err)
		}
	}
}

// queryRow sends one statement that returns at most one row, again if the database aborted it
// for a deadlock; errors come with Scan, unwrapped.
func (b *Backend) queryRow(ctx context.Context, query string, args ...any) *dbsql.Row {
	for {
		b.statements.Add(1)
		r := b.db.QueryRowContext(ctx, query, args...)
		if err := r.Err(); err != nil && b.dialect.retryable(err) && ctx.Err() == nil {
			continue
		}
		return r
	}
}

// wrap names the database and the operation, and scrubs the DSN and password from err.
func (b *Backend) wrap(op string, err error) error {
	return fmt.Errorf("sql backend (%s): %s: %w", b.target, op, b.redact.scrub(err))
}

// readRow reads key's row; found is false when there is none.
func (b *Backend) readRow(ctx context.Context, op, key string) (r row, found bool, err error) {
	r, err = scanRow(b.queryRow(ctx, b.dialect.selectRow, key))
	switch {
	case errors.Is(err, dbsql.ErrNoRows):
		return row{}, false, nil
	case err != nil:
		return row{}, false, b.wrap(op, err)
	}
	r.key = key
	return r, true, nil
}

// TryAcquire takes key for identity, or, if identity already holds it, extends the hold and
// returns it as it began: one statement on PostgreSQL, two on MySQL, plus one to name the holder
// when another identity holds the key or places of it (the error is then a
// *backends.LockedError with the holder's expiry by the database's clock).
func (b *Backend) TryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	ctx, cancel, err := b.begin(ctx)
	if err != nil {
		return backends.Lease{}, err
	}
	defer cancel()
	return b.tryAcquire(ctx, key, identity, ttl)
}

func (b *Backend) tryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	op := "acquiring " + strconv.Quote(key)
	ttlUs := ttl.Microseconds()
	if ttlUs <= 0 {
		ttlUs = 1
	}
	// A key that another identity holds, seen after the acquire, may have expired or been
	// released in between, and on PostgreSQL the row may have changed while the statement waited
	// for it (acquire_postgres.sql): try again, a few times.
	for range 3 {
		grant := newGrant()
		var r row
		if b.dialect.acquireReturns {
			r.ttl = time.Duration(ttlUs) * time.Microsecond
			err := b.queryRow(ctx, b.dialect.acquire, key, identity, grant, b.session, ttlUs).Scan(&r.grant, &r.acquired, &r.expires)
			switch {
			case err == nil:
				r.key, r.holder, r.live = key, identity, true
				l := r.lease(key)
				l.TTL = ttl
				return l, nil
			case !errors.Is(err, dbsql.ErrNoRows):
				return backends.Lease{}, b.wrap(op, err)
			}
		} else {
			if _, err := b.exec(ctx, op, b.dialect.acquire, key, identity, grant, b.session, ttlUs, ttlUs); err != nil {
				return backends.Lease{}, err
			}
		}
		// MySQL reads back what its upsert did; PostgreSQL, which got no row back, who holds the
		// key.
		rows, err := b.holdsOf(ctx, op, key)
		if err != nil {
			return backends.Lease{}, err
		}
		own, locked := afterRefusal(key, liveHolders(key, rows), identity, false)
		switch {
		case own != nil && !b.dialect.acquireReturns:
			l := *own
			l.TTL = ttl
			return l, nil
		case locked != nil:
			return backends.Lease{}, locked
		}
	}
	return backends.Lease{}, &backends.LockedError{Key: key}
}

// Renew renews this session, and with it every lock and shared place the session keeps alive,
// listed or not (see Session semantics in the package doc); then it reads the listed leases back,
// exclusive and shared alike (a shared lease is its identity's place). A lease comes back renewed
// if its row still names its identity and grant (any grant when Version is empty), is kept alive
// by this session with this TTL, and had not expired when the session was renewed. A live lease
// of the identity kept alive by another session (a restarted controller's), or with another TTL,
// is moved into this session with the new TTL, one statement per lease, once. A lease whose key
// is free, expired or held by another identity or hold comes back in lost, and its row is not
// revived.
//
// Two statements whatever the number and kinds of leases (a MySQL read names at most a MiB of
// keys), and one row written: the session's.
func (b *Backend) Renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) (renewed, lost []backends.Lease, err error) {
	if err := checkTTL(ttl); err != nil {
		return nil, nil, err
	}
	var ask []backends.Lease
	for _, l := range leases {
		if l.Key == "" || l.Identity == "" {
			lost = append(lost, l) // nothing holds an empty key for an empty identity
			continue
		}
		ask = append(ask, l)
	}
	if len(ask) == 0 {
		return nil, lost, nil
	}
	ctx, cancel, err := b.begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	if err := b.renewSession(ctx, b.session); err != nil {
		return nil, nil, err
	}
	lockKeys, placeKeys := distinctKeys(ask)
	set, err := b.dialect.readHolds(ctx, b, lockKeys, placeKeys)
	if err != nil {
		return nil, nil, err
	}
	ttlUs := max(ttl.Microseconds(), 1)
	for _, l := range ask {
		r, found := set.find(l)
		switch judgeRenewal(l, r, found, b.session, time.Duration(ttlUs)*time.Microsecond) {
		case renewLost:
			lost = append(lost, l)
			continue
		case renewMove:
			var ok bool
			if r, ok, err = b.adopt(ctx, l, ttlUs); err != nil {
				return nil, nil, err
			}
			if !ok {
				lost = append(lost, l)
				continue
			}
		}
		l.TTL, l.AcquireTime, l.ExpireTime, l.Version = ttl, r.acquired, r.expires, strconv.FormatInt(r.grant, 10)
		renewed = append(renewed, l)
	}
	return renewed, lost, nil
}

// renewSession renews a session's row: one statement, and on MySQL, when some lock or place of
// the session has expired, DELETEs of the expired locks and places before the renewal is sent
// again.
func (b *Backend) renewSession(ctx context.Context, session string) error {
	for range 3 {
		res, err := b.exec(ctx, "renewing the session", b.dialect.bump, b.dialect.bumpArgs(session)...)
		if err != nil {
			return err
		}
		if len(b.dialect.cleanup) == 0 {
			return nil
		}
		if n, err := res.RowsAffected(); err == nil && n > 0 {
			return nil
		}
		for _, stmt := range b.dialect.cleanup {
			if _, err := b.exec(ctx, "deleting the session's expired locks", stmt, session); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("sql backend (%s): the session's locks kept expiring while it was renewed", b.target)
}

// adopt moves a live lease of its identity (its key's lock row, or its place when it is shared)
// into this session, with the TTL given; ok is false when the row no longer holds the lease.
func (b *Backend) adopt(ctx context.Context, l backends.Lease, ttlUs int64) (row, bool, error) {
	op := "moving " + strconv.Quote(l.Key) + " into this session"
	grant := grantOf(l.Version)
	stmt := b.dialect.adopt
	if l.Shared {
		stmt = b.dialect.places.adopt
	}
	var (
		r   row
		err error
	)
	if b.dialect.adoptReturns {
		r, err = scanRow(b.queryRow(ctx, stmt, b.session, ttlUs, l.Key, l.Identity, grant))
		if errors.Is(err, dbsql.ErrNoRows) {
			return row{}, false, nil
		}
		if err != nil {
			return row{}, false, b.wrap(op, err)
		}
	} else {
		res, err := b.exec(ctx, op, stmt, b.session, ttlUs, l.Key, l.Identity, grant, grant)
		if err != nil {
			return row{}, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return row{}, false, nil
		}
		rows, err := b.holdsOf(ctx, op, l.Key)
		if err != nil {
			return row{}, false, err
		}
		var found bool
		if r, found = findHold(rows, l.Shared, l.Identity); !found {
			return row{}, false, nil
		}
	}
	r.shared = l.Shared
	held := r.live && r.holder == l.Identity && grantMatches(l.Version, r.grant) && r.session == b.session
	return r, held, nil
}

// grantOf is the grant id a lease's Version names; 0 (any hold of the identity) when it names
// none.
func grantOf(version string) int64 {
	g, err := strconv.ParseInt(version, 10, 64)
	if err != nil || g < 0 {
		return 0
	}
	return g
}

func grantMatches(version string, grant int64) bool {
	g := grantOf(version)
	return g == 0 || g == grant
}

// Release deletes the key's row if lease.Identity holds it, or if it has expired, in one
// statement. When that deletes nothing, a second statement tells a free key (released: nil) from
// one another identity holds (an error wrapping backends.ErrNotHeld, and the row is untouched).
// A shared lease deletes its identity's place alone, in one statement, and is released (nil)
// whoever holds the other places.
func (b *Backend) Release(ctx context.Context, lease backends.Lease) error {
	if lease.Key == "" || lease.Identity == "" {
		return fmt.Errorf("sql backend: cannot release a lease without key and identity (key %q, identity %q)", lease.Key, lease.Identity)
	}
	ctx, cancel, err := b.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if lease.Shared {
		return b.releasePlace(ctx, lease.Key, lease.Identity)
	}
	return b.release(ctx, lease.Key, lease.Identity)
}

func (b *Backend) release(ctx context.Context, key, identity string) error {
	op := "releasing " + strconv.Quote(key)
	for range 3 {
		res, err := b.exec(ctx, op, b.dialect.release, key, identity)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n > 0 {
			return nil
		}
		r, found, err := b.readRow(ctx, op, key)
		if err != nil {
			return err
		}
		switch {
		case !found || !r.live: // a places marker too: the exclusive hold is free
			return nil
		case r.holder != identity:
			return fmt.Errorf("sql backend (%s): lock %q is held by %q, not %q: %w", b.target, key, r.holder, identity, backends.ErrNotHeld)
		}
		// The identity took the key again between the two statements: delete again.
	}
	return fmt.Errorf("sql backend (%s): lock %q kept changing while it was released: %w", b.target, key, backends.ErrNotHeld)
}

// Inspect reports who holds key, as its row says, with the database's times; a key held in shared
// places reports the place of the lowest identity, with Lease.Shared set. One statement. A key
// with no live hold gives an error wrapping backends.ErrNotHeld.
func (b *Backend) Inspect(ctx context.Context, key string) (backends.Lease, error) {
	if key == "" {
		return backends.Lease{}, errors.New("sql backend: key must not be empty")
	}
	ctx, cancel, err := b.begin(ctx)
	if err != nil {
		return backends.Lease{}, err
	}
	defer cancel()
	rows, err := b.holdsOf(ctx, "inspecting "+strconv.Quote(key), key)
	if err != nil {
		return backends.Lease{}, err
	}
	holders := liveHolders(key, rows)
	if len(holders) == 0 {
		return backends.Lease{}, fmt.Errorf("sql backend (%s): lock %q: %w", b.target, key, backends.ErrNotHeld)
	}
	return holders[0], nil
}

// Ping checks that the database answers, that the session's user can log in, that the tables
// exist (creating them if one is missing), and that the user may write them: it takes, re-takes
// and releases a probe row (PingKeyPrefix and the session id), then a shared place of the same
// key (and takes and releases the row once more, which deletes the places marker), and renews
// twice and deletes a probe session of the same name, which needs SELECT, INSERT, UPDATE and
// DELETE on the three tables, as locking does. It does not renew this session. Errors name the
// database and say what failed; they never contain the DSN or the password.
func (b *Backend) Ping(ctx context.Context) error {
	ctx, cancel, err := b.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	for range 2 { // the second acquire updates the row
		if _, err := b.tryAcquire(ctx, b.pingKey, b.pingKey, 10*time.Second); err != nil {
			return fmt.Errorf("writing the probe row %q: %w", b.pingKey, err)
		}
	}
	if err := b.release(ctx, b.pingKey, b.pingKey); err != nil {
		return fmt.Errorf("deleting the probe row %q: %w", b.pingKey, err)
	}
	for range 2 { // the second acquire updates the place and the marker row
		if _, err := b.tryAcquireShared(ctx, b.pingKey, b.pingKey, 10*time.Second, 1); err != nil {
			return fmt.Errorf("writing the probe place %q: %w", b.pingKey, err)
		}
	}
	if err := b.releasePlace(ctx, b.pingKey, b.pingKey); err != nil {
		return fmt.Errorf("deleting the probe place %q: %w", b.pingKey, err)
	}
	// The marker row goes as any lock row does: taken, then released.
	if _, err := b.tryAcquire(ctx, b.pingKey, b.pingKey, 10*time.Second); err != nil {
		return fmt.Errorf("writing the probe row %q: %w", b.pingKey, err)
	}
	if err := b.release(ctx, b.pingKey, b.pingKey); err != nil {
		return fmt.Errorf("deleting the probe row %q: %w", b.pingKey, err)
	}
	for range 2 { // the second renewal updates the row
		if err := b.renewSession(ctx, b.pingKey); err != nil {
			return fmt.Errorf("writing the probe session %q: %w", b.pingKey, err)
		}
	}
	if _, err := b.exec(ctx, "deleting the probe session "+strconv.Quote(b.pingKey), b.dialect.deleteSession, b.pingKey); err != nil {
		return fmt.Errorf("deleting the probe session %q: %w", b.pingKey, err)
	}
	return nil
}

// Close ends the session and closes its connections. It leaves the session row, so that its
// locks stay until their TTL runs out from the session's last renewal (or their own later
// expiry), unless another session resumes or releases them. Calls after Close fail.
func (b *Backend) Close(context.Context) error {
	if b.closed.Swap(true) {
		return nil
	}
	if err := b.db.Close(); err != nil {
		return b.wrap("closing", err)
	}
	return nil
}

// checkArgs rejects calls that cannot be served.
func checkArgs(key, identity string, ttl time.Duration) error {
	switch {
	case key == "":
		return errors.New("sql backend: key must not be empty")
	case identity == "":
		return errors.New("sql backend: identity must not be empty")
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("sql backend: key is %d bytes long, more than %d", len(key), MaxKeyBytes)
	case len(identity) > MaxIdentityBytes:
		return fmt.Errorf("sql backend: identity is %d bytes long, more than %d", len(identity), MaxIdentityBytes)
	}
	return checkTTL(ttl)
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("sql backend: ttl must be positive, got %s", ttl)
	}
	return nil
}

// stripComments removes the comment lines of an embedded statement: the MySQL driver counts
// every question mark when it interpolates parameters, even in comments.
func stripComments(stmt string) string {
	var keep []string
	for _, line := range strings.Split(stmt, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

// forTable loads an embedded statement for the table: the files name the default table.
func forTable(stmt, table string) string {
	return strings.ReplaceAll(stripComments(stmt), DefaultTable, table)
}
