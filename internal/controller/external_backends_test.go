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

package controller_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/zookeeper"
	"github.com/lockwarden/lockwarden/internal/testutil/etcdtest"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
	"github.com/lockwarden/lockwarden/internal/testutil/sqltest"
	"github.com/lockwarden/lockwarden/internal/testutil/zktest"
)

// The handoff story on real server processes, through the real Redis, Redlock and etcd backends.

// newReadyBackend creates a LockBackend and waits until its probe succeeds.
func newReadyBackend(spec locksv1alpha1.LockBackendSpec) string {
	GinkgoHelper()
	lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{GenerateName: "real-"}, Spec: spec}
	Expect(k8sClient.Create(ctx(), lb)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx(), lb) })
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx(), key(lb), lb)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(lb.Status.Conditions, locksv1alpha1.ConditionReady)).To(BeTrue(),
			"conditions: %+v", lb.Status.Conditions)
	}).Should(Succeed())
	return lb.Name
}

// newRedisBackend starts a redis-server and returns a Ready LockBackend on it, with the server.
func newRedisBackend() (string, *redistest.Server) {
	GinkgoHelper()
	server := redistest.Start(GinkgoTB(), redistest.Options{})
	return newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
		Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(server.Addr())}}), server
}

// handoffStory grants claims for three pods in order on lock, hands over on pod death and claim
// deletion, and checks that the tokens increase.
func handoffStory(backend string) {
	GinkgoHelper()
	ns := newNamespace()
	newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = backend })
	pods := []*corev1.Pod{newPod(ns, "p0"), newPod(ns, "p1"), newPod(ns, "p2")}
	for i, p := range pods {
		newClaim(ns, "c"+string(rune('0'+i)), "db", p.Name)
	}
	Eventually(phaseOf(ns, "c0")).Should(Equal(held))
	Eventually(acquired(ns, "c2")).Should(Equal("False/Queued"))
	t0 := claimOf(ns, "c0")(Default).Status.FencingToken

	deleteNow(pods[0]) // pod death
	Eventually(phaseOf(ns, "c1")).Should(Equal(held))
	t1 := claimOf(ns, "c1")(Default).Status.FencingToken
	Expect(t1).To(BeNumerically(">", t0))

	deleteNow(claimOf(ns, "c1")(Default)) // claim deleted
	Eventually(phaseOf(ns, "c2")).Should(Equal(held))
	Expect(claimOf(ns, "c2")(Default).Status.FencingToken).To(BeNumerically(">", t1))
}

// severalStory holds two locks of backend together: nothing while one is held, both at once
// after, with a token of each lock above the last; and refuses a claim whose locks are on this
// backend and the built-in one (MixedBackends).
func severalStory(backend string) {
	GinkgoHelper()
	ns := newNamespace()
	onBackend := func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = backend }
	newLock(ns, "x", onBackend)
	newLock(ns, "y", onBackend)
	newClaim(ns, "on-y", "y", "")
	Eventually(phaseOf(ns, "on-y")).Should(Equal(held))
	yToken := claimOf(ns, "on-y")(Default).Status.FencingToken
	newSeveralClaim(ns, "both", "y", "x")
	Eventually(acquired(ns, "both")).Should(Equal("False/WaitingForLocks"))
	Expect(holderClaimsOf(ns, "x")(Default)).To(BeEmpty(), "nothing of x is held while y is taken")

	deleteNow(claimOf(ns, "on-y")(Default))
	Eventually(phaseOf(ns, "both")).Should(Equal(held))
	both := claimOf(ns, "both")(Default)
	Expect(both.Status.Locks).To(HaveLen(2))
	Expect(recordTokenOf(ns, "y", "both")).To(BeNumerically(">", yToken))
	xToken := recordTokenOf(ns, "x", "both")
	Expect(both.Status.Locks[0]).To(HaveField("FencingToken", xToken))
	newClaim(ns, "on-x", "x", "")
	Eventually(acquired(ns, "on-x")).Should(Equal("False/Queued"))
	deleteNow(both)
	Eventually(phaseOf(ns, "on-x")).Should(Equal(held))
	Expect(claimOf(ns, "on-x")(Default).Status.FencingToken).To(BeNumerically(">", xToken))

	newLock(ns, "built-in")
	newSeveralClaim(ns, "mixed", "x", "built-in")
	Eventually(acquired(ns, "mixed")).Should(Equal("False/MixedBackends"))
	Expect(holderClaimsOf(ns, "built-in")(Default)).To(BeEmpty())
}

