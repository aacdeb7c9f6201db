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

package registry

import (
	"net"
	"slices"
	"strconv"
	"strings"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// BuiltinStore is the store identity of the built-in backend and of every LockBackend of type
// Kubernetes: all of them keep their holds in the same Kubernetes API.
const BuiltinStore = "kubernetes"

// Default ports, used when an address has none (the API requires one today; an object written
// before that rule, or by hand in a test, may lack it).
const (
	redisPort     = 6379
	etcdPort      = 2379
	zooKeeperPort = 2181
)

// StoreOf names the store that lb's locks live in (nil: the built-in backend), so that the key
// ledger can tell one key in one store however many LockBackends reach it (docs/design.md §2: two
// LockBackends that reach the same store share the KeyConflict rule). It reads only lb's spec,
// never a Secret, and its result holds no secret value: it is written into ledger Lease
// annotations.
//
// Two LockBackends get the same identity when:
//   - both are the built-in backend or of type Kubernetes;
//   - Redis: the same address (host lowercased, port 6379 if none) and the same db;
//   - Redlock: the same set of node addresses, normalized the same way, in any order;
//   - Etcd: the same set of endpoints, without http:// or https://, lowercased, in any order;
//   - ZooKeeper: the same set of servers in any order (the spec has no chroot, so there is
//     none to compare);
//   - SQL: the same driver, the same DSN Secret reference (namespace, name and key) and the same
//     table. The DSN itself is a secret and is not read.
//
// What it does not detect, because telling would need the store's own answer or a secret: two
// Secrets (or two keys of one Secret) whose DSNs name one database; two names or addresses of one
// host (a Service name and its IP, two DNS aliases); two etcd endpoint lists that name different
// members of one cluster; two ZooKeeper server lists of one ensemble that differ; a Redis and a
// Redlock LockBackend that share a node. Locks reaching one key through such LockBackends are not
// stopped by the ledger.
func StoreOf(lb *locksv1alpha1.LockBackend) string {
	if lb == nil {
		return BuiltinStore
	}
	s := lb.Spec
	switch {
	case s.Type == locksv1alpha1.BackendKubernetes:
		return BuiltinStore
	case s.Type == locksv1alpha1.BackendRedis && s.Redis != nil:
		return "redis/" + hostPort(string(s.Redis.Address), redisPort) + "/" + strconv.Itoa(int(s.Redis.DB))
	case s.Type == locksv1alpha1.BackendRedlock && s.Redlock != nil:
		return "redlock/" + addressSet(s.Redlock.Addresses, redisPort)
	case s.Type == locksv1alpha1.BackendEtcd && s.Etcd != nil:
		return "etcd/" + addressSet(s.Etcd.Endpoints, etcdPort)
	case s.Type == locksv1alpha1.BackendZooKeeper && s.ZooKeeper != nil:
		return "zookeeper/" + addressSet(s.ZooKeeper.Servers, zooKeeperPort)
	case s.Type == locksv1alpha1.BackendSQL && s.SQL != nil:
		return sqlStore(s.SQL)
	}
	// A type this build does not know, or a spec without its member: such a backend cannot be
	// opened; its name keeps it apart from every other store.
	return MissingStore(lb.Name)
}

// MissingStore is the identity used for a LockBackend that cannot be read (it does not exist):
// its name, so that locks on it share a key with no lock of another backend.
func MissingStore(name string) string { return "lockbackend/" + name }

// sqlStore is a SQL backend's identity: the DSN Secret's reference stands for the DSN, which is a
// secret.
func sqlStore(s *locksv1alpha1.SQLBackend) string {
	table := s.Table
	if table == "" {
		table = "lockwarden_locks" // the API's default
	}
	ref := s.DSNSecretRef
	return "sql/" + string(s.Driver) + "/" + ref.Namespace + "/" + ref.Name + "/" + ref.Key + "/" + table
}

// addressSet is addresses normalized, deduplicated, sorted and joined by commas: a set of nodes
// names one store whatever order it is written in.
func addressSet[A ~string](addresses []A, defaultPort int) string {
	out := make([]string, 0, len(addresses))
	for _, a := range addresses {
		out = append(out, hostPort(string(a), defaultPort))
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}

// hostPort normalizes an address: without an http:// or https:// scheme or a trailing slash,
// host lowercased (DNS names and IPv6 hex digits are case-insensitive), defaultPort when it has
// none.
func hostPort(address string, defaultPort int) string {
	a := strings.ToLower(strings.TrimSpace(address))
	a = strings.TrimPrefix(strings.TrimPrefix(a, "http://"), "https://")
	a = strings.TrimSuffix(a, "/")
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		// No port: the whole address is the host (an IPv6 address may come bracketed).
		host, port = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), strconv.Itoa(defaultPort)
	}
	return net.JoinHostPort(strings.TrimSuffix(host, "."), port)
}
