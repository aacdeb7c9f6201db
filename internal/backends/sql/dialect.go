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
	_ "embed" // SQL statements and DDL
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/lockwarden/lockwarden/internal/backends"
)

var (
	//go:embed ddl_postgres.sql
	ddlPostgres string
	//go:embed ddl_mysql.sql
	ddlMySQL string
	//go:embed acquire_postgres.sql
	acquirePostgres string
	//go:embed acquire_mysql.sql
	acquireMySQL string
	//go:embed renew_postgres.sql
	renewPostgres string
	//go:embed renew_mysql.sql
	renewMySQL string
	//go:embed renew_cleanup_mysql.sql
	renewCleanupMySQL string
	//go:embed places_mark_postgres.sql
	placesMarkPostgres string
	//go:embed places_mark_mysql.sql
	placesMarkMySQL string
	//go:embed places_acquire_postgres.sql
	placesAcquirePostgres string
	//go:embed places_prune_mysql.sql
	placesPruneMySQL string
	//go:embed places_acquire_mysql.sql
	placesAcquireMySQL string
)

// dialect is what differs between PostgreSQL and MySQL: the statements, and how reads of many
// keys and retries work.
type dialect struct {
	// ddl creates the tables and the indexes, in order.
	ddl []string
	// tableExists answers one boolean for a table's name.
	tableExists string
	// acquire is the upsert of TryAcquire. acquireReturns: it returns grant_id, acquired_at and
	// expires_at when it took the key (PostgreSQL); else it returns nothing and the row is read
	// back (MySQL).
	acquire        string
	acquireReturns bool
	// selectRow reads holder, grant_id, session_id, ttl_us, acquired_at, expiry and liveness by
	// key.
	selectRow string
	// release deletes a key's row if the identity holds it or it has expired, unless it is a
	// places marker (places.go).
	release string
	// bump renews a session: bumpArgs are its parameters for a session id. When it changes
	// nothing (MySQL, when some lock or place of the session has expired), the cleanup
	// statements delete the session's expired locks and places and bump is sent again; cleanup
	// is empty when bump does both (PostgreSQL). Each cleanup statement takes the session id.
	bump     string
	bumpArgs func(session string) []any
	cleanup  []string
	// deleteSession deletes a session row (Ping's probe session).
	deleteSession string
	// adopt moves one live lock of the identity into this session with a new TTL (parameters:
	// session id, TTL in µs, key, identity, grant id or 0). adoptReturns: it returns the row as
	// selectRow does (PostgreSQL); else the row is read back (MySQL).
	adopt        string
	adoptReturns bool
	// readHolds reads, after a renewal, the lock rows of lockKeys and the places of placeKeys,
	// in as few statements as it can.
	readHolds func(ctx context.Context, b *Backend, lockKeys, placeKeys []string) (holdSet, error)
	// places are the statements of shared places.
	places placeDialect
	// retryable tells errors after which a statement may be sent again at once (deadlocks).
	retryable func(error) bool
}

// Liveness, in SQL, of a lock row l LEFT JOINed with its session row s: the expiry is the later
// of the row's own and its session's renewal plus the row's TTL; a missing session row counts as
// never renewed.
const (
	pgExpiry    = "GREATEST(l.expires_at, s.renewed_at + l.ttl_us * interval '1 microsecond')"
	mysqlExpiry = "GREATEST(l.expires_at, COALESCE(s.renewed_at + INTERVAL l.ttl_us MICROSECOND, l.expires_at))"
)

// rowColumns is what scanRow reads, for a lock row or place l joined with its session s.
func rowColumns(expiry, now string) string {
	return "l.holder, l.grant_id, l.session_id, l.ttl_us, l.acquired_at, " + expiry + ", " + expiry + " > " + now
}

