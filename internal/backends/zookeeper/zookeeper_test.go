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

package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	. "github.com/onsi/gomega"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/backendtest"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/backends/zookeeper"
	"github.com/lockwarden/lockwarden/internal/testutil/skewclock"
	"github.com/lockwarden/lockwarden/internal/testutil/zktest"
)

// These tests run against real ZooKeeper servers that zktest starts per test.

const (
	// holdTTL is the TTL of holds that must outlast a test.
	holdTTL = time.Minute
	// sessionTimeout is short so that expiry tests are quick; the servers' tick is 1 s.
	sessionTimeout = 4 * time.Second
	secret         = "s3cret-pa55"
)

func newBackend(t *testing.T, cfg zookeeper.Config, opts ...zookeeper.Option) *zookeeper.Backend {
	t.Helper()
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = sessionTimeout
	}
	b, err := zookeeper.New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// rawConn is a plain ZooKeeper client: "another application", and a reader of the store's state.
func rawConn(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func conformance(t *testing.T, cfg func(addr string) zookeeper.Config) {
	srv := zktest.Start(t)
	h := backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			b, err := zookeeper.New(cfg(srv.Addr()))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return b
		},
		TTL:        2 * time.Second,
		RoundTrips: func(b backends.Backend) int64 { return b.(*zookeeper.Backend).RoundTrips() },
	}
	backendtest.Run(t, h)
	t.Run("Shared", func(t *testing.T) { backendtest.RunShared(t, h) })
}

func TestConformance(t *testing.T) {
	conformance(t, func(addr string) zookeeper.Config {
		return zookeeper.Config{Servers: []string{addr}, SessionTimeout: sessionTimeout}
	})
}

func TestConformanceWithDigestAuth(t *testing.T) {
	conformance(t, func(addr string) zookeeper.Config {
		return zookeeper.Config{Servers: []string{addr}, SessionTimeout: sessionTimeout, DigestAuth: "lockwarden:" + secret, Root: "/apps/locks"}
	})
}

// With digest auth, another client reads our nodes but can neither delete nor change them.
func TestACLProtectsNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := zktest.Start(t)
	b := newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}, DigestAuth: "lockwarden:" + secret})
	l, err := b.TryAcquire(ctx, "team/a", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())

	other := rawConn(t, srv.Addr())
	guard := zookeeper.DefaultRoot + "/" + url.PathEscape("team/a")
	path := guard + "/" + zookeeper.LockNodeName
	data, stat, err := other.Get(path)
	g.Expect(err).NotTo(HaveOccurred(), "world may read")
	g.Expect(string(data)).To(ContainSubstring(`"holder":"pod-a"`))
	g.Expect(stat.EphemeralOwner).NotTo(BeZero(), "the lock node is ephemeral")
	g.Expect(other.Delete(path, -1)).To(MatchError(zk.ErrNoAuth))
	_, err = other.Set(path, []byte("mine"), -1)
	g.Expect(err).To(MatchError(zk.ErrNoAuth))
	_, err = other.Create(zookeeper.DefaultRoot+"/intruder", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	g.Expect(err).To(MatchError(zk.ErrNoAuth))
	g.Expect(other.Delete(guard, -1)).To(MatchError(zk.ErrNoAuth))
	_, err = other.Create(guard+"/intruder", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	g.Expect(err).To(MatchError(zk.ErrNoAuth))

	got, err := b.Inspect(ctx, "team/a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Identity).To(Equal("pod-a"))
	g.Expect(got.Version).To(Equal(l.Version))
}

// Renewing 250 of the session's own locks and places is three requests, one Multi per 100.
func TestRenewCost(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := zktest.Start(t)
	b := newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}})
	leases := make([]backends.Lease, 250)
	for i := range leases {
		var l backends.Lease
		var err error
		if i%2 == 0 {
			l, err = b.TryAcquire(ctx, fmt.Sprintf("renew-cost/k%03d", i), fmt.Sprintf("id%03d", i), holdTTL)
		} else {
			// Three places on each shared key: other holders' acquires do not make a place's
			// cached version stale.
			l, err = b.TryAcquireShared(ctx, fmt.Sprintf("renew-cost/s%03d", i/6), fmt.Sprintf("id%03d", i), holdTTL, 3)
		}
		g.Expect(err).NotTo(HaveOccurred())
		leases[i] = l
	}
	before := b.RoundTrips()
	renewed, lost, err := b.Renew(ctx, leases, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(len(leases)))
	g.Expect(b.RoundTrips() - before).To(BeEquivalentTo(3))
}

