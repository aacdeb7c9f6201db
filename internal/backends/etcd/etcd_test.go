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

package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/backendtest"
	"github.com/lockwarden/lockwarden/internal/backends/etcd"
	"github.com/lockwarden/lockwarden/internal/testutil/etcdtest"
)

// These tests run against real etcd processes that etcdtest starts per test.

// holdTTL is the TTL of holds that must outlast a test.
const holdTTL = time.Minute

func newBackend(t *testing.T, endpoints []string, opts ...etcd.Option) *etcd.Backend {
	t.Helper()
	b, err := etcd.New(etcd.Config{Endpoints: endpoints}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// rawClient is a plain etcd client: "another application", and a reader of the store's state.
func rawClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// harness opens sessions with srv for the conformance suites.
func harness(srv *etcdtest.Member) backendtest.Harness {
	return backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			b, err := etcd.New(etcd.Config{Endpoints: []string{srv.Endpoint()}})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return b
		},
		// Real time, whole seconds: etcd lease TTLs are whole seconds, expired by the leader.
		TTL:        2 * time.Second,
		RoundTrips: func(b backends.Backend) int64 { return b.(*etcd.Backend).RoundTrips() },
	}
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, harness(etcdtest.Start(t)))
}

func TestSharedConformance(t *testing.T) {
	backendtest.RunShared(t, harness(etcdtest.Start(t)))
}