// pgSessionExpired: the row l's session no longer keeps it alive. The session row is read FOR
// SHARE, so that a renewal of that session in flight is waited for (see acquire_postgres.sql).
func pgSessionExpired(sessions string) string {
	return "COALESCE((SELECT s.renewed_at FROM " + sessions + " AS s WHERE s.session_id = l.session_id FOR SHARE)" +
		" + l.ttl_us * interval '1 microsecond' <= now(), true)"
}

// pgAdopt moves one live row of target (a lock row or a place) into a session with a new TTL; it
// returns the row as rowColumns reads it.
func pgAdopt(target, sessions string) string {
	return "UPDATE " + target + " AS l SET session_id = $1, ttl_us = $2::bigint, expires_at = now() + $2::bigint * interval '1 microsecond'" +
		" WHERE l.lock_key = $3 AND l.holder = $4 AND ($5::bigint = 0 OR l.grant_id = $5::bigint)" +
		" AND (l.expires_at > now() OR NOT " + pgSessionExpired(sessions) + ")" +
		" RETURNING l.holder, l.grant_id, l.session_id, l.ttl_us, l.acquired_at, l.expires_at, true"
}

// mysqlSessionExpired: the row of target's session no longer keeps it alive. InnoDB reads the
// session row with a shared lock in a data-changing statement (see acquire_mysql.sql).
func mysqlSessionExpired(target, sessions string) string {
	return "COALESCE((SELECT s.renewed_at FROM " + sessions + " AS s WHERE s.session_id = " + target + ".session_id)" +
		" + INTERVAL " + target + ".ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE)"
}

// mysqlAdopt moves one live row of target (a lock row or a place) into a session with a new TTL;
// the row is read back after.
func mysqlAdopt(target, sessions string) string {
	return "UPDATE " + target + " SET session_id = ?, ttl_us = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ttl_us MICROSECOND" +
		" WHERE lock_key = ? AND holder = ? AND (? = 0 OR grant_id = ?)" + // expires_at reads the ttl_us just set
		" AND (expires_at > UTC_TIMESTAMP(6) OR NOT " + mysqlSessionExpired(target, sessions) + ")"
}

// postgres is the PostgreSQL dialect for table.
func postgres(table string) *dialect {
	sessions := sessionTable(table)
	from := " FROM " + table + " AS l LEFT JOIN " + sessions + " AS s ON s.session_id = l.session_id"
	cols := rowColumns(pgExpiry, "now()")
	// Lock rows, then places, each behind a flag that says which.
	readHolds := "SELECT false, l.lock_key, " + cols + " FROM unnest($1::text[]) AS r(lock_key) JOIN " + table +
		" AS l ON l.lock_key = r.lock_key LEFT JOIN " + sessions + " AS s ON s.session_id = l.session_id" +
		" UNION ALL SELECT true, l.lock_key, " + cols + " FROM unnest($2::text[]) AS r(lock_key) JOIN " + placeTable(table) +
		" AS l ON l.lock_key = r.lock_key LEFT JOIN " + sessions + " AS s ON s.session_id = l.session_id"
	sessionExpired := pgSessionExpired(sessions)
	return &dialect{
		ddl:            splitStatements(forTable(ddlPostgres, table)),
		tableExists:    "SELECT to_regclass($1) IS NOT NULL",
		acquire:        forTable(acquirePostgres, table),
		acquireReturns: true,
		selectRow:      "SELECT " + cols + from + " WHERE l.lock_key = $1",
		release: "DELETE FROM " + table + " AS l WHERE l.lock_key = $1 AND (l.holder = $2 OR (l.holder <> '' AND l.expires_at <= now() AND " +
			sessionExpired + "))",
		bump:          forTable(renewPostgres, table),
		bumpArgs:      func(session string) []any { return []any{session} },
		deleteSession: "DELETE FROM " + sessions + " WHERE session_id = $1",
		adopt:         pgAdopt(table, sessions),
		adoptReturns:  true,
		readHolds: func(ctx context.Context, b *Backend, lockKeys, placeKeys []string) (holdSet, error) {
			set := newHoldSet()
			rows, err := b.query(ctx, "reading renewed locks", readHolds, lockKeys, placeKeys)
			if err != nil {
				return set, err
			}
			return set, set.collect(b, rows)
		},
		places: postgresPlaces(table),
		retryable: func(err error) bool {
			var pgErr *pgconn.PgError
			// 40P01 deadlock_detected, 40001 serialization_failure: the statement was rolled
			// back and may be sent again.
			return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
		},
	}
}

