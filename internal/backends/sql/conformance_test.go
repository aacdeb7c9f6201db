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
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/backendtest"
	sqlbackend "github.com/lockwarden/lockwarden/internal/backends/sql"
	"github.com/lockwarden/lockwarden/internal/testutil/sqltest"
)

// These tests run against real PostgreSQL and MariaDB servers that sqltest starts per test.

// holdTTL is the TTL of holds that must outlast a test.
const holdTTL = time.Minute

// servers are the databases every test runs against, by name.
var servers = []struct {
	name  string
	start func(testing.TB) *sqltest.Server
}{
	{"PostgreSQL", sqltest.StartPostgres},
	{"MariaDB", sqltest.StartMariaDB},
}

// eachServer runs f as a subtest per database, each with its own server.
func eachServer(t *testing.T, f func(t *testing.T, srv *sqltest.Server)) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) { f(t, s.start(t)) })
	}
}

// newBackend opens a session as the server's user, closed when the test ends.
func newBackend(t *testing.T, srv *sqltest.Server, opts ...sqlbackend.Option) *sqlbackend.Backend {
	t.Helper()
	b, err := sqlbackend.New(sqlbackend.Config{Driver: srv.Driver, DSN: srv.DSN()}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// TestConformance runs the whole suite, exclusive and shared locks, on one server per dialect.
func TestConformance(t *testing.T) {
	eachServer(t, func(t *testing.T, srv *sqltest.Server) {
		h := backendtest.Harness{
			New: func(t *testing.T) backends.Backend {
				// The racing cases open sessions and race at once: on a shared machine, the
				// PostgreSQL pools' first connections (SCRAM authentication) alone can outlast
				// the default 1 s per call.
				b, err := sqlbackend.New(sqlbackend.Config{Driver: srv.Driver, DSN: srv.DSN()}, sqlbackend.WithCallTimeout(5*time.Second))
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return b
			},
			// Real time, by the database's clock, to the microsecond.
			TTL:        time.Second,
			RoundTrips: func(b backends.Backend) int64 { return b.(*sqlbackend.Backend).Statements() },
		}
		backendtest.Run(t, h)
		t.Run("Shared", func(t *testing.T) { backendtest.RunShared(t, h) })
	})
}