// Renewal costs one KeepAliveOnce plus one transaction per 100 locks: 250 locks, four requests.
func TestRenewCost(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := etcdtest.Start(t)
	b := newBackend(t, []string{srv.Endpoint()})

	leases := make([]backends.Lease, 250)
	for i := range leases {
		l, err := b.TryAcquire(ctx, fmt.Sprintf("renew-cost/k%03d", i), fmt.Sprintf("id%03d", i), holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		leases[i] = l
	}
	before := b.RoundTrips()
	renewed, lost, err := b.Renew(ctx, leases, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(len(leases)))
	g.Expect(b.RoundTrips()-before).To(BeEquivalentTo(4), "one KeepAliveOnce and three transactions")

	before = b.RoundTrips()
	_, _, err = b.Renew(ctx, leases[:1], holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.RoundTrips()-before).To(BeEquivalentTo(2), "one KeepAliveOnce and one transaction")
}

// Keys are stored as given, valued with the identity, on one etcd lease per distinct TTL of the
// session; Version is the key's create revision, kept while the hold lasts; Renew moves a key onto
// the lease of the TTL it renews with.
func TestKeysLeasesAndVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := etcdtest.Start(t)
	raw := rawClient(t, []string{srv.Endpoint()})
	b := newBackend(t, []string{srv.Endpoint()})

	get := func(key string) (value string, createRev int64, lease clientv3.LeaseID) {
		resp, err := raw.Get(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Kvs).To(HaveLen(1), "key %q exists", key)
		kv := resp.Kvs[0]
		return string(kv.Value), kv.CreateRevision, clientv3.LeaseID(kv.Lease)
	}

	l1, err := b.TryAcquire(ctx, "ns/lock-1", "pod-a", 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	l2, err := b.TryAcquire(ctx, "ns/lock-2", "pod-b", 7*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	l3, err := b.TryAcquire(ctx, "ns/lock-3", "pod-c", 4500*time.Millisecond) // rounds up to 5 s
	g.Expect(err).NotTo(HaveOccurred())

	v1, rev1, lease1 := get("ns/lock-1")
	g.Expect(v1).To(Equal("pod-a"))
	g.Expect(l1.Version).To(Equal(strconv.FormatInt(rev1, 10)))
	_, _, lease2 := get("ns/lock-2")
	_, _, lease3 := get("ns/lock-3")
	g.Expect(lease2).NotTo(Equal(lease1), "another TTL, another etcd lease")
	g.Expect(lease3).To(Equal(lease1), "the same TTL in whole seconds, the same etcd lease")
	ttl, err := raw.TimeToLive(ctx, lease1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ttl.GrantedTTL).To(BeEquivalentTo(5))
	_, _, holdLease := get(etcd.HoldKeyPrefix + "ns/lock-1")
	g.Expect(holdLease).To(Equal(lease1), "the hold record lives and dies with the lock")

	renewed, lost, err := b.Renew(ctx, []backends.Lease{l2, l3}, 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(2))
	_, rev2, moved := get("ns/lock-2")
	g.Expect(moved).To(Equal(lease1), "renewing with 5 s moved the lock onto the 5 s lease")
	g.Expect(renewed[0].Version).To(Equal(strconv.FormatInt(rev2, 10)), "the hold, and its Version, go on")
	g.Expect(renewed[0].TTL).To(Equal(5 * time.Second))
	_, _, holdMoved := get(etcd.HoldKeyPrefix + "ns/lock-2")
	g.Expect(holdMoved).To(Equal(lease1))

	// Another client deletes and re-creates the key with the same value: a new hold, so the old
	// lease is lost, not silently continued.
	_, err = raw.Delete(ctx, "ns/lock-1")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.Put(ctx, "ns/lock-1", "pod-a")
	g.Expect(err).NotTo(HaveOccurred())
	renewed, lost, err = b.Renew(ctx, []backends.Lease{l1}, 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(HaveLen(1))

	// A key written by another client without a lease is a lock held with no expiry.
	_, err = b.TryAcquire(ctx, "ns/lock-1", "pod-z", holdTTL)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	got, err := b.Inspect(ctx, "ns/lock-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Identity).To(Equal("pod-a"))
	g.Expect(got.ExpireTime.IsZero()).To(BeTrue())
}

// Close does not revoke the session's leases: the locks outlive it until their TTL.
func TestCloseKeepsLocks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := etcdtest.Start(t)
	b := newBackend(t, []string{srv.Endpoint()})
	l, err := b.TryAcquire(ctx, "close/k", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Close(ctx)).To(Succeed())
	_, err = b.TryAcquire(ctx, "close/other", "pod-a", holdTTL)
	g.Expect(err).To(MatchError(ContainSubstring("closed")))

	other := newBackend(t, []string{srv.Endpoint()})
	got, err := other.Inspect(ctx, "close/k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Version).To(Equal(l.Version))
}

// A dead endpoint gives readable errors, quickly, and grants nothing.
func TestDeadEndpoint(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b := newBackend(t, []string{"http://127.0.0.1:1"}, etcd.WithCallTimeout(500*time.Millisecond))
	start := time.Now()
	err := b.Ping(ctx)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("127.0.0.1:1"))
	_, err = b.TryAcquire(ctx, "dead/k", "pod-a", holdTTL)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err).NotTo(MatchError(backends.ErrLocked))
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
}

// A three-member cluster with one member killed keeps granting, renewing and releasing, and the
// locks held before survive. The leader is killed first (mid-run: between grants and renewals),
// then, with it back, a follower.
func TestClusterMemberKilled(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	members := etcdtest.StartCluster(t, 3)
	eps := etcdtest.Endpoints(members)
	raw := rawClient(t, eps)
	// Generous: the client may first try the dead member, and a killed leader needs an election.
	b := newBackend(t, eps, etcd.WithCallTimeout(10*time.Second))

	var held []backends.Lease
	for i := range 5 {
		l, err := b.TryAcquire(ctx, fmt.Sprintf("cluster/before-%d", i), fmt.Sprintf("pod-%d", i), holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		held = append(held, l)
	}

	// leader returns the index of the leader among members, and of a follower.
	leader := func() (leader, follower int) {
		ids := map[uint64]int{}
		var leaderID uint64
		for i, m := range members {
			resp, err := raw.Status(ctx, m.Endpoint())
			g.Expect(err).NotTo(HaveOccurred())
			ids[resp.Header.MemberId] = i
			leaderID = resp.Leader
		}
		li, ok := ids[leaderID]
		g.Expect(ok).To(BeTrue(), "the cluster has a leader")
		return li, (li + 1) % len(members)
	}

	for round, what := range []string{"leader", "follower"} {
		l, f := leader()
		victim := l
		if what == "follower" {
			victim = f
		}
		members[victim].Kill()
		other := newBackend(t, eps, etcd.WithCallTimeout(10*time.Second))
		key := fmt.Sprintf("cluster/after-kill-%d", round)
		got, err := other.TryAcquire(ctx, key, "pod-new", holdTTL)
		g.Expect(err).NotTo(HaveOccurred(), "granting with the %s down", what)
		_, err = b.TryAcquire(ctx, key, "pod-rival", holdTTL)
		g.Expect(err).To(MatchError(backends.ErrLocked))

		renewed, lost, err := b.Renew(ctx, held, holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(BeEmpty(), "no held lock is lost with the %s down", what)
		g.Expect(renewed).To(HaveLen(len(held)))
		g.Expect(other.Release(ctx, got)).To(Succeed())
		g.Expect(other.Ping(ctx)).To(Succeed())

		members[victim].Restart()
	}
	for _, l := range held {
		got, err := b.Inspect(ctx, l.Key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Identity).To(Equal(l.Identity))
		g.Expect(got.Version).To(Equal(l.Version))
	}
}

// Factory reads endpoints and credentials from the LockBackend and its Secrets; a wrong password
// gives an error that does not contain it.
func TestFactoryWithAuth(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := etcdtest.Start(t)
	raw := rawClient(t, []string{srv.Endpoint()})
	const password = "s3cret-Pa55"
	_, err := raw.UserAdd(ctx, "root", password)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.UserGrantRole(ctx, "root", "root")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.AuthEnable(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	ref := func(key string) *locksv1alpha1.SecretKeySelector {
		return &locksv1alpha1.SecretKeySelector{SecretReference: locksv1alpha1.SecretReference{Name: "etcd-auth", Namespace: "lockwarden-system"}, Key: key}
	}
	spec := func(pw string) (locksv1alpha1.LockBackendSpec, etcdtest.Secrets) {
		return locksv1alpha1.LockBackendSpec{
				Type: locksv1alpha1.BackendEtcd,
				Etcd: &locksv1alpha1.EtcdBackend{
					Endpoints:         []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint(srv.Endpoint())},
					UsernameSecretRef: ref("username"),
					PasswordSecretRef: ref("password"),
				},
			}, etcdtest.Secrets{"lockwarden-system/etcd-auth": {
				"username": []byte("root"),
				"password": []byte(pw),
			}}
	}
	open := func(pw string) backends.Backend {
		s, secrets := spec(pw)
		b, err := etcd.Factory(ctx, s, secrets)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		return b
	}

	good := open(password)
	g.Expect(good.Ping(ctx)).To(Succeed())
	l, err := good.TryAcquire(ctx, "auth/k", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	renewed, lost, err := good.Renew(ctx, []backends.Lease{l}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(1))
	g.Expect(good.Release(ctx, l)).To(Succeed())

	bad := open("wrong-" + password)
	err = bad.Ping(ctx)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("authentication failed"))
	g.Expect(err.Error()).NotTo(ContainSubstring(password))

	// Missing Secrets and specs without an etcd member are refused before connecting.
	s, _ := spec(password)
	_, err = etcd.Factory(ctx, s, etcdtest.Secrets{})
	g.Expect(err).To(MatchError(ContainSubstring("usernameSecretRef")))
	_, err = etcd.Factory(ctx, locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd}, etcdtest.Secrets{})
	g.Expect(err).To(MatchError(ContainSubstring("spec.etcd is not set")))
	g.Expect(strings.Contains(fmt.Sprint(err), password)).To(BeFalse())
}

// Factory builds TLS from the named Secrets: mutual TLS works; a server name the certificate
// does not cover and a missing client certificate fail Ping with readable errors.
func TestFactoryMutualTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	certs := etcdtest.NewCerts(t)
	srv := etcdtest.StartWith(t, etcdtest.Options{TLS: certs.ServerTLS(t, true)})
	const ns = "lockwarden-system"
	secrets := etcdtest.Secrets{
		ns + "/etcd-ca":     {"ca.crt": certs.CAPEM},
		ns + "/etcd-client": {"tls.crt": certs.ClientCertPEM, "tls.key": certs.ClientKeyPEM},
	}
	spec := func(mutate func(*locksv1alpha1.TLSConfig)) locksv1alpha1.LockBackendSpec {
		tlsSpec := &locksv1alpha1.TLSConfig{
			CASecretRef:         &locksv1alpha1.SecretKeySelector{SecretReference: locksv1alpha1.SecretReference{Name: "etcd-ca", Namespace: ns}, Key: "ca.crt"},
			ClientCertSecretRef: &locksv1alpha1.SecretReference{Name: "etcd-client", Namespace: ns},
			ServerName:          etcdtest.ServerName,
		}
		if mutate != nil {
			mutate(tlsSpec)
		}
		return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd, Etcd: &locksv1alpha1.EtcdBackend{
			Endpoints: []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint(srv.Endpoint())},
			TLS:       tlsSpec,
		}}
	}
	open := func(t *testing.T, s locksv1alpha1.LockBackendSpec) backends.Backend {
		b, err := etcd.NewFactory(etcd.WithCallTimeout(2*time.Second))(ctx, s, secrets)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		return b
	}

	b := open(t, spec(nil))
	g.Expect(b.Ping(ctx)).To(Succeed())
	l, err := b.TryAcquire(ctx, "tls/k", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Release(ctx, l)).To(Succeed())

	t.Run("WrongServerName", func(t *testing.T) {
		err := open(t, spec(func(c *locksv1alpha1.TLSConfig) { c.ServerName = "other.example" })).Ping(ctx)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`not trusted for "other.example"`)))
	})
	t.Run("NoClientCertificate", func(t *testing.T) {
		// The server refuses the handshake; gRPC retries until the call times out.
		err := open(t, spec(func(c *locksv1alpha1.TLSConfig) { c.ClientCertSecretRef = nil })).Ping(ctx)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring(srv.Endpoint())))
	})
}