// expectUnusable creates a LockBackend from spec, waits until its probe reports it not Ready,
// checks that nothing is granted on it, and returns the Ready condition's message.
func expectUnusable(spec locksv1alpha1.LockBackendSpec, wantReason string) string {
	GinkgoHelper()
	lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{GenerateName: "unusable-"}, Spec: spec}
	Expect(k8sClient.Create(ctx(), lb)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx(), lb) })
	var message string
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx(), key(lb), lb)).To(Succeed())
		ready := meta.FindStatusCondition(lb.Status.Conditions, locksv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(BeEquivalentTo("False"))
		g.Expect(ready.Reason).To(Equal(wantReason))
		message = ready.Message
	}).Should(Succeed())

	ns := newNamespace()
	newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = lb.Name })
	newClaim(ns, "c", "db", "")
	Eventually(acquired(ns, "c")).Should(Equal("False/BackendUnavailable"))
	Consistently(phaseOf(ns, "c")).WithTimeout(2 * time.Second).Should(Equal(pending))
	// The probe's error (addresses, driver and TLS details) is for whoever may read the
	// cluster-scoped LockBackend: the namespace's lock and claim say where to look instead.
	Expect(message).NotTo(BeEmpty())
	lock := &locksv1alpha1.DistributedLock{}
	Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "db"}, lock)).To(Succeed())
	for _, c := range append(lock.Status.Conditions, claimOf(ns, "c")(Default).Status.Conditions...) {
		Expect(c.Message).NotTo(ContainSubstring(message), "condition %s of the namespace's lock or claim", c.Type)
	}
	return message
}

var _ = Describe("The Redis backend on a real redis-server", func() {
	It("is probed Ready and hands a lock over in order with increasing tokens, and holds two of its locks together", func() {
		name, _ := newRedisBackend()
		handoffStory(name)
		severalStory(name)
	})

	It("reports a dead address as not Ready with the dial error and grants nothing", func() {
		dead := redistest.Start(GinkgoTB(), redistest.Options{})
		addr := dead.Addr()
		dead.Kill()
		message := expectUnusable(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
			Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(addr)}}, locksv1alpha1.ReasonBackendUnreachable)
		Expect(message).To(ContainSubstring(addr))
		Expect(message).To(ContainSubstring("connection refused"))
	})

	It("reports a lock lost when Redis restarts without persistence, and never reuses a token", func() {
		name, server := newRedisBackend()
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = name })
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
		tokenA := claimOf(ns, "a")(Default).Status.FencingToken

		server.Kill()
		server.Restart() // empty: --save "" --appendonly no
		Eventually(phaseOf(ns, "a")).WithTimeout(20 * time.Second).Should(Equal(locksv1alpha1.ClaimLost))
		Expect(acquired(ns, "a")()).To(Equal("False/RenewFailed"))
		Eventually(phaseOf(ns, "b")).WithTimeout(20 * time.Second).Should(Equal(held))
		Expect(claimOf(ns, "b")(Default).Status.FencingToken).To(BeNumerically(">", tokenA))
	})
})

var _ = Describe("The Redlock backend on three real redis-servers", func() {
	It("is probed Ready and hands a lock over in order with increasing tokens, and holds two of its locks together", func() {
		servers := redistest.StartN(GinkgoTB(), 3, redistest.Options{})
		var addrs []locksv1alpha1.HostPort
		for _, s := range servers {
			addrs = append(addrs, locksv1alpha1.HostPort(s.Addr()))
		}
		name := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedlock,
			Redlock: &locksv1alpha1.RedlockBackend{Addresses: addrs}})
		handoffStory(name)
		severalStory(name)
	})
})

var _ = Describe("The Redlock backend with one of three nodes down", func() {
	It("stays Ready but says it is degraded, names the dead node, and keeps granting", func() {
		servers := redistest.StartN(GinkgoTB(), 3, redistest.Options{})
		var addrs []locksv1alpha1.HostPort
		for _, s := range servers {
			addrs = append(addrs, locksv1alpha1.HostPort(s.Addr()))
		}
		name := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedlock,
			Redlock: &locksv1alpha1.RedlockBackend{Addresses: addrs}})
		servers[2].Kill()
		Eventually(func(g Gomega) {
			lb := &locksv1alpha1.LockBackend{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Name: name}, lb)).To(Succeed())
			ready := meta.FindStatusCondition(lb.Status.Conditions, locksv1alpha1.ConditionReady)
			g.Expect(ready.Status).To(BeEquivalentTo("True"))
			g.Expect(ready.Reason).To(Equal(locksv1alpha1.ReasonBackendDegraded))
			g.Expect(ready.Message).To(ContainSubstring(servers[2].Addr()))
		}).Should(Succeed())
		handoffStory(name)
	})
})

