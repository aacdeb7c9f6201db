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
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/zookeeper"
	"github.com/lockwarden/lockwarden/internal/testutil/etcdtest"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
	"github.com/lockwarden/lockwarden/internal/testutil/zktest"
)

// Editing a LockBackend, or rotating a Secret it reads, while a lock is held on it: the new
// session takes the hold over before the old one closes (package registry), so the holder never
// sees Lost and the next claim keeps waiting.

// heldAcrossAnEdit holds a lock on backend with a claim queued behind it, runs edit with the
// lock's backend key, waits until the edited backend is probed Ready, and checks that the hold
// outlives the old session by several leases with the same token, and that the lock still hands
// over afterwards.
func heldAcrossAnEdit(backend string, edit func(key string)) {
	GinkgoHelper()
	ns := newNamespace()
	lock := newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = backend })
	newClaim(ns, "a", "db", "")
	Eventually(phaseOf(ns, "a")).Should(Equal(held))
	newClaim(ns, "b", "db", "")
	Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
	token := claimOf(ns, "a")(Default).Status.FencingToken

	lb := &locksv1alpha1.LockBackend{}
	Expect(k8sClient.Get(ctx(), client.ObjectKey{Name: backend}, lb)).To(Succeed())
	before := lb.Generation
	edit("lockwarden/" + ns + "/db")
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Name: backend}, lb)).To(Succeed())
		g.Expect(lb.Generation).To(BeNumerically(">=", before))
		ready := meta.FindStatusCondition(lb.Status.Conditions, locksv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(BeEquivalentTo("True"), "conditions: %+v", lb.Status.Conditions)
		g.Expect(ready.ObservedGeneration).To(Equal(lb.Generation))
	}).Should(Succeed())

	lease := time.Duration(lock.Spec.LeaseDurationSeconds) * time.Second
	Consistently(phaseOf(ns, "a")).WithTimeout(3*lease).WithPolling(200*time.Millisecond).Should(Equal(held),
		"the hold must survive the edit")
	Expect(claimOf(ns, "a")(Default).Status.FencingToken).To(Equal(token))
	Expect(acquired(ns, "b")()).To(Equal("False/Queued"))

	deleteNow(claimOf(ns, "a")(Default))
	Eventually(phaseOf(ns, "b")).Should(Equal(held))
	Expect(claimOf(ns, "b")(Default).Status.FencingToken).To(BeNumerically(">", token))
}

// editBackend applies mutate to the LockBackend called name.
func editBackend(name string, mutate func(*locksv1alpha1.LockBackendSpec)) {
	GinkgoHelper()
	Eventually(func() error {
		lb := &locksv1alpha1.LockBackend{}
		if err := k8sClient.Get(ctx(), client.ObjectKey{Name: name}, lb); err != nil {
			return err
		}
		mutate(&lb.Spec)
		return k8sClient.Update(ctx(), lb)
	}).Should(Succeed())
}

var _ = Describe("Editing a ZooKeeper LockBackend with a lock held", func() {
	It("moves the lock node to the new session before closing the old one", func() {
		server := zktest.Start(GinkgoTB())
		name := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendZooKeeper,
			ZooKeeper: &locksv1alpha1.ZooKeeperBackend{Servers: []locksv1alpha1.HostPort{locksv1alpha1.HostPort(server.Addr())},
				SessionTimeoutSeconds: 4}})
		watcher, _, err := zk.Connect([]string{server.Addr()}, 4*time.Second, zk.WithLogInfo(false))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(watcher.Close)
		var owner int64
		var gaps atomic.Int32
		stop := make(chan struct{})
		polled := make(chan struct{})
		var node string
		heldAcrossAnEdit(name, func(key string) {
			node = zookeeper.DefaultRoot + "/" + url.PathEscape(key) + "/" + zookeeper.LockNodeName
			_, stat, err := watcher.Get(node)
			Expect(err).NotTo(HaveOccurred(), "the held lock's node")
			owner = stat.EphemeralOwner
			// Closing the session first would delete the node, and so free the key on the
			// ensemble, until the new session took it again.
			go func() {
				defer close(polled)
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if ok, _, err := watcher.Exists(node); err == nil && !ok {
						gaps.Add(1)
					}
				}
			}()
			editBackend(name, func(s *locksv1alpha1.LockBackendSpec) { s.ZooKeeper.SessionTimeoutSeconds = 6 })
			Eventually(func() (int64, error) {
				_, stat, err := watcher.Get(node)
				if err != nil {
					return 0, err
				}
				return stat.EphemeralOwner, nil
			}).WithTimeout(10*time.Second).ShouldNot(Equal(owner), "the node moves to the new session")
			close(stop)
			<-polled
			Expect(gaps.Load()).To(BeZero(), "the key must never be free on the ensemble while it moves")
		})
	})
})