// New refuses configurations that cannot work, without connecting.
func TestNewValidates(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  etcd.Config
		opts []etcd.Option
	}{
		"no endpoints":      {cfg: etcd.Config{}},
		"empty endpoint":    {cfg: etcd.Config{Endpoints: []string{""}}},
		"password, no user": {cfg: etcd.Config{Endpoints: []string{"127.0.0.1:2379"}, Password: "x"}},
		"zero call timeout": {cfg: etcd.Config{Endpoints: []string{"127.0.0.1:2379"}}, opts: []etcd.Option{etcd.WithCallTimeout(0)}},
		"nil clock":         {cfg: etcd.Config{Endpoints: []string{"127.0.0.1:2379"}}, opts: []etcd.Option{etcd.WithClock(nil)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := etcd.New(tc.cfg, tc.opts...)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

// WatchFree fires when the holder releases, when an outside client's lease is revoked (as when
// it expires), and when the watching session closes; not when the holder renews; at once on a
// free key.
func TestWatchFree(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	member := etcdtest.Start(t)
	eps := []string{member.Endpoint()}
	holder, waiter := newBackend(t, eps), newBackend(t, eps)
	watch := func(w *etcd.Backend, key string) <-chan struct{} {
		fired := make(chan struct{})
		g.Expect(w.WatchFree(ctx, key, func() { close(fired) })).To(Succeed())
		return fired
	}
	g.Eventually(watch(waiter, "never-used")).Within(2 * time.Second).Should(BeClosed())

	l, err := holder.TryAcquire(ctx, "released", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	fired := watch(waiter, "released")
	_, lost, err := holder.Renew(ctx, []backends.Lease{l}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Consistently(fired).Within(500*time.Millisecond).ShouldNot(BeClosed(), "a renewal is not a release")
	g.Expect(holder.Release(ctx, l)).To(Succeed())
	g.Eventually(fired).Within(2 * time.Second).Should(BeClosed())

	// An outside client holds the key on a lease of its own, which then expires (revoked here).
	raw := rawClient(t, eps)
	grant, err := raw.Grant(ctx, 60)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.Put(ctx, "outside", "cron-on-vm-7", clientv3.WithLease(grant.ID))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = waiter.TryAcquire(ctx, "outside", "pod-b", holdTTL)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	fired = watch(waiter, "outside")
	_, err = raw.Revoke(ctx, grant.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(fired).Within(2 * time.Second).Should(BeClosed())
	_, err = waiter.TryAcquire(ctx, "outside", "pod-b", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())

	// The watching session closes: the watch ends, and says so.
	_, err = holder.TryAcquire(ctx, "session-ends", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	closing := newBackend(t, eps)
	fired = watch(closing, "session-ends")
	g.Expect(closing.Close(ctx)).To(Succeed())
	g.Eventually(fired).Within(2 * time.Second).Should(BeClosed())
}

// A place is a key of its own under PlaceKeyPrefix, valued with when it was taken, on the
// session's etcd lease for its TTL (the one an exclusive lock of that TTL sits on); Version is its
// create revision; Renew moves it onto the lease of the TTL it renews with.
func TestSharedPlacesLayout(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := etcdtest.Start(t)
	raw := rawClient(t, []string{srv.Endpoint()})
	b := newBackend(t, []string{srv.Endpoint()})

	x, err := b.TryAcquire(ctx, "layout/x", "pod-x", 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	l, err := b.TryAcquireShared(ctx, "layout/k", "pod-a", 5*time.Second, 2)
	g.Expect(err).NotTo(HaveOccurred())

	place := etcd.PlaceKeyPrefix + "8:layout/k/pod-a"
	resp, err := raw.Get(ctx, place)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Kvs).To(HaveLen(1), "the place key is %q", place)
	kv := resp.Kvs[0]
	g.Expect(l.Version).To(Equal(strconv.FormatInt(kv.CreateRevision, 10)))
	began, err := time.Parse(time.RFC3339Nano, string(kv.Value))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(began).To(BeTemporally("==", l.AcquireTime))
	exclusive, err := raw.Get(ctx, x.Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kv.Lease).To(Equal(exclusive.Kvs[0].Lease), "places and locks of one TTL share the session's etcd lease")
	none, err := raw.Get(ctx, "layout/k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none.Kvs).To(BeEmpty(), "a place leaves the lock key itself alone")

	renewed, lost, err := b.Renew(ctx, []backends.Lease{l}, 7*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(1))
	g.Expect(renewed[0].Shared).To(BeTrue())
	moved, err := raw.Get(ctx, place)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved.Kvs[0].Lease).NotTo(Equal(kv.Lease), "renewing with 7 s moved the place onto the 7 s lease")
	g.Expect(moved.Kvs[0].CreateRevision).To(Equal(kv.CreateRevision), "the place goes on")
	g.Expect(string(moved.Kvs[0].Value)).To(Equal(string(kv.Value)), "and keeps when it began")
}

// Places of one key exclude nothing on keys that nest in it or look like its place keys.
func TestSharedNestedKeys(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := etcdtest.Start(t)
	b := newBackend(t, []string{srv.Endpoint()})

	_, err := b.TryAcquireShared(ctx, "nest", "pod-a", holdTTL, 1)
	g.Expect(err).NotTo(HaveOccurred())
	for _, k := range []string{"nest/pod-a", "nest/", "nest/x", "4:nest/pod-a", etcd.PlaceKeyPrefix + "4:nest"} {
		_, err := b.TryAcquire(ctx, k, "pod-b", holdTTL)
		g.Expect(err).NotTo(HaveOccurred(), "an exclusive hold of %q beside the places of %q", k, "nest")
		_, err = b.TryAcquireShared(ctx, k+"/y", "pod-c", holdTTL, 1)
		g.Expect(err).NotTo(HaveOccurred(), "a place of %q", k+"/y")
	}
	holders, err := b.Holders(ctx, "nest")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders).To(HaveLen(1))
	g.Expect(holders[0].Identity).To(Equal("pod-a"))
	_, err = b.TryAcquireShared(ctx, "nest", "pod-d", holdTTL, 1)
	g.Expect(err).To(MatchError(backends.ErrLocked))
}

// An outside client's hold of the lock key refuses places and is named; a full key names the
// first holder; a key held in places names a holder to an exclusive acquire.
func TestSharedLockedErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := etcdtest.Start(t)
	raw := rawClient(t, []string{srv.Endpoint()})
	b := newBackend(t, []string{srv.Endpoint()})

	grant, err := raw.Grant(ctx, 60)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.Put(ctx, "outside", "cron-on-vm-7", clientv3.WithLease(grant.ID))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.TryAcquireShared(ctx, "outside", "pod-a", holdTTL, 3)
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue(), "%v", err)
	g.Expect(locked.Holder).To(Equal("cron-on-vm-7"))
	g.Expect(locked.ExpireTime).To(BeTemporally("~", time.Now().Add(time.Minute), 5*time.Second))

	for _, id := range []string{"pod-c", "pod-b"} {
		_, err := b.TryAcquireShared(ctx, "full", id, holdTTL, 2)
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = b.TryAcquireShared(ctx, "full", "pod-d", holdTTL, 2)
	g.Expect(errors.As(err, &locked)).To(BeTrue(), "%v", err)
	g.Expect(locked.Holder).To(Equal("pod-b"), "the first holder in key order")
	g.Expect(locked.ExpireTime).NotTo(BeZero())

	_, err = b.TryAcquire(ctx, "full", "pod-w", holdTTL)
	g.Expect(errors.As(err, &locked)).To(BeTrue(), "%v", err)
	g.Expect(locked.Holder).To(Equal("pod-b"))
}

// WatchFree on a key held in places fires when one place goes, not when places renew, and not at
// once.
func TestWatchFreePlaces(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	member := etcdtest.Start(t)
	eps := []string{member.Endpoint()}
	holder, waiter := newBackend(t, eps), newBackend(t, eps)

	la, err := holder.TryAcquireShared(ctx, "places", "pod-a", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	lb, err := holder.TryAcquireShared(ctx, "places", "pod-b", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	fired := make(chan struct{})
	g.Expect(waiter.WatchFree(ctx, "places", func() { close(fired) })).To(Succeed())
	_, lost, err := holder.Renew(ctx, []backends.Lease{la, lb}, 2*holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Consistently(fired).Within(500*time.Millisecond).ShouldNot(BeClosed(), "a renewal frees no place")
	g.Expect(holder.Release(ctx, lb)).To(Succeed())
	g.Eventually(fired).Within(2 * time.Second).Should(BeClosed())
	_, err = waiter.TryAcquireShared(ctx, "places", "pod-c", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
}
