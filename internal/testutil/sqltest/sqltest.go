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

// Package sqltest runs real PostgreSQL and MariaDB servers for tests. Each server listens on a
// free loopback port, keeps its data in a temporary directory, and is stopped by its PID (see
// package proc) when the test ends. A test can kill a server (SIGKILL to its process group) and
// restart it on the same port with the same data, as a crashed database comes back: committed
// rows survive.
//
// PostgreSQL 15 is Debian's postgresql package (binaries in /usr/lib/postgresql/15/bin; PG_BINDIR
// may name another directory). It refuses to run as root, so when the tests run as root the server
// runs as the postgres user the package creates, in a directory that user owns. Clients connect
// over TCP with a password (scram-sha-256); the superuser postgres has one too.
//
// MariaDB is Debian's mariadb-server package (mariadb-install-db and mariadbd; MARIADB_BINDIR may
// name another directory). It runs as the current user (--user=root when that is root).
//
// Each server gets a database named Database and a user named User that owns it, with a random
// password: the DSN a LockBackend's Secret would hold. When a package is missing the tests fail,
// never skip, and say how to install it.
package sqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/lockwarden/lockwarden/internal/testutil/proc"
)

// Install commands for the servers (Debian, as root).
const (
	PostgresInstallCommand = "apt-get update && apt-get install -y postgresql"
	MariaDBInstallCommand  = "apt-get update && apt-get install -y mariadb-server"
)

// Database and User name the database the tests use and the (non-superuser) account that owns it.
const (
	Database = "lockwarden"
	User     = "lockwarden"
)

const (
	// startTimeout bounds how long a server may take to accept queries after it was started,
	// generous for a loaded 2-core machine.
	startTimeout = 60 * time.Second
	// startAttempts is how often a server is tried on another free port when it cannot start
	// (another process took the port between the probe and the server's bind).
	startAttempts = 3
	// stopGrace is how long Stop waits for a clean shutdown before it kills.
	stopGrace = 20 * time.Second
	// logTail is how much of a server's log failure messages show.
	logTail = 4000
)

// Server is one database server process.
type Server struct {
	t testing.TB
	// Driver is "postgres" or "mysql", as LockBackend spec.sql.driver says.
	Driver string
	// Dir holds the server's data directory, socket and logs, kept across restarts.
	Dir string
	// Port is the loopback port the server listens on, kept across restarts.
	Port int
	// Password is User's password.
	Password string
	// adminPassword is the superuser's password (PostgreSQL).
	adminPassword string

	proc *proc.Process
	dbs  []*sql.DB
}

// Addr is the server's address, 127.0.0.1:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// DSN is the data source name of User on Database over TCP, in the driver's own format.
func (s *Server) DSN() string { return s.DSNWith(User, s.Password) }

// DSNWith is the DSN of Database for another user and password.
func (s *Server) DSNWith(user, password string) string {
	if s.Driver == "postgres" {
		u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: s.Addr(), Path: "/" + Database,
			RawQuery: "sslmode=disable&connect_timeout=5"}
		return u.String()
	}
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, password, "tcp", s.Addr(), Database
	c.ParseTime, c.Timeout = true, 5*time.Second
	return c.FormatDSN()
}

// adminDSN is the superuser's DSN, over TCP.
func (s *Server) adminDSN(database string) string {
	if s.Driver == "postgres" {
		u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", s.adminPassword), Host: s.Addr(), Path: "/" + database,
			RawQuery: "sslmode=disable&connect_timeout=2"}
		return u.String()
	}
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "tcp", s.Addr(), database
	c.ParseTime, c.Timeout = true, 2*time.Second
	return c.FormatDSN()
}

