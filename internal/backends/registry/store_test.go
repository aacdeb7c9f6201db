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

package registry_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
)

// backendOf is a LockBackend called name with spec.
func backendOf(name string, spec locksv1alpha1.LockBackendSpec) *locksv1alpha1.LockBackend {
	return &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func redisAt(address string, db int32) locksv1alpha1.LockBackendSpec {
	return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
		Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(address), DB: db}}
}

func redlockAt(addresses ...locksv1alpha1.HostPort) locksv1alpha1.LockBackendSpec {
	return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedlock,
		Redlock: &locksv1alpha1.RedlockBackend{Addresses: addresses}}
}

func etcdAt(endpoints ...locksv1alpha1.EtcdEndpoint) locksv1alpha1.LockBackendSpec {
	return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd,
		Etcd: &locksv1alpha1.EtcdBackend{Endpoints: endpoints}}
}

func zooKeeperAt(servers ...locksv1alpha1.HostPort) locksv1alpha1.LockBackendSpec {
	return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendZooKeeper,
		ZooKeeper: &locksv1alpha1.ZooKeeperBackend{Servers: servers}}
}

func sqlAt(driver locksv1alpha1.SQLDriver, secret, key, table string) locksv1alpha1.LockBackendSpec {
	ref := locksv1alpha1.SecretKeySelector{SecretReference: locksv1alpha1.SecretReference{Namespace: "lockwarden-system", Name: secret}, Key: key}
	return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL,
		SQL: &locksv1alpha1.SQLBackend{Driver: driver, DSNSecretRef: ref, Table: table}}
}

var kubernetes = locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendKubernetes}

// TestStoreOf: two LockBackends are one store exactly when their identities are equal.
func TestStoreOf(t *testing.T) {
	tests := []struct {
		name string
		a, b *locksv1alpha1.LockBackend
		same bool
	}{
		{"the built-in backend and a Kubernetes LockBackend", nil, backendOf("k8s", kubernetes), true},
		{"two Kubernetes LockBackends", backendOf("k1", kubernetes), backendOf("k2", kubernetes), true},
		{"Redis: one server and db through two names", backendOf("r1", redisAt("redis.infra.svc:6379", 0)),
			backendOf("r2", redisAt("redis.infra.svc:6379", 0)), true},
		{"Redis: the host's case does not matter", backendOf("r1", redisAt("Redis.Infra.svc:6379", 2)),
			backendOf("r2", redisAt("redis.infra.svc:6379", 2)), true},
		{"Redis: no port is port 6379", backendOf("r1", redisAt("redis", 0)), backendOf("r2", redisAt("redis:6379", 0)), true},
		{"Redis: IPv6 hex digits' case does not matter", backendOf("r1", redisAt("[FD00::7]:6379", 0)),
			backendOf("r2", redisAt("[fd00::7]:6379", 0)), true},
		{"Redis: another db is another store", backendOf("r1", redisAt("redis:6379", 0)), backendOf("r2", redisAt("redis:6379", 1)), false},
		{"Redis: another port is another store", backendOf("r1", redisAt("redis:6379", 0)), backendOf("r2", redisAt("redis:6380", 0)), false},
		{"Redlock: the nodes' order does not matter", backendOf("l1", redlockAt("a:6379", "b:6379", "c:6379")),
			backendOf("l2", redlockAt("C:6379", "a:6379", "b:6379")), true},
		{"Redlock: another node is another store", backendOf("l1", redlockAt("a:6379", "b:6379", "c:6379")),
			backendOf("l2", redlockAt("a:6379", "b:6379", "d:6379")), false},
		{"Redis and Redlock sharing a node are not detected", backendOf("r", redisAt("a:6379", 0)),
			backendOf("l", redlockAt("a:6379", "b:6379", "c:6379")), false},
		{"etcd: scheme, case and order do not matter", backendOf("e1", etcdAt("https://etcd-0.etcd:2379", "http://ETCD-1.etcd:2379")),
			backendOf("e2", etcdAt("etcd-1.etcd:2379", "etcd-0.etcd:2379")), true},
		{"etcd: different members of one cluster are not detected", backendOf("e1", etcdAt("etcd-0.etcd:2379")),
			backendOf("e2", etcdAt("etcd-1.etcd:2379")), false},
		{"ZooKeeper: order does not matter", backendOf("z1", zooKeeperAt("zk-0:2181", "zk-1:2181")),
			backendOf("z2", zooKeeperAt("zk-1:2181", "zk-0:2181")), true},
		{"SQL: one DSN Secret key and table", backendOf("s1", sqlAt("postgres", "pg", "dsn", "locks")),
			backendOf("s2", sqlAt("postgres", "pg", "dsn", "locks")), true},
		{"SQL: no table is the default table", backendOf("s1", sqlAt("postgres", "pg", "dsn", "")),
			backendOf("s2", sqlAt("postgres", "pg", "dsn", "lockwarden_locks")), true},
		{"SQL: another table is another store", backendOf("s1", sqlAt("postgres", "pg", "dsn", "a")),
			backendOf("s2", sqlAt("postgres", "pg", "dsn", "b")), false},
		{"SQL: two Secrets are not detected, even with one DSN", backendOf("s1", sqlAt("postgres", "pg", "dsn", "locks")),
			backendOf("s2", sqlAt("postgres", "pg-copy", "dsn", "locks")), false},
		{"a Redis and an etcd LockBackend on one address are two stores", backendOf("r", redisAt("db:2379", 0)),
			backendOf("e", etcdAt("db:2379")), false},
		{"a spec without its member is its own store", backendOf("x1", locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis}),
			backendOf("x2", locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := registry.StoreOf(tt.a), registry.StoreOf(tt.b)
			if (a == b) != tt.same {
				t.Fatalf("StoreOf = %q and %q; want same=%v", a, b, tt.same)
			}
		})
	}
}

// TestStoreOfHoldsNoSecret: the identity names Secrets, never their values, and is the built-in
// store's for the built-in backend.
func TestStoreOfHoldsNoSecret(t *testing.T) {
	if got := registry.StoreOf(nil); got != registry.BuiltinStore {
		t.Fatalf("StoreOf(nil) = %q, want %q", got, registry.BuiltinStore)
	}
	lb := backendOf("s", sqlAt("mysql", "db-dsn", "dsn", "locks"))
	want := "sql/mysql/lockwarden-system/db-dsn/dsn/locks"
	if got := registry.StoreOf(lb); got != want {
		t.Fatalf("StoreOf(sql) = %q, want %q", got, want)
	}
	redis := backendOf("r", redisAt("redis:6379", 3))
	redis.Spec.Redis.PasswordSecretRef = &locksv1alpha1.SecretKeySelector{
		SecretReference: locksv1alpha1.SecretReference{Namespace: "lockwarden-system", Name: "redis-auth"}, Key: "password"}
	if got := registry.StoreOf(redis); got != "redis/redis:6379/3" || strings.Contains(got, "redis-auth") {
		t.Fatalf("StoreOf(redis) = %q, want redis/redis:6379/3", got)
	}
}
