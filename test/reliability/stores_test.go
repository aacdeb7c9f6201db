//go:build reliability

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

package reliability

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/faultproxy"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
	"github.com/lockwarden/lockwarden/internal/testutil/sqltest"
	"github.com/lockwarden/lockwarden/internal/testutil/zktest"
)

// sqlTable is the table the SQL scenarios' LockBackends name (its sessions table is
// sqlTable + "_sessions", its places table sqlTable + sqlPlacesTableSuffix); every SQL scenario
// shares it, as keys carry their namespace.
const sqlTable = "reliability_locks"

// redlockNodes is how many independent Redis nodes the Redlock scenarios use.
const redlockNodes = 3

// otherServers are the servers of the backends that joined the harness after Redis and etcd:
// ZooKeeper, PostgreSQL, MariaDB and Redlock's Redis nodes, started once for the run when a
// scenario needs them, with direct (unproxied) connections for the sampler.
type otherServers struct {
	zk       *zktest.Server
	zkConn   *zk.Conn
	postgres *sqltest.Server
	mariadb  *sqltest.Server
	redlock  []*redistest.Server
}

// startOthers starts the servers that the selected scenarios need. A server that cannot start
// fails the run: a missing backend never makes its scenarios pass by being skipped.
func (srv *servers) startOthers(t *testing.T, needs map[string]bool) {
	t.Helper()
	if needs["zookeeper"] {
		srv.zk = zktest.Start(t)
		conn, _, err := zk.Connect([]string{srv.zk.Addr()}, 10*time.Second, zk.WithLogger(quietZKLogger{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		srv.zkConn = conn
	}
	if needs["postgresql"] {
		srv.postgres = sqltest.StartPostgres(t)
	}
	if needs["mariadb"] {
		// The direct connection's driver logs broken connections while MariaDB is down: expected.
		_ = mysql.SetLogger(quietMySQLLogger{})
		srv.mariadb = sqltest.StartMariaDB(t)
	}
	if needs["redlock"] {
		goredis.SetLogger(quietLogger{}) // the direct clients' dial errors while a node is down are expected
		srv.redlock = redistest.StartN(t, redlockNodes, redistest.Options{})
	}
}

// restartable is a server that a restart fault SIGKILLs and starts again at heal (with its data,
// or empty for Redis, which runs without persistence).
type restartable interface {
	Kill()
	Restart()
}

// restartTarget returns the server that the restart fault k hits: for Redlock, the first node.
func (srv *servers) restartTarget(k faultKind) restartable {
	switch k {
	case faultRedisRestart:
		return srv.redis
	case faultEtcdRestart:
		return srv.etcd
	case faultZKRestart:
		return srv.zk
	case faultPGRestart:
		return srv.postgres
	case faultMariaRestart:
		return srv.mariadb
	case faultRedlockNodeRestart:
		return srv.redlock[0]
	}
	panic("not a restart fault: " + string(k))
}

// quietZKLogger drops the ZooKeeper client's log lines (reconnects while the server is down are
// expected).
type quietZKLogger struct{}

func (quietZKLogger) Printf(string, ...any) {}

// quietMySQLLogger drops the MySQL driver's log lines.
type quietMySQLLogger struct{}

func (quietMySQLLogger) Print(...any) {}

// setupOtherBackend is setupBackend for the backends of otherServers.
func setupOtherBackend(ctx context.Context, t *testing.T, e *env, srv *servers, s scenario, ns string) (string, backendEnv) {
	t.Helper()
	newProxy := func(upstream string) *faultproxy.Proxy {
		p, err := faultproxy.New(upstream)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	var be backendEnv
	switch s.backend {
	case "zookeeper":
		be.proxy = newProxy(srv.zk.Addr())
		lb.Spec = locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendZooKeeper,
			ZooKeeper: &locksv1alpha1.ZooKeeperBackend{Servers: []locksv1alpha1.HostPort{locksv1alpha1.HostPort(be.proxy.Addr())}}}
		be.reader = zkReader{conn: srv.zkConn}
	case "postgresql", "mariadb":
		db, driver := srv.postgres, locksv1alpha1.SQLDriverPostgres
		if s.backend == "mariadb" {
			db, driver = srv.mariadb, locksv1alpha1.SQLDriverMySQL
		}
		be.proxy = newProxy(db.Addr())
		// The DSN is the server's own, pointed at the proxy.
		dsn := strings.Replace(db.DSN(), db.Addr(), be.proxy.Addr(), 1)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ns + "-dsn", Namespace: controllerNamespace},
			StringData: map[string]string{"dsn": dsn}}
		if err := e.c.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.c.Delete(context.Background(), secret) })
		lb.Spec = locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL,
			SQL: &locksv1alpha1.SQLBackend{Driver: driver, Table: sqlTable, DSNSecretRef: locksv1alpha1.SecretKeySelector{
				SecretReference: locksv1alpha1.SecretReference{Name: secret.Name, Namespace: controllerNamespace}, Key: "dsn"}}}
		be.reader = sqlReader{db: db.DB(), dialect: string(driver), table: sqlTable}
	case "redlock":
		var addrs []locksv1alpha1.HostPort
		var nodes []*goredis.Client
		for _, node := range srv.redlock {
			p := newProxy(node.Addr())
			be.nodeProxies = append(be.nodeProxies, p)
			addrs = append(addrs, locksv1alpha1.HostPort(p.Addr()))
			nodes = append(nodes, node.Client())
		}
		lb.Spec = locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedlock,
			Redlock: &locksv1alpha1.RedlockBackend{Addresses: addrs}}
		be.reader = redlockReader{nodes: nodes}
	default:
		t.Fatalf("unknown backend %q", s.backend)
	}
	if err := e.c.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), lb) })
	return lb.Name, be
}