// open opens a database handle for dsn.
func (s *Server) open(dsn string) (*sql.DB, error) {
	if s.Driver == "postgres" {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		return stdlib.OpenDB(*cfg), nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// DB returns a plain connection pool as User on Database, closed when the test ends. It plays
// "another application" and reads the lock table for assertions.
func (s *Server) DB() *sql.DB { return s.db(s.DSN()) }

// AdminDB returns a connection pool as the superuser (postgres, or root) on Database, closed when
// the test ends: for creating users and granting privileges.
func (s *Server) AdminDB() *sql.DB { return s.db(s.adminDSN(Database)) }

func (s *Server) db(dsn string) *sql.DB {
	s.t.Helper()
	db, err := s.open(dsn)
	if err != nil {
		s.t.Fatalf("sqltest: opening a %s client: %v", s.Driver, err)
	}
	s.dbs = append(s.dbs, db)
	return db
}

// PID is the process ID of the running server; 0 when it is not running.
func (s *Server) PID() int { return s.proc.PID() }

// Kill kills the server's process group with SIGKILL and waits until it has exited. Its data
// directory stays: committed rows survive.
func (s *Server) Kill() {
	s.t.Helper()
	if s.PID() == 0 {
		s.t.Fatalf("sqltest: Kill: the %s server on port %d is not running", s.Driver, s.Port)
	}
	if err := s.proc.Kill(); err != nil {
		s.t.Fatalf("sqltest: %v", err)
	}
}

// Stop shuts the server down cleanly (killing it if it takes longer than 20 s).
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.proc.Stop(stopGrace); err != nil {
		s.t.Fatalf("sqltest: %v", err)
	}
}

// Restart starts a killed or stopped server again on the same port with its data, and waits until
// it accepts queries.
func (s *Server) Restart() {
	s.t.Helper()
	if s.PID() != 0 {
		s.t.Fatalf("sqltest: Restart: the %s server on port %d is still running; Kill or Stop it first", s.Driver, s.Port)
	}
	if err := s.proc.Restart(); err != nil {
		s.t.Fatalf("sqltest: %v", err)
	}
	if err := s.waitReady(); err != nil {
		s.t.Fatalf("sqltest: restarting: %v", err)
	}
}

// waitReady waits until the superuser can run a query; on failure the server is killed and the
// error carries its log.
func (s *Server) waitReady() error {
	db, err := s.open(s.adminDSN(s.adminDatabase()))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	err = s.proc.WaitReady(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := db.ExecContext(ctx, "SELECT 1")
		return err
	})
	if err != nil {
		_ = s.proc.Kill()
		return fmt.Errorf("%s on port %d: %w\n%s", s.proc.Name(), s.Port, err, s.logs())
	}
	return nil
}

// adminDatabase is a database that exists before setup creates Database.
func (s *Server) adminDatabase() string {
	if s.Driver == "postgres" {
		return "postgres"
	}
	return "mysql"
}

// setup creates Database and User.
func (s *Server) setup() error {
	db, err := s.open(s.adminDSN(s.adminDatabase()))
	if err != nil {
		return err
	}
	defer db.Close()
	var stmts []string
	if s.Driver == "postgres" {
		stmts = []string{
			fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", User, s.Password),
			fmt.Sprintf("CREATE DATABASE %s OWNER %s", Database, User),
		}
	} else {
		stmts = []string{
			"CREATE DATABASE " + Database,
			fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", User, s.Password),
			fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'%%'", Database, User),
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("setting up %s: %w", s.Driver, err)
		}
	}
	return nil
}

func (s *Server) cleanup() {
	for _, db := range s.dbs {
		_ = db.Close()
	}
	s.dbs = nil
	if err := s.proc.Kill(); err != nil {
		s.t.Errorf("sqltest: %v", err)
	}
}

// logs returns the end of the server's logs, for failure messages.
func (s *Server) logs() string {
	return s.proc.LogTail(logTail) + proc.FileTail(filepath.Join(s.Dir, "init.log"), logTail)
}

// randomPassword returns 24 random hex digits.
func randomPassword() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// start starts a server with spec built for each free port tried, runs setup, and registers its
// cleanup.
func start(t testing.TB, s *Server, spec func(port int) proc.Spec) *Server {
	t.Helper()
	var err error
	for range startAttempts {
		if s.Port, err = proc.FreePort(); err != nil {
			t.Fatalf("sqltest: finding a free port: %v", err)
		}
		p, startErr := proc.Start(spec(s.Port))
		if startErr != nil {
			t.Fatalf("sqltest: %v", startErr)
		}
		s.proc = p
		if err = s.waitReady(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	t.Cleanup(s.cleanup)
	if err := s.setup(); err != nil {
		t.Fatalf("sqltest: %v\n%s", err, s.logs())
	}
	return s
}

// tempDir makes a directory that the server's user can use: Go's t.TempDir is private to the
// test's user, and PostgreSQL runs as postgres when the tests run as root.
func tempDir(t testing.TB, prefix string, cred *syscall.Credential) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("sqltest: %v", err)
		}
	}
	return dir
}

// run runs a setup command (initdb, mariadb-install-db) with its output in logFile.
func run(cred *syscall.Credential, logFile, bin string, args ...string) error {
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(bin), err, proc.FileTail(logFile, logTail))
	}
	return nil
}

// binDir finds the directory holding names, from the environment variable env or the defaults,
// or fails the test with the command that installs them.
func binDir(t testing.TB, env string, defaults []string, install string, names ...string) string {
	t.Helper()
	dirs := defaults
	if d := os.Getenv(env); d != "" {
		dirs = []string{d}
	}
	for _, d := range dirs {
		ok := true
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(d, n)); err != nil {
				ok = false
			}
		}
		if ok {
			return d
		}
	}
	t.Fatalf("sqltest: %v not found in %v (set %s to another directory). "+
		"These tests run against a real database server and never skip. Install it with:\n\t%s", names, dirs, env, install)
	return ""
}

// userCredential returns the credential to run a server as the named user when the tests run as
// root, nil otherwise.
func userCredential(t testing.TB, name, install string) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("sqltest: the tests run as root and the server refuses root, but there is no %q user (%v). "+
			"The Debian package creates it. Install it with:\n\t%s", name, err, install)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("sqltest: user %q has a non-numeric uid %q or gid %q", name, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}
