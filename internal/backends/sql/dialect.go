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
)

// dialect is what differs between PostgreSQL and MySQL: the statements, and how renewal and
// retries work.
type dialect struct {
	// ddl creates the table.
	ddl string
	// tableExists answers one boolean for the table's name.
	tableExists string
	// acquire is the upsert of TryAcquire. acquireReturns: it returns grant_id, acquired_at and
	// expires_at when it took the key (PostgreSQL); else it returns nothing and the row is read
	// back (MySQL).
	acquire        string
	acquireReturns bool
	// selectRow reads holder, grant_id, ttl_us, acquired_at, expires_at and liveness by key.
	selectRow string
	// release deletes a key's row if the identity holds it or it has expired.
	release string
	// renew extends the leases and returns the rows of their keys after it, by key.
	renew func(ctx context.Context, b *Backend, leases []backends.Lease, ttlUs int64) (map[string]row, error)
	// retryable tells errors after which a statement may be sent again at once (deadlocks).
	retryable func(error) bool
}

// postgres is the PostgreSQL dialect for table.
func postgres(table string) *dialect {
	renew := forTable(renewPostgres, table)
	return &dialect{
		ddl:            forTable(ddlPostgres, table),
		tableExists:    "SELECT to_regclass($1) IS NOT NULL",
		acquire:        forTable(acquirePostgres, table),
		acquireReturns: true,
		selectRow:      "SELECT holder, grant_id, ttl_us, acquired_at, expires_at, expires_at > now() FROM " + table + " WHERE lock_key = $1",
		release:        "DELETE FROM " + table + " WHERE lock_key = $1 AND (holder = $2 OR expires_at <= now())",
		renew: func(ctx context.Context, b *Backend, leases []backends.Lease, ttlUs int64) (map[string]row, error) {
			keys, holders, grants := make([]string, len(leases)), make([]string, len(leases)), make([]int64, len(leases))
			for i, l := range leases {
				keys[i], holders[i], grants[i] = l.Key, l.Identity, grantOf(l.Version)
			}
			rows, err := b.query(ctx, "renewing locks", renew, ttlUs, b.session, keys, holders, grants)
			if err != nil {
				return nil, err
			}
			return collect(b, rows)
		},
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
	d := &dialect{
		ddl:         forTable(ddlMySQL, table),
		tableExists: "SELECT COUNT(*) > 0 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
		acquire:     forTable(acquireMySQL, table),
		selectRow: "SELECT holder, grant_id, ttl_us, acquired_at, expires_at, expires_at > UTC_TIMESTAMP(6) FROM " + table +
			" WHERE lock_key = ?",
		release: "DELETE FROM " + table + " WHERE lock_key = ? AND (holder = ? OR expires_at <= UTC_TIMESTAMP(6))",
		retryable: func(err error) bool {
			var myErr *mysql.MySQLError
			// 1213 ER_LOCK_DEADLOCK: InnoDB rolled the statement back; racing upserts of one key
			// cause it.
			return errors.As(err, &myErr) && myErr.Number == 1213
		},
	}
	d.renew = func(ctx context.Context, b *Backend, leases []backends.Lease, ttlUs int64) (map[string]row, error) {
		out := map[string]row{}
		for from := 0; from < len(leases); from += mysqlRenewChunk {
			chunk := leases[from:min(from+mysqlRenewChunk, len(leases))]
			keys := distinctKeys(chunk)
			in := "lock_key IN (" + strings.TrimSuffix(strings.Repeat("?,", len(keys)), ",") + ")"
			args := []any{ttlUs, ttlUs, b.session}
			args = append(args, keys...)
			match := make([]string, len(chunk))
			for i, l := range chunk {
				if g := grantOf(l.Version); g != 0 {
					match[i] = "(lock_key = ? AND holder = ? AND grant_id = ?)"
					args = append(args, l.Key, l.Identity, g)
				} else {
					match[i] = "(lock_key = ? AND holder = ?)"
					args = append(args, l.Key, l.Identity)
				}
			}
			update := "UPDATE " + table + " SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ttl_us = ?, session_id = ?" +
				" WHERE " + in + " AND expires_at > UTC_TIMESTAMP(6) AND (" + strings.Join(match, " OR ") + ")"
			if _, err := b.exec(ctx, "renewing locks", update, args...); err != nil {
				return nil, err
			}
			rows, err := b.query(ctx, "reading renewed locks",
				"SELECT lock_key, holder, grant_id, ttl_us, acquired_at, expires_at, expires_at > UTC_TIMESTAMP(6) FROM "+table+" WHERE "+in,
				keys...)
			if err != nil {
				return nil, err
			}
			got, err := collect(b, rows)
			if err != nil {
				return nil, err
			}
			for k, r := range got {
				out[k] = r
			}
		}
		return out, nil
	}
	return d
}

// distinctKeys lists the keys of leases once each, as statement arguments.
func distinctKeys(leases []backends.Lease) []any {
	seen := map[string]bool{}
	var keys []any
	for _, l := range leases {
		if !seen[l.Key] {
			seen[l.Key] = true
			keys = append(keys, l.Key)
		}
	}
	return keys
}

// collect reads rows of (lock_key, holder, grant_id, ttl_us, acquired_at, expires_at, live) by
// key, and closes them.
func collect(b *Backend, rows *dbsql.Rows) (map[string]row, error) {
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		r, err := scanRow(rows, true)
		if err != nil {
			return nil, b.wrap("reading renewed locks", err)
		}
		out[r.key] = r
	}
	if err := rows.Err(); err != nil {
		return nil, b.wrap("reading renewed locks", err)
	}
	return out, nil
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