var _ = Describe("Moving a Redis LockBackend to another server with a lock held", func() {
	It("takes the key on the new server for the same holder before letting the old one go", func() {
		name, _ := newRedisBackend()
		moved := redistest.Start(GinkgoTB(), redistest.Options{})
		var onNewServer string
		heldAcrossAnEdit(name, func(string) {
			editBackend(name, func(s *locksv1alpha1.LockBackendSpec) { s.Redis.Address = locksv1alpha1.HostPort(moved.Addr()) })
			rdb := goredis.NewClient(&goredis.Options{Addr: moved.Addr()})
			DeferCleanup(rdb.Close)
			Eventually(func() ([]string, error) { return rdb.Keys(ctx(), "lockwarden/*").Result() }).
				WithTimeout(10*time.Second).Should(HaveLen(1), "the held key, taken on the new server")
			keys, _ := rdb.Keys(ctx(), "lockwarden/*").Result()
			onNewServer, _ = rdb.Get(ctx(), keys[0]).Result()
		})
		Expect(onNewServer).To(HavePrefix("lockwarden/"), "the holder's backend identity")
	})
})

var _ = Describe("Editing an etcd LockBackend with a lock held", func() {
	It("keeps the lock held", func() {
		member := etcdtest.Start(GinkgoTB())
		name := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd,
			Etcd: &locksv1alpha1.EtcdBackend{Endpoints: []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint(member.Endpoint())}}})
		heldAcrossAnEdit(name, func(string) {
			// The same member, written without its scheme: a new spec, so a new session.
			editBackend(name, func(s *locksv1alpha1.LockBackendSpec) {
				s.Etcd.Endpoints = []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint(strings.TrimPrefix(member.Endpoint(), "http://"))}
			})
		})
	})
})

var _ = Describe("Rotating the DSN Secret of a SQL LockBackend with a lock held", func() {
	for _, db := range sqlDatabases {
		It("opens a session with the new value on "+db.name+" and keeps the lock held", func() {
			server := db.start(GinkgoTB())
			ref := newDSNSecret(server.DSN())
			name := newReadyBackend(locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL,
				SQL: &locksv1alpha1.SQLBackend{Driver: db.driver, DSNSecretRef: ref}})
			heldAcrossAnEdit(name, func(string) {
				secret := &corev1.Secret{}
				Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret)).To(Succeed())
				rotated := strings.Replace(server.DSN(), "timeout=5", "timeout=6", 1)
				Expect(rotated).NotTo(Equal(server.DSN()))
				secret.Data = map[string][]byte{ref.Key: []byte(rotated)}
				Expect(k8sClient.Update(ctx(), secret)).To(Succeed())
				Eventually(func(g Gomega) {
					list := &eventsv1.EventList{}
					g.Expect(k8sClient.List(ctx(), list)).To(Succeed())
					found := false
					for _, e := range list.Items {
						found = found || (e.Regarding.Name == name && e.Reason == locksv1alpha1.ReasonSecretRotated)
					}
					g.Expect(found).To(BeTrue(), "a SecretRotated event on the LockBackend")
				}).WithTimeout(10 * time.Second).Should(Succeed())
			})
		})
	}
})