var _ = Describe("The etcd backend on a real etcd", func() {
	It("is probed Ready and hands a lock over in order with increasing tokens, and holds two of its locks together", func() {
		member := etcdtest.Start(GinkgoTB())
		name := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd,
			Etcd: &locksv1alpha1.EtcdBackend{Endpoints: []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint(member.Endpoint())}}})
		handoffStory(name)
		severalStory(name)
	})

	It("reports a dead endpoint as not Ready and grants nothing", func() {
		member := etcdtest.Start(GinkgoTB())
		endpoint := member.Endpoint()
		member.Kill()
		message := expectUnusable(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd,
			Etcd: &locksv1alpha1.EtcdBackend{Endpoints: []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint(endpoint)}}},
			locksv1alpha1.ReasonBackendUnreachable)
		Expect(message).To(ContainSubstring(strings.TrimPrefix(endpoint, "http://")))
	})

	It("grants a key held by a client outside lockwarden as soon as that client's lease ends", func() {
		member := etcdtest.Start(GinkgoTB())
		// Verbatim: the key is shared with a client outside Kubernetes.
		name := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd, KeyPolicy: locksv1alpha1.KeyPolicyVerbatim,
			Etcd: &locksv1alpha1.EtcdBackend{Endpoints: []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint(member.Endpoint())}}})
		outside, err := clientv3.New(clientv3.Config{Endpoints: []string{member.Endpoint()}, DialTimeout: 5 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(outside.Close)
		grant, err := outside.Grant(ctx(), 120)
		Expect(err).NotTo(HaveOccurred())
		_, err = outside.Put(ctx(), "nightly-batch", "cron-on-vm-7", clientv3.WithLease(grant.ID))
		Expect(err).NotTo(HaveOccurred())

		ns := newNamespace()
		newLock(ns, "batch", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = name
			l.Spec.Key = "nightly-batch"
		})
		newClaim(ns, "c", "batch", "")
		Eventually(acquired(ns, "c")).Should(Equal("False/Contended"))
		_, err = outside.Revoke(ctx(), grant.ID) // as when the outside client dies and its lease runs out
		Expect(err).NotTo(HaveOccurred())
		// Without the watch the claim would look again only when the lease was due (120 s).
		Eventually(phaseOf(ns, "c")).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(held))
	})
})

var _ = Describe("The ZooKeeper backend on a real ZooKeeper", func() {
	zkBackend := func(server *zktest.Server) locksv1alpha1.LockBackendSpec {
		return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendZooKeeper,
			ZooKeeper: &locksv1alpha1.ZooKeeperBackend{Servers: []locksv1alpha1.HostPort{locksv1alpha1.HostPort(server.Addr())},
				SessionTimeoutSeconds: 4}}
	}

	It("is probed Ready and hands a lock over in order with increasing tokens, and holds two of its locks together", func() {
		name := newReadyBackend(zkBackend(zktest.Start(GinkgoTB())))
		handoffStory(name)
		severalStory(name)
	})

	It("reports a dead server as not Ready and grants nothing", func() {
		server := zktest.Start(GinkgoTB())
		spec := zkBackend(server)
		server.Kill()
		Expect(expectUnusable(spec, locksv1alpha1.ReasonBackendUnreachable)).To(ContainSubstring(server.Addr()))
	})

	It("grants a key held by a client outside lockwarden as soon as its watch says it is freed", func() {
		server := zktest.Start(GinkgoTB())
		spec := zkBackend(server)
		spec.KeyPolicy = locksv1alpha1.KeyPolicyVerbatim // the key is shared with a client outside Kubernetes
		name := newReadyBackend(spec)
		outside, _, err := zk.Connect([]string{server.Addr()}, 4*time.Second, zk.WithLogInfo(false))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(outside.Close)
		guard := zookeeper.DefaultRoot + "/nightly-batch"
		_, err = outside.Create(zookeeper.DefaultRoot, nil, 0, zk.WorldACL(zk.PermAll))
		Expect(err).To(Or(Not(HaveOccurred()), MatchError(zk.ErrNodeExists)))
		_, err = outside.Create(guard, nil, 0, zk.WorldACL(zk.PermAll))
		Expect(err).NotTo(HaveOccurred())
		node := guard + "/" + zookeeper.LockNodeName
		_, err = outside.Create(node, []byte("cron-on-vm-7"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		Expect(err).NotTo(HaveOccurred())

		ns := newNamespace()
		newLock(ns, "batch", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = name
			l.Spec.Key = "nightly-batch"
		})
		newClaim(ns, "c", "batch", "")
		Eventually(acquired(ns, "c")).Should(Equal("False/Contended"))
		cond := meta.FindStatusCondition(claimOf(ns, "c")(Default).Status.Conditions, locksv1alpha1.ConditionAcquired)
		// The holder is not named: its value is whatever the outside client wrote.
		Expect(cond.Message).To(ContainSubstring("held on the backend by another client"))
		Expect(cond.Message).NotTo(ContainSubstring("cron-on-vm-7"))

		Expect(outside.Delete(node, -1)).To(Succeed())
		freed := time.Now()
		// Without the watch the claim would look again only after freeWatchFallback (30 s).
		Eventually(phaseOf(ns, "c")).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(held))
		GinkgoWriter.Printf("granted %v after the outside holder let go\n", time.Since(freed))
	})
})