// mysqlDialect is the MySQL and MariaDB dialect for table.
func mysqlDialect(table string) *dialect {
	sessions := sessionTable(table)
	from := " FROM " + table + " AS l LEFT JOIN " + sessions + " AS s ON s.session_id = l.session_id"
	placeFrom := " FROM " + placeTable(table) + " AS l LEFT JOIN " + sessions + " AS s ON s.session_id = l.session_id"
	cols := rowColumns(mysqlExpiry, "UTC_TIMESTAMP(6)")
	sessionExpired := mysqlSessionExpired(table, sessions)
	return &dialect{
		ddl:         splitStatements(forTable(ddlMySQL, table)),
		tableExists: "SELECT COUNT(*) > 0 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
		acquire:     forTable(acquireMySQL, table),
		selectRow:   "SELECT " + cols + from + " WHERE l.lock_key = ?",
		release: "DELETE FROM " + table + " WHERE lock_key = ? AND (holder = ? OR (holder <> '' AND expires_at <= UTC_TIMESTAMP(6) AND " +
			sessionExpired + "))",
		bump:          forTable(renewMySQL, table),
		bumpArgs:      func(session string) []any { return []any{session, session, session} },
		cleanup:       splitStatements(forTable(renewCleanupMySQL, table)),
		deleteSession: "DELETE FROM " + sessions + " WHERE session_id = ?",
		adopt:         mysqlAdopt(table, sessions),
		readHolds: func(ctx context.Context, b *Backend, lockKeys, placeKeys []string) (holdSet, error) {
			set := newHoldSet()
			for _, c := range chunkKeys(lockKeys, placeKeys, mysqlReadBytes) {
				var (
					parts []string
					args  []any
				)
				for _, half := range []struct {
					shared bool
					from   string
					keys   []string
				}{{false, from, c.locks}, {true, placeFrom, c.places}} {
					if len(half.keys) == 0 {
						continue
					}
					parts = append(parts, "SELECT "+strconv.FormatBool(half.shared)+", l.lock_key, "+cols+half.from+
						" WHERE l.lock_key IN ("+strings.TrimSuffix(strings.Repeat("?,", len(half.keys)), ",")+")")
					for _, k := range half.keys {
						args = append(args, k)
					}
				}
				rows, err := b.query(ctx, "reading renewed locks", strings.Join(parts, " UNION ALL "), args...)
				if err != nil {
					return set, err
				}
				if err := set.collect(b, rows); err != nil {
					return set, err
				}
			}
			return set, nil
		},
		places: mysqlPlaces(table),
		retryable: func(err error) bool {
			var myErr *mysql.MySQLError
			// 1213 ER_LOCK_DEADLOCK: InnoDB rolled the statement back; racing upserts of one key
			// cause it.
			return errors.As(err, &myErr) && myErr.Number == 1213
		},
	}
}

// sessionTable is the name of the sessions table of a lock table.
func sessionTable(table string) string { return table + sessionTableSuffix }

// splitStatements splits a file of statements, each ending with a semicolon at the end of a
// line (the last one may omit it): the drivers send one statement at a time.
func splitStatements(file string) []string {
	var out []string
	for _, stmt := range strings.Split(file, ";\n") {
		if stmt = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(stmt), ";")); stmt != "" {
			out = append(out, stmt)
		}
	}
	return out
}

