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
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	sqlbackend "github.com/lockwarden/lockwarden/internal/backends/sql"
	"github.com/lockwarden/lockwarden/internal/testutil/backendfixtures"
	"github.com/lockwarden/lockwarden/internal/testutil/sqltest"
)

const secretNS = "lockwarden-system"

// sqlSpec is a LockBackend spec of type SQL whose DSN is key "dsn" of Secret secretNS/name.
func sqlSpec(driver, name, table string) locksv1alpha1.LockBackendSpec {
	return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL, SQL: &locksv1alpha1.SQLBackend{
		Driver: locksv1alpha1.SQLDriver(driver),
		DSNSecretRef: locksv1alpha1.SecretKeySelector{
			SecretReference: locksv1alpha1.SecretReference{Name: name, Namespace: secretNS}, Key: "dsn",
		},
		Table: table,
	}}
}

// open builds a session with the factory and closes it when the test ends.
func open(t *testing.T, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (backends.Backend, error) {
	t.Helper()
	b, err := sqlbackend.NewFactory(sqlbackend.WithCallTimeout(5*time.Second))(t.Context(), spec, secrets)
	if b != nil {
		t.Cleanup(func() { _ = b.Close(context.Background()) })
	}
	return b, err
}

// The factory reads the DSN from the Secret (a trailing newline, as kubectl create secret
// --from-file leaves, is fine) and uses the table the LockBackend names, creating it.
func TestFactory(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		secrets := backendfixtures.Secrets{secretNS + "/db": {"dsn": []byte(srv.DSN() + "\n")}}
		b, err := open(t, sqlSpec(srv.Driver, "db", "custom_locks"), secrets)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Ping(ctx)).To(Succeed())
		l, err := b.TryAcquire(ctx, "factory/k", "pod-a", holdTTL)
		g.Expect(err).NotTo(HaveOccurred())

		var holder string
		err = srv.DB().QueryRowContext(ctx, q(srv, "SELECT holder FROM custom_locks WHERE lock_key = ?"), "factory/k").Scan(&holder)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holder).To(Equal("pod-a"), "the lock is in the table the LockBackend names")
		g.Expect(b.Release(ctx, l)).To(Succeed())
	})
}

// Secrets that are missing, lack the key or hold nothing fail the factory with errors that name
// them and wrap registry.ErrSecret.
func TestFactorySecretErrors(t *testing.T) {
	secrets := backendfixtures.Secrets{
		secretNS + "/db":    {"dsn": []byte("postgres://u:p@127.0.0.1:5432/db")},
		secretNS + "/empty": {"dsn": []byte(" \n")},
		secretNS + "/other": {"url": []byte("postgres://u:p@127.0.0.1:5432/db")},
	}
	for name, tc := range map[string]struct {
		spec       locksv1alpha1.LockBackendSpec
		want       string
		secretKind bool
	}{
		"no sql member":  {locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL}, "spec.sql is not set", false},
		"missing secret": {sqlSpec("postgres", "nope", ""), "spec.sql.dsnSecretRef: secret unavailable: Secret lockwarden-system/nope not found", true},
		"missing key":    {sqlSpec("postgres", "other", ""), `spec.sql.dsnSecretRef: secret unavailable: Secret lockwarden-system/other has no key "dsn"`, true},
		"empty value":    {sqlSpec("postgres", "empty", ""), `key "dsn" of Secret lockwarden-system/empty is empty`, true},
		"bad driver":     {sqlSpec("oracle", "db", ""), `the driver must be "postgres" or "mysql"`, false},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := open(t, tc.spec, secrets)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(errors.Is(err, registry.ErrSecret)).To(Equal(tc.secretKind))
		})
	}
}

// A wrong password, through the factory, gives a Ping error that says authentication failed and
// contains neither the password nor the DSN; so do DSNs that do not parse.
func TestSecretsNeverInErrors(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		wrong := "Wr0ng:p@ss%rd!"
		dsn := srv.DSNWith(sqltest.User, wrong)
		secrets := backendfixtures.Secrets{secretNS + "/db": {"dsn": []byte(dsn)}}
		b, err := open(t, sqlSpec(srv.Driver, "db", ""), secrets)
		g.Expect(err).NotTo(HaveOccurred(), "the factory does not connect")
		noSecrets := func(err error) {
			msg := err.Error()
			for _, secret := range []string{wrong, url.QueryEscape(wrong), url.PathEscape(wrong), dsn, srv.Password} {
				g.Expect(msg).NotTo(ContainSubstring(secret), "error %q", msg)
			}
		}
		err = b.Ping(ctx)
		g.Expect(err).To(HaveOccurred())
		t.Log(err)
		noSecrets(err)
		if srv.Driver == sqlbackend.DriverPostgres {
			g.Expect(err.Error()).To(ContainSubstring("password authentication failed"))
		} else {
			g.Expect(err.Error()).To(ContainSubstring("Access denied"))
		}
		g.Expect(err.Error()).To(ContainSubstring(srv.Addr()), "the error names the database")
		_, err = b.TryAcquire(ctx, "secret/k", "pod-a", holdTTL)
		g.Expect(err).To(HaveOccurred())
		noSecrets(err)

		// The right password works through the same path.
		secrets[secretNS+"/good"] = map[string][]byte{"dsn": []byte(srv.DSN())}
		good, err := open(t, sqlSpec(srv.Driver, "good", ""), secrets)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(good.Ping(ctx)).To(Succeed())
	})
}