var _ = Describe("A ZooKeeper server down for longer than a lock's lease", func() {
	It("makes the holder's claim Lost and grants the next claim with a higher token once it is back", func() {
		server := zktest.Start(GinkgoTB())
		name := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendZooKeeper,
			ZooKeeper: &locksv1alpha1.ZooKeeperBackend{Servers: []locksv1alpha1.HostPort{locksv1alpha1.HostPort(server.Addr())},
				SessionTimeoutSeconds: 4}})
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = name })
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
		tokenA := claimOf(ns, "a")(Default).Status.FencingToken

		server.Kill()
		Eventually(phaseOf(ns, "a")).WithTimeout(20 * time.Second).Should(Equal(locksv1alpha1.ClaimLost))
		Expect(acquired(ns, "a")()).To(Equal("False/RenewFailed"))
		Consistently(phaseOf(ns, "b")).WithTimeout(time.Second).Should(Equal(pending), "nothing is granted while the backend is down")
		server.Restart()
		Eventually(phaseOf(ns, "b")).WithTimeout(40 * time.Second).Should(Equal(held))
		Expect(claimOf(ns, "b")(Default).Status.FencingToken).To(BeNumerically(">", tokenA))
	})
})

// newDSNSecret stores dsn in a Secret in the controller's Secret namespace and returns a
// reference to it.
func newDSNSecret(dsn string) locksv1alpha1.SecretKeySelector {
	GinkgoHelper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "dsn-", Namespace: controllerNamespace},
		StringData: map[string]string{"dsn": dsn}}
	Expect(k8sClient.Create(ctx(), s)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx(), s) })
	return locksv1alpha1.SecretKeySelector{
		SecretReference: locksv1alpha1.SecretReference{Name: s.Name, Namespace: controllerNamespace}, Key: "dsn"}
}

// sqlDatabases are the SQL servers the SQL specs run on, with the driver that speaks to each.
var sqlDatabases = []struct {
	name   string
	driver locksv1alpha1.SQLDriver
	start  func(testing.TB) *sqltest.Server
}{
	{"PostgreSQL", locksv1alpha1.SQLDriverPostgres, sqltest.StartPostgres},
	{"MariaDB", locksv1alpha1.SQLDriverMySQL, sqltest.StartMariaDB},
}

var _ = Describe("The SQL backend on real databases", func() {
	for _, db := range sqlDatabases {
		It("is probed Ready on "+db.name+" and hands a lock over in order with increasing tokens, and holds two of its locks together", func() {
			server := db.start(GinkgoTB())
			name := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL,
				SQL: &locksv1alpha1.SQLBackend{Driver: db.driver, DSNSecretRef: newDSNSecret(server.DSN())}})
			handoffStory(name)
			severalStory(name)
		})

		It("reports a wrong password on "+db.name+" as not Ready without revealing it, and grants nothing", func() {
			server := db.start(GinkgoTB())
			const password = "Wr0ng-p4ss:word@"
			message := expectUnusable(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL, SQL: &locksv1alpha1.SQLBackend{
				Driver: db.driver, DSNSecretRef: newDSNSecret(server.DSNWith(sqltest.User, password))}},
				locksv1alpha1.ReasonBackendUnreachable)
			Expect(message).To(ContainSubstring(server.Addr()), "the message says which database refused")
			Expect(message).To(Or(ContainSubstring("password authentication failed"), ContainSubstring("Access denied")))
			Expect(message).NotTo(ContainSubstring("Wr0ng"))
			Expect(message).NotTo(ContainSubstring("p4ss"))
			list := &eventsv1.EventList{}
			Expect(k8sClient.List(ctx(), list)).To(Succeed())
			for _, e := range list.Items {
				Expect(e.Note).NotTo(ContainSubstring("p4ss"), "event %s/%s", e.Namespace, e.Name)
			}
		})
	}
})