// A server restart within the session timeout keeps the session and its locks.
func TestServerRestartWithinSessionTimeoutKeepsLocks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := zktest.Start(t)
	b := newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}, SessionTimeout: 20 * time.Second})
	l, err := b.TryAcquire(ctx, "restart/k", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())

	srv.Kill()
	srv.Restart()

	g.Eventually(func() error {
		renewed, lost, err := b.Renew(ctx, []backends.Lease{l}, holdTTL)
		if err != nil {
			return err
		}
		if len(lost) != 0 || len(renewed) != 1 {
			return fmt.Errorf("renewed %v, lost %v", renewed, lost)
		}
		return nil
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	got, err := b.Inspect(ctx, "restart/k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Version).To(Equal(l.Version), "the same node, not a new hold")
	other := newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}})
	_, err = other.TryAcquire(ctx, "restart/k", "pod-b", holdTTL)
	g.Expect(err).To(MatchError(backends.ErrLocked))
}

// A client cut off from the server for longer than the session timeout loses its session: every
// lock of it is reported lost, none is revived, and another holder can take them.
func TestSessionExpiryLosesLocks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := zktest.Start(t)
	p := startProxy(t, srv.Addr())
	b := newBackend(t, zookeeper.Config{Servers: []string{p.addr()}})
	var leases []backends.Lease
	for i := range 3 {
		l, err := b.TryAcquire(ctx, fmt.Sprintf("expiry/k%d", i), "pod-a", holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		leases = append(leases, l)
	}
	place, err := b.TryAcquireShared(ctx, "expiry/shared", "pod-a", holdTTL, 1)
	g.Expect(err).NotTo(HaveOccurred())
	leases = append(leases, place)

	p.cut()
	other := newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}})
	g.Eventually(func() error {
		_, err := other.Inspect(ctx, "expiry/k0")
		return err
	}, 30*time.Second, 200*time.Millisecond).Should(MatchError(backends.ErrNotHeld), "the server expires the session and deletes its nodes")
	p.heal()

	g.Eventually(func() ([]backends.Lease, error) {
		_, lost, err := b.Renew(ctx, leases, holdTTL)
		return lost, err
	}, 30*time.Second, 200*time.Millisecond).Should(HaveLen(4), "every lock and place of the expired session is lost")
	renewed, lost, err := b.Renew(ctx, leases, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(HaveLen(4))
	_, err = other.Inspect(ctx, "expiry/k1")
	g.Expect(err).To(MatchError(backends.ErrNotHeld), "lost locks are not revived")
	_, err = other.Inspect(ctx, "expiry/shared")
	g.Expect(err).To(MatchError(backends.ErrNotHeld), "lost places are not revived")
	_, err = other.TryAcquireShared(ctx, "expiry/shared", "pod-b", holdTTL, 1)
	g.Expect(err).NotTo(HaveOccurred(), "the lost place is free")

	// The backend carries on with a new session.
	_, err = other.TryAcquire(ctx, "expiry/k0", "pod-b", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.TryAcquire(ctx, "expiry/k0", "pod-a", holdTTL)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	_, err = b.TryAcquire(ctx, "expiry/k1", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
}

// Ping fails with a readable error naming the servers, without the password.
func TestPingErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := zktest.Start(t)

	g.Expect(newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}, DigestAuth: "u:" + secret}).Ping(ctx)).To(Succeed())

	dead := newBackend(t, zookeeper.Config{Servers: []string{"127.0.0.1:1"}, DigestAuth: "u:" + secret}, zookeeper.WithCallTimeout(500*time.Millisecond))
	err := dead.Ping(ctx)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("127.0.0.1:1"))
	g.Expect(err.Error()).NotTo(ContainSubstring(secret))

	// Nodes created with another user's credentials cannot be written by this one.
	owner := newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}, DigestAuth: "owner:" + secret, Root: "/owned"})
	g.Expect(owner.Ping(ctx)).To(Succeed())
	intruder := newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}, DigestAuth: "intruder:" + secret, Root: "/owned"})
	err = intruder.Ping(ctx)
	g.Expect(err).To(MatchError(zk.ErrNoAuth))
	g.Expect(err.Error()).NotTo(ContainSubstring(secret))
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]zookeeper.Config{
		"no servers":    {},
		"empty server":  {Servers: []string{""}},
		"relative root": {Servers: []string{"zk:2181"}, Root: "locks"},
		"trailing /":    {Servers: []string{"zk:2181"}, Root: "/locks/"},
		"bad digest":    {Servers: []string{"zk:2181"}, DigestAuth: "nocolon"},
	} {
		if _, err := zookeeper.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

type secretMap map[string]string

func (s secretMap) Read(_ context.Context, ref locksv1alpha1.SecretKeySelector) ([]byte, error) {
	v, ok := s[ref.Name+"/"+ref.Key]
	if !ok {
		return nil, fmt.Errorf("secret %s: %w", ref.Name, registry.ErrSecret)
	}
	return []byte(v), nil
}

func TestConfigFromSpec(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ref := &locksv1alpha1.SecretKeySelector{SecretReference: locksv1alpha1.SecretReference{Name: "zk", Namespace: "ns"}, Key: "auth"}
	spec := func(ref *locksv1alpha1.SecretKeySelector) locksv1alpha1.LockBackendSpec {
		return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendZooKeeper, ZooKeeper: &locksv1alpha1.ZooKeeperBackend{
			Servers: []locksv1alpha1.HostPort{"zk-0:2181", "zk-1:2181"}, SessionTimeoutSeconds: 10, DigestAuthSecretRef: ref}}
	}

	cfg, err := zookeeper.ConfigFromSpec(ctx, spec(ref), secretMap{"zk/auth": "user:pw\n"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg).To(Equal(zookeeper.Config{Servers: []string{"zk-0:2181", "zk-1:2181"}, SessionTimeout: 10 * time.Second, DigestAuth: "user:pw"}))

	_, err = zookeeper.ConfigFromSpec(ctx, spec(ref), secretMap{})
	g.Expect(errors.Is(err, registry.ErrSecret)).To(BeTrue())
	_, err = zookeeper.ConfigFromSpec(ctx, spec(ref), secretMap{"zk/auth": "nocolon"})
	g.Expect(err).To(HaveOccurred())
	_, err = zookeeper.ConfigFromSpec(ctx, locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendZooKeeper}, nil)
	g.Expect(err).To(HaveOccurred())

	b, err := zookeeper.Factory(ctx, spec(nil), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Close(ctx)).To(Succeed())
}

