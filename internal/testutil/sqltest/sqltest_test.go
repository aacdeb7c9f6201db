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

package sqltest_test

import (
	"context"
	"database/sql"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/testutil/listeners"
	"github.com/lockwarden/lockwarden/internal/testutil/sqltest"
)

// The helper's promises, for both servers: User can create a table in Database over TCP with
// Password and not with another; a killed server restarts on its port with its committed rows;
// the server's process group is gone after the test.
func TestServerLifecycle(t *testing.T) {
	for name, start := range map[string]func(testing.TB) *sqltest.Server{
		"postgres": sqltest.StartPostgres,
		"mariadb":  sqltest.StartMariaDB,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var pid int
			t.Run("Lifecycle", func(t *testing.T) {
				ctx := t.Context()
				s := start(t)
				db := s.DB()
				_, err := db.ExecContext(ctx, "CREATE TABLE t (v INT)")
				g.Expect(err).NotTo(HaveOccurred())
				_, err = db.ExecContext(ctx, "INSERT INTO t VALUES (42)")
				g.Expect(err).NotTo(HaveOccurred())
				port, first := s.Port, s.PID()
				g.Expect(first).To(BeNumerically(">", 0))
				g.Expect(listeners.LoopbackOnly(name, first)).To(Succeed())

				s.Kill()
				g.Expect(s.PID()).To(BeZero())
				g.Expect(syscall.Kill(-first, 0)).To(MatchError(syscall.ESRCH), "the whole process group is gone")
				s.Restart()
				g.Expect(s.Port).To(Equal(port))
				g.Expect(s.PID()).NotTo(Equal(first))
				g.Eventually(func() (int, error) {
					var v int
					err := db.QueryRowContext(ctx, "SELECT v FROM t").Scan(&v)
					return v, err
				}, 30*time.Second, 50*time.Millisecond).Should(Equal(42), "the committed row survived the kill")

				wrong, err := sql.Open(map[string]string{"postgres": "pgx", "mariadb": "mysql"}[name], s.DSNWith(sqltest.User, "wrong"))
				g.Expect(err).NotTo(HaveOccurred())
				defer wrong.Close()
				short, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				g.Expect(wrong.PingContext(short)).To(HaveOccurred(), "a wrong password is refused")

				s.Stop()
				g.Expect(s.PID()).To(BeZero())
				s.Restart()
				pid = s.PID()
			})
			g.Expect(syscall.Kill(-pid, 0)).To(MatchError(syscall.ESRCH), "the server is gone after its test")
		})
	}
}
