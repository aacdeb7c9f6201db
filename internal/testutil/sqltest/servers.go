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

package sqltest

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/lockwarden/lockwarden/internal/testutil/proc"
)

// StartPostgres starts a PostgreSQL server on a free loopback port, with Database owned by User,
// and waits until it accepts queries. It is killed when the test ends.
//
// The cluster is a copy of one made by initdb once per process (template.go; superuser postgres,
// local connections trusted, TCP connections by scram-sha-256 password) and served by postgres itself, not pg_ctl, so that the server's PID
// is the postmaster's: fsync is off (test data need not survive a power cut, only a crash of the
// server), the unix socket lives in the server's directory.
func StartPostgres(t testing.TB) *Server {
	t.Helper()
	bin := binDir(t, "PG_BINDIR", []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"},
		PostgresInstallCommand, "initdb", "postgres")
	cred := userCredential(t, "postgres", PostgresInstallCommand)
	tp, err := postgresTemplate.get("postgres", cred, func(dir string) (string, error) {
		adminPassword := randomPassword()
		pwFile := filepath.Join(dir, "pwfile")
		if err := os.WriteFile(pwFile, []byte(adminPassword+"\n"), 0o600); err != nil {
			return "", err
		}
		defer os.Remove(pwFile)
		if cred != nil {
			if err := os.Chown(pwFile, int(cred.Uid), int(cred.Gid)); err != nil {
				return "", err
			}
		}
		return adminPassword, run(cred, filepath.Join(dir, "init.log"), filepath.Join(bin, "initdb"),
			"-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile="+pwFile,
			"-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	})
	if err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	s := &Server{t: t, Driver: "postgres", Password: randomPassword(), adminPassword: tp.adminPassword}
	s.Dir = tempDir(t, "sqltest-postgres-", cred)
	data := filepath.Join(s.Dir, "data")
	if err := tp.copyTo(s.Dir); err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	logFile := filepath.Join(s.Dir, "postgres.log")
	if cred != nil {
		// The server writes its own log lines through the descriptor the test opens, but keep
		// the file usable by its user anyway.
		f, err := os.Create(logFile)
		if err == nil {
			_ = f.Close()
			_ = os.Chown(logFile, int(cred.Uid), int(cred.Gid))
		}
	}
	return start(t, s, func(port int) proc.Spec {
		return proc.Spec{
			Name: "postgres",
			Path: filepath.Join(bin, "postgres"),
			Args: []string{
				"-D", data,
				"-p", strconv.Itoa(port),
				"-k", s.Dir,
				"-c", "listen_addresses=127.0.0.1",
				"-c", "fsync=off",
				"-c", "shared_buffers=16MB",
				"-c", "max_connections=200",
				"-c", "log_min_messages=warning",
			},
			Dir:        s.Dir,
			LogFile:    logFile,
			Credential: cred,
			StopSignal: syscall.SIGINT, // fast shutdown; SIGTERM waits for clients to leave
		}
	})
}

// StartMariaDB starts a MariaDB server on a free loopback port, with Database and User, and waits
// until it accepts queries. It is killed when the test ends.
//
// The data directory is a copy of one made by mariadb-install-db once per process (template.go);
// root has no password and may connect over
// TCP. InnoDB writes its log at every commit and flushes it once a second, so committed rows
// survive a kill of the server (not of the machine).
func StartMariaDB(t testing.TB) *Server {
	t.Helper()
	bin := binDir(t, "MARIADB_BINDIR", []string{"/usr/sbin", "/usr/bin"}, MariaDBInstallCommand, "mariadbd")
	installBin := binDir(t, "MARIADB_BINDIR", []string{"/usr/bin", "/usr/sbin"}, MariaDBInstallCommand, "mariadb-install-db")
	s := &Server{t: t, Driver: "mysql", Password: randomPassword()}
	s.Dir = tempDir(t, "sqltest-mariadb-", nil)
	data := filepath.Join(s.Dir, "data")
	// Each server (and the template's bootstrap) gets a temporary directory of its own: with the
	// shared /tmp, a bootstrap running next to other servers' once failed to remove its own temporary table ("Could not
	// remove temporary table '/tmp/#sql-temptable-…'") and left the system tables half made.
	tmp := filepath.Join(s.Dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	runAs := "--user=" + currentUser()
	small := []string{"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--tmpdir=" + tmp}
	tp, err := mariadbTemplate.get("mariadb", nil, func(dir string) (string, error) {
		tmp := filepath.Join(dir, "tmp")
		if err := os.Mkdir(tmp, 0o700); err != nil {
			return "", err
		}
		return "", run(nil, filepath.Join(dir, "init.log"), filepath.Join(installBin, "mariadb-install-db"),
			"--no-defaults", "--datadir="+filepath.Join(dir, "data"), runAs, "--auth-root-authentication-method=normal",
			"--skip-test-db", "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--tmpdir="+tmp)
	})
	if err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	if err := tp.copyTo(s.Dir); err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	return start(t, s, func(port int) proc.Spec {
		return proc.Spec{
			Name: "mariadbd",
			Path: filepath.Join(bin, "mariadbd"),
			Args: append([]string{
				"--no-defaults",
				"--datadir=" + data,
				runAs,
				"--port=" + strconv.Itoa(port),
				"--bind-address=127.0.0.1",
				"--socket=" + filepath.Join(s.Dir, "mariadb.sock"),
				"--pid-file=" + filepath.Join(s.Dir, "mariadb.pid"),
				"--log-error=" + filepath.Join(s.Dir, "error.log"),
				"--skip-name-resolve",
				"--innodb-flush-log-at-trx-commit=2",
				"--max-connections=200",
			}, small...),
			Dir:     s.Dir,
			LogFile: filepath.Join(s.Dir, "mariadbd.log"),
		}
	})
}

// currentUser is the name of the user the tests run as, for mariadbd's --user.
func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if name := os.Getenv("USER"); name != "" {
		return name
	}
	return strconv.Itoa(os.Geteuid())
}