// WatchFree fires when the holder releases, when a foreign client's node goes and when the
// holder's session ends, but not when the holder renews; on a free key it fires at once.
func TestWatchFree(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := zktest.Start(t)
	cfg := zookeeper.Config{Servers: []string{srv.Addr()}}
	holder := newBackend(t, cfg)
	waiter := newBackend(t, cfg)

	watch := func(key string) <-chan struct{} {
		fired := make(chan struct{})
		g.Expect(waiter.WatchFree(ctx, key, func() { close(fired) })).To(Succeed())
		return fired
	}
	g.Eventually(watch("never-used")).Within(2 * time.Second).Should(BeClosed())

	l, err := holder.TryAcquire(ctx, "released", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	fired := watch("released")
	_, lost, err := holder.Renew(ctx, []backends.Lease{l}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Consistently(fired).Within(500*time.Millisecond).ShouldNot(BeClosed(), "a renewal is not a release")
	g.Expect(holder.Release(ctx, l)).To(Succeed())
	g.Eventually(fired).Within(2 * time.Second).Should(BeClosed())
	_, err = waiter.TryAcquire(ctx, "released", "pod-b", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())

	// A client outside lockwarden holds the key with a node of its own, without a record.
	other := rawConn(t, srv.Addr())
	guard := zookeeper.DefaultRoot + "/" + url.PathEscape("foreign")
	_, err = other.Create(guard, nil, 0, zk.WorldACL(zk.PermAll))
	g.Expect(err).NotTo(HaveOccurred())
	node := guard + "/" + zookeeper.LockNodeName
	_, err = other.Create(node, []byte("batch-job-on-a-vm"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = waiter.TryAcquire(ctx, "foreign", "pod-b", holdTTL)
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue(), "got %v", err)
	g.Expect(locked.Holder).To(Equal("batch-job-on-a-vm"))
	g.Expect(locked.ExpireTime.IsZero()).To(BeTrue(), "a foreign node has no expiry to wait for")
	fired = watch("foreign")
	g.Expect(other.Delete(node, -1)).To(Succeed())
	g.Eventually(fired).Within(2 * time.Second).Should(BeClosed())

	// The holder's session ends: ZooKeeper deletes its ephemeral node.
	_, err = holder.TryAcquire(ctx, "session-ends", "pod-a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	fired = watch("session-ends")
	g.Expect(holder.Close(ctx)).To(Succeed())
	g.Eventually(fired).Within(2 * time.Second).Should(BeClosed())
}

// A record's TTL runs on the ensemble's clock: a controller whose wall clock is stepped forward
// or back neither takes a valid hold nor keeps an expired one (the reliability harness found the
// first with the TTL judged by the controller's clock: zookeeper/clock-jumps, seed 69699).
func TestExpiryIsJudgedByTheEnsemblesClock(t *testing.T) {
	ctx := t.Context()
	srv := zktest.Start(t)
	cfg := zookeeper.Config{Servers: []string{srv.Addr()}}

	t.Run("a clock stepped forward takes no valid hold", func(t *testing.T) {
		g := NewWithT(t)
		ahead := &skewclock.Clock{}
		b := newBackend(t, cfg, zookeeper.WithClock(ahead))
		other := newBackend(t, cfg, zookeeper.WithClock(ahead))
		_, err := b.TryAcquire(ctx, "forward", "first", 30*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		ahead.Set(2 * time.Hour)
		for name, s := range map[string]*zookeeper.Backend{"the same session": b, "another session": other} {
			_, err = s.TryAcquire(ctx, "forward", "second", 30*time.Second)
			var locked *backends.LockedError
			g.Expect(errors.As(err, &locked)).To(BeTrue(), "%s: TryAcquire over a valid hold: %v", name, err)
			g.Expect(locked.Holder).To(Equal("first"))
			// The expiry is told on the caller's clock: about 30 s from its (stepped) now.
			g.Expect(locked.ExpireTime).To(BeTemporally("~", ahead.Now().Add(30*time.Second), 5*time.Second), name)
			got, err := s.Inspect(ctx, "forward")
			g.Expect(err).NotTo(HaveOccurred(), name)
			g.Expect(got.Identity).To(Equal("first"))
			g.Expect(got.ExpireTime).To(BeTemporally("~", ahead.Now().Add(30*time.Second), 5*time.Second), name)
		}
	})

	t.Run("the holder's stepped clock does not end its hold", func(t *testing.T) {
		g := NewWithT(t)
		holderClock := &skewclock.Clock{}
		b := newBackend(t, cfg, zookeeper.WithClock(holderClock))
		other := newBackend(t, cfg)
		l, err := b.TryAcquire(ctx, "holder-steps", "first", 30*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		holderClock.Set(2 * time.Hour)
		renewed, lost, err := b.Renew(ctx, []backends.Lease{l}, 30*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(BeEmpty(), "a renewal after a forward step keeps the hold")
		g.Expect(renewed).To(HaveLen(1))
		holderClock.Set(-2 * time.Hour) // its records now say they expired two hours ago
		_, _, err = b.Renew(ctx, renewed, 30*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = other.TryAcquire(ctx, "holder-steps", "second", 30*time.Second)
		var locked *backends.LockedError
		g.Expect(errors.As(err, &locked)).To(BeTrue(), "TryAcquire over a hold whose writer's clock is behind: %v", err)
	})

	t.Run("a clock stepped back keeps no expired hold", func(t *testing.T) {
		g := NewWithT(t)
		behind := &skewclock.Clock{}
		behind.Set(-2 * time.Hour)
		b := newBackend(t, cfg)
		other := newBackend(t, cfg, zookeeper.WithClock(behind))
		_, err := b.TryAcquire(ctx, "backward", "first", time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		time.Sleep(1500 * time.Millisecond)
		_, err = other.Inspect(ctx, "backward")
		g.Expect(err).To(MatchError(backends.ErrNotHeld))
		l, err := other.TryAcquire(ctx, "backward", "second", 30*time.Second)
		g.Expect(err).NotTo(HaveOccurred(), "the record expired by the ensemble's clock")
		g.Expect(l.Identity).To(Equal("second"))
	})
}