// distinctKeys lists the keys of the exclusive leases and of the shared ones, once each.
func distinctKeys(leases []backends.Lease) (lockKeys, placeKeys []string) {
	seen := map[bool]map[string]bool{false: {}, true: {}}
	for _, l := range leases {
		if seen[l.Shared][l.Key] {
			continue
		}
		seen[l.Shared][l.Key] = true
		if l.Shared {
			placeKeys = append(placeKeys, l.Key)
		} else {
			lockKeys = append(lockKeys, l.Key)
		}
	}
	return lockKeys, placeKeys
}

// keyChunk is the keys one MySQL read names: lock rows by key, and places by key.
type keyChunk struct{ locks, places []string }

// chunkKeys splits lock keys and place keys into reads that name at most budget bytes of keys
// each (one key at least, however long), lock keys first, in order.
func chunkKeys(lockKeys, placeKeys []string, budget int) []keyChunk {
	var (
		out  []keyChunk
		cur  keyChunk
		size int
	)
	add := func(k string, shared bool) {
		if size > 0 && size+len(k) > budget {
			out = append(out, cur)
			cur, size = keyChunk{}, 0
		}
		size += len(k)
		if shared {
			cur.places = append(cur.places, k)
		} else {
			cur.locks = append(cur.locks, k)
		}
	}
	for _, k := range lockKeys {
		add(k, false)
	}
	for _, k := range placeKeys {
		add(k, true)
	}
	if len(cur.locks)+len(cur.places) > 0 {
		out = append(out, cur)
	}
	return out
}

// holdSet is what a renewal reads back: lock rows by key, places by key and holder.
type holdSet struct {
	locks  map[string]row
	places map[placeID]row
}

// placeID names a place: its key and the identity that holds it.
type placeID struct{ key, holder string }

func newHoldSet() holdSet {
	return holdSet{locks: map[string]row{}, places: map[placeID]row{}}
}

// find returns the row that holds l, if one was read: its key's lock row, or its identity's place.
func (h holdSet) find(l backends.Lease) (row, bool) {
	if l.Shared {
		r, ok := h.places[placeID{l.Key, l.Identity}]
		return r, ok
	}
	r, ok := h.locks[l.Key]
	return r, ok
}

// collect reads rows of a flag (place or not), lock_key and rowColumns into h, and closes them.
func (h holdSet) collect(b *Backend, rows *dbsql.Rows) error {
	defer rows.Close()
	for rows.Next() {
		var (
			shared bool
			key    string
		)
		r, err := scanRow(rows, &shared, &key)
		if err != nil {
			return b.wrap("reading renewed locks", err)
		}
		r.key, r.shared = key, shared
		if shared {
			h.places[placeID{key, r.holder}] = r
		} else {
			h.locks[key] = r
		}
	}
	if err := rows.Err(); err != nil {
		return b.wrap("reading renewed locks", err)
	}
	return nil
}

// openPostgres opens a pool for a PostgreSQL DSN. Connecting is bounded by the call timeout, and
// the server stops statements and lock waits that outlast it too.
func openPostgres(dsn string, timeout time.Duration) (connection, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return connection{}, err
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > timeout {
		cfg.ConnectTimeout = timeout
	}
	ms := strconv.FormatInt(max(timeout.Milliseconds(), 1), 10)
	for name, value := range map[string]string{"statement_timeout": ms, "lock_timeout": ms, "application_name": "lockwarden"} {
		if _, set := cfg.RuntimeParams[name]; !set {
			cfg.RuntimeParams[name] = value
		}
	}
	target := cfg.Host
	if !strings.HasPrefix(target, "/") {
		target = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	return connection{db: stdlib.OpenDB(*cfg), target: target + "/" + cfg.Database, password: cfg.Password}, nil
}

// openMySQL opens a pool for a MySQL DSN, with the settings the backend relies on: times parsed
// as UTC, parameters interpolated by the client (one round trip per statement), affected rows
// counted as changed rows, connecting bounded by the call timeout, lock waits by one second, and
// the driver's own logging off.
func openMySQL(dsn string, timeout time.Duration) (connection, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return connection{}, err
	}
	if cfg.DBName == "" {
		return connection{}, errors.New("the DSN names no database (user:password@tcp(host:3306)/database)")
	}
	cfg.ParseTime, cfg.Loc = true, time.UTC
	cfg.InterpolateParams, cfg.ClientFoundRows, cfg.MultiStatements = true, false, false
	if cfg.Timeout == 0 || cfg.Timeout > timeout {
		cfg.Timeout = timeout
	}
	cfg.Logger = &mysql.NopLogger{}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, set := cfg.Params["innodb_lock_wait_timeout"]; !set {
		cfg.Params["innodb_lock_wait_timeout"] = "1"
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return connection{}, err
	}
	return connection{db: dbsql.OpenDB(conn), target: cfg.Addr + "/" + cfg.DBName, password: cfg.Passwd}, nil
}