// DSNs that do not parse are refused by New with errors that contain neither the DSN nor the
// password in it.
func TestInvalidDSNsNeverInErrors(t *testing.T) {
	const secret = "Sup3r-Secret"
	for name, tc := range map[string]struct{ driver, dsn string }{
		"postgres URL, bad port":       {sqlbackend.DriverPostgres, "postgres://lockwarden:" + secret + "@127.0.0.1:notaport/db"},
		"postgres URL, bad escape":     {sqlbackend.DriverPostgres, "postgres://lockwarden:" + secret + "%zz@127.0.0.1:5432/db"},
		"postgres key=value, bad port": {sqlbackend.DriverPostgres, "host=127.0.0.1 port=abc user=lockwarden password=" + secret},
		"postgres unknown sslmode":     {sqlbackend.DriverPostgres, "postgres://lockwarden:" + secret + "@127.0.0.1/db?sslmode=" + secret},
		"mysql, no database slash":     {sqlbackend.DriverMySQL, "lockwarden:" + secret + "@tcp(127.0.0.1:3306)"},
		"mysql, bad parameter":         {sqlbackend.DriverMySQL, "lockwarden:" + secret + "@tcp(127.0.0.1:3306)/db?parseTime=bogus"},
		"mysql, unclosed address":      {sqlbackend.DriverMySQL, "lockwarden:" + secret + "@tcp(127.0.0.1:3306/db"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := sqlbackend.New(sqlbackend.Config{Driver: tc.driver, DSN: tc.dsn})
			g.Expect(err).To(MatchError(ContainSubstring("the DSN is not valid")))
			t.Log(err)
			g.Expect(err.Error()).NotTo(ContainSubstring(secret))
			g.Expect(err.Error()).NotTo(ContainSubstring(tc.dsn))
			g.Expect(err.Error()).NotTo(ContainSubstring("lockwarden:"), "not even the DSN without its password")
		})
	}
}

// The privileges the documentation lists are enough: a user with only SELECT, INSERT, UPDATE and
// DELETE on the three tables a DBA created (with the DDL the package ships) locks, exclusive and
// shared, as well as the owner.
// A user who may not create the missing tables, or may only read them, fails Ping with a message
// that says so.
func TestPrivileges(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		g := NewWithT(t)
		ctx := t.Context()
		admin := srv.AdminDB()
		const password = "Limited-Pa55"
		exec := func(stmt string) {
			_, err := admin.ExecContext(ctx, stmt)
			g.Expect(err).NotTo(HaveOccurred(), stmt)
		}
		if srv.Driver == sqlbackend.DriverPostgres {
			exec("CREATE ROLE limited LOGIN PASSWORD '" + password + "'")
		} else {
			exec("CREATE USER 'limited'@'%' IDENTIFIED BY '" + password + "'")
			exec("GRANT SELECT ON " + sqltest.Database + ".* TO 'limited'@'%'")
		}
		limited := func(t *testing.T) *sqlbackend.Backend {
			b, err := sqlbackend.New(sqlbackend.Config{Driver: srv.Driver, DSN: srv.DSNWith("limited", password), Table: "dba_locks"},
				sqlbackend.WithCallTimeout(5*time.Second))
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			return b
		}

		err := limited(t).Ping(ctx)
		g.Expect(err).To(MatchError(ContainSubstring("creating the lock table dba_locks")))
		g.Expect(err).To(MatchError(ContainSubstring("CREATE privilege")))

		// A DBA creates the tables from the shipped DDL, statement by statement, as their owner,
		// and lets limited read them.
		ddl, err := os.ReadFile("ddl_" + srv.Driver + ".sql")
		g.Expect(err).NotTo(HaveOccurred())
		for _, stmt := range strings.Split(strings.ReplaceAll(string(ddl), sqlbackend.DefaultTable, "dba_locks"), ";\n") {
			_, err = srv.DB().ExecContext(ctx, stmt)
			g.Expect(err).NotTo(HaveOccurred())
		}
		grant := func(privileges string) {
			for _, table := range []string{"dba_locks", "dba_locks_sessions", "dba_locks_places"} {
				if srv.Driver == sqlbackend.DriverPostgres {
					_, err = srv.DB().ExecContext(ctx, "GRANT "+privileges+" ON "+table+" TO limited")
				} else {
					_, err = admin.ExecContext(ctx, fmt.Sprintf("GRANT %s ON %s.%s TO 'limited'@'%%'", privileges, sqltest.Database, table))
				}
				g.Expect(err).NotTo(HaveOccurred())
			}
		}
		grant("SELECT")
		err = limited(t).Ping(ctx)
		g.Expect(err).To(MatchError(ContainSubstring("writing the probe row")), "read-only access is not enough")

		grant("SELECT, INSERT, UPDATE, DELETE")
		b := limited(t)
		g.Expect(b.Ping(ctx)).To(Succeed())
		l, err := b.TryAcquire(ctx, "dba/k", "pod-a", holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		renewed, lost, err := b.Renew(ctx, []backends.Lease{l}, holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(BeEmpty())
		g.Expect(renewed).To(HaveLen(1))
		g.Expect(b.Release(ctx, l)).To(Succeed())
		p, err := b.TryAcquireShared(ctx, "dba/shared", "pod-a", holdTTL, 2)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Release(ctx, p)).To(Succeed())
	})
}