// redacted replaces secrets in error messages.
const redacted = "[redacted]"

// redactor scrubs a DSN and its password from error messages.
type redactor struct {
	// secrets are replaced wherever they occur: the DSN, and the password as written and as
	// escaped in URLs.
	secrets []string
}

func newRedactor(dsn, password string) *redactor {
	r := &redactor{}
	for _, s := range []string{dsn, password, urlEscape(password, false), urlEscape(password, true)} {
		if s != "" {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// urlEscape percent-encodes what a URL's userinfo or query would.
func urlEscape(s string, query bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("-_.~", c) >= 0:
			b.WriteByte(c)
		case query && c == ' ':
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Patterns that look like credentials in a DSN, for DSNs that did not parse (their password is
// unknown) and drivers that echo part of one.
var secretPatterns = []struct{ re, repl string }{
	// scheme://user:password@
	{`([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@\s]*@`, "${1}" + redacted + "@"},
	// password=... and passwd=... (key=value DSNs, query parameters)
	{`(?i)(\bpass(?:wor)?d\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'"&;]+)`, "${1}" + redacted},
	// user:password@tcp(host) (MySQL DSNs)
	{`([^\s:@/'"(]*:)[^@\s]*@((?:tcp|unix|udp)?\()`, "${1}" + redacted + "@${2}"},
}

// regexpRepl is a compiled secretPattern.
type regexpRepl struct {
	re   *regexp.Regexp
	repl string
}

var secretRegexps = func() []regexpRepl {
	out := make([]regexpRepl, len(secretPatterns))
	for i, p := range secretPatterns {
		out[i] = regexpRepl{re: regexp.MustCompile(p.re), repl: p.repl}
	}
	return out
}()

// clean replaces the secrets, and what looks like credentials, in msg.
func (r *redactor) clean(msg string) string {
	for _, s := range r.secrets {
		msg = strings.ReplaceAll(msg, s, redacted)
	}
	for _, p := range secretRegexps {
		msg = p.re.ReplaceAllString(msg, p.repl)
	}
	return msg
}

// scrub returns an error with err's message cleaned. It unwraps to context.DeadlineExceeded or
// context.Canceled when err does, and to nothing else, so that no caller can reach the driver's
// original message.
func (r *redactor) scrub(err error) error {
	if err == nil {
		return nil
	}
	s := &scrubbedError{msg: r.clean(err.Error())}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		s.cause = context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		s.cause = context.Canceled
	}
	return s
}

// quoted matches what drivers quote in parse errors: the DSN, with its password redacted or not.
var quoted = regexp.MustCompile("`[^`]*`")

// scrubDSN is scrub for errors about a DSN that did not parse: the driver quotes the DSN, which
// is replaced as a whole.
func (r *redactor) scrubDSN(err error) error {
	return r.scrub(errors.New(quoted.ReplaceAllString(err.Error(), "the DSN")))
}

type scrubbedError struct {
	msg   string
	cause error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.cause }
