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

package redis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/backendtest"
	"github.com/lockwarden/lockwarden/internal/backends/internal/redisnode"
	"github.com/lockwarden/lockwarden/internal/backends/redis"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

// These tests run against real redis-server processes that redistest starts per test.

// holdTTL is the TTL of holds that must outlast a test.
const holdTTL = time.Minute

// eventually is how long a test waits for a restarted or resumed server to serve again: the
// client redials a dead server at most once a second. Generous for a loaded machine.
const eventually = 30 * time.Second

func newBackend(t *testing.T, addr string, opts ...redis.Option) *redis.Backend {
	t.Helper()
	b, err := redis.New(redis.Config{Address: addr}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	h := backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			b, err := redis.New(redis.Config{Address: srv.Addr()})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return b
		},
		// Real time: Redis expires keys and places by its own clock.
		TTL:        2 * time.Second,
		RoundTrips: func(b backends.Backend) int64 { return b.(*redis.Backend).RoundTrips() },
	}
	backendtest.Run(t, h)
	backendtest.RunShared(t, h)
}

// Renewal is one round trip however many leases, beyond the suite's 50: 1200 leases make three
// script runs, still in one pipeline.
func TestRenewIsOneRoundTrip(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	b := newBackend(t, srv.Addr())

	leases := make([]backends.Lease, 1200)
	for i := range leases {
		l, err := b.TryAcquire(ctx, fmt.Sprintf("app/lock-%04d", i), fmt.Sprintf("holder-%04d", i), holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		leases[i] = l
	}
	// One foreign-held key and one free key in the batch come back lost, in the same round trip.
	g.Expect(b.Release(ctx, leases[7])).To(Succeed())
	g.Expect(b.Release(ctx, leases[8])).To(Succeed())
	g.Expect(srv.Client().SetNX(ctx, leases[8].Key, "someone-else", holdTTL).Val()).To(BeTrue())

	before := b.RoundTrips()
	renewed, lost, err := b.Renew(ctx, leases, 2*holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.RoundTrips()-before).To(BeEquivalentTo(1), "one pipeline")
	g.Expect(renewed).To(HaveLen(len(leases) - 2))
	g.Expect(lost).To(HaveLen(2))
	g.Expect([]string{lost[0].Key, lost[1].Key}).To(ConsistOf(leases[7].Key, leases[8].Key))

	c := srv.Client()
	g.Expect(c.PTTL(ctx, leases[1199].Key).Val()).To(BeNumerically(">", holdTTL), "the last chunk was renewed")
	g.Expect(c.PTTL(ctx, redisnode.RecordKey(leases[1199].Key)).Val()).To(BeNumerically(">", holdTTL), "with its record")
	g.Expect(c.Get(ctx, leases[8].Key).Val()).To(Equal("someone-else"), "a foreign holder is untouched")
	g.Expect(c.PTTL(ctx, leases[8].Key).Val()).To(BeNumerically("<=", holdTTL))
}

// The lock key is plain `SET key identity NX PX ttl`: its value is the identity, its TTL the
// lease's, and the hold record beside it has the same TTL.
func TestKeyFormat(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	b := newBackend(t, srv.Addr())
	c := srv.Client()

	l, err := b.TryAcquire(ctx, "lockwarden/team-a/db-migration", "pod-uid-1", 10*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Get(ctx, "lockwarden/team-a/db-migration").Val()).To(Equal("pod-uid-1"))
	g.Expect(c.PTTL(ctx, "lockwarden/team-a/db-migration").Val()).To(BeNumerically("~", 10*time.Second, 2*time.Second))
	record := c.Get(ctx, "lockwarden-hold:lockwarden/team-a/db-migration").Val()
	g.Expect(record).To(Equal(fmt.Sprintf("%d:%s:pod-uid-1", l.AcquireTime.UnixMilli(), l.Version)))
	g.Expect(c.PTTL(ctx, "lockwarden-hold:lockwarden/team-a/db-migration").Val()).To(BeNumerically("~", 10*time.Second, 2*time.Second))

	g.Expect(b.Release(ctx, l)).To(Succeed())
	g.Expect(c.Exists(ctx, "lockwarden/team-a/db-migration", "lockwarden-hold:lockwarden/team-a/db-migration").Val()).To(BeZero(), "release deletes both keys")
}

// Another application that locks the same key with plain SET NX PX (as redsync and friends do)
// is refused while lockwarden holds it, and lockwarden is refused while it holds it.
func TestForeignSetNXClientIsExcluded(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	b := newBackend(t, srv.Addr())
	foreign := srv.Client()
	key := "shared/lock"

	ours, err := b.TryAcquire(ctx, key, "lockwarden-holder", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	ok, err := foreign.SetNX(ctx, key, "foreign-token", 30*time.Second).Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "SET NX PX of another client is refused while lockwarden holds the key")
	g.Expect(foreign.Get(ctx, key).Val()).To(Equal("lockwarden-holder"))

	g.Expect(b.Release(ctx, ours)).To(Succeed())
	ok, err = foreign.SetNX(ctx, key, "foreign-token", 30*time.Second).Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "the key is free after release")

	start := time.Now()
	_, err = b.TryAcquire(ctx, key, "lockwarden-holder", holdTTL)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue())
	g.Expect(locked.Holder).To(Equal("foreign-token"))
	g.Expect(locked.ExpireTime).To(BeTemporally("~", start.Add(30*time.Second), 2*time.Second))

	got, err := b.Inspect(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Identity).To(Equal("foreign-token"))
	g.Expect(got.AcquireTime.IsZero()).To(BeTrue(), "a foreign hold has no record")
	g.Expect(got.Version).To(BeEmpty())

	// Owner-checked: neither release nor renewal touches the foreign hold.
	g.Expect(b.Release(ctx, ours)).To(MatchError(backends.ErrNotHeld))
	renewed, lost, err := b.Renew(ctx, []backends.Lease{ours}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(HaveLen(1))
	g.Expect(foreign.Get(ctx, key).Val()).To(Equal("foreign-token"))
	g.Expect(foreign.PTTL(ctx, key).Val()).To(BeNumerically("<=", 30*time.Second))
}

// A Redis that restarts without persistence has forgotten every lock: Renew reports the held
// lease lost (never renewed), and another identity can take the key.
func TestRestartWithoutPersistenceLosesLocks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	b := newBackend(t, srv.Addr())

	held, err := b.TryAcquire(ctx, "app/lock", "a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	srv.Kill()

	_, _, err = b.Renew(ctx, []backends.Lease{held}, holdTTL)
	g.Expect(err).To(HaveOccurred(), "a dead server cannot be asked")
	g.Expect(err.Error()).To(ContainSubstring(srv.Addr()))

	srv.Restart()
	var renewed, lost []backends.Lease
	g.Eventually(func() error {
		renewed, lost, err = b.Renew(ctx, []backends.Lease{held}, holdTTL)
		return err
	}, eventually, 50*time.Millisecond).Should(Succeed())
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(HaveLen(1))
	g.Expect(lost[0]).To(Equal(held), "lost leases come back as they were given")

	_, err = b.Inspect(ctx, "app/lock")
	g.Expect(err).To(MatchError(backends.ErrNotHeld), "the lost lock was not revived")
	_, err = b.TryAcquire(ctx, "app/lock", "b", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
}

// A paused server (SIGSTOP) costs a call its timeout, not more, and the error says so.
func TestPausedServerDoesNotStallCalls(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	b := newBackend(t, srv.Addr())
	_, err := b.TryAcquire(ctx, "app/warm", "a", holdTTL) // a pooled connection exists
	g.Expect(err).NotTo(HaveOccurred())

	srv.Pause()
	start := time.Now()
	_, err = b.TryAcquire(ctx, "app/lock", "a", holdTTL)
	elapsed := time.Since(start)
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, backends.ErrLocked)).To(BeFalse())
	g.Expect(err.Error()).To(ContainSubstring("no answer within "))
	g.Expect(elapsed).To(BeNumerically("<", 2*time.Second), "bounded by the 500 ms call timeout")

	start = time.Now()
	g.Expect(b.Ping(ctx)).NotTo(Succeed())
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))

	srv.Resume()
	g.Eventually(func() error {
		_, err := b.TryAcquire(ctx, "app/lock", "a", holdTTL)
		return err
	}, eventually, 50*time.Millisecond).Should(Succeed())
}

// Ping's errors tell an operator what is wrong, and never show the password.
func TestPingErrors(t *testing.T) {
	const password = "s3cret-Pa55word"
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{Password: password})

	t.Run("Healthy", func(t *testing.T) {
		b, err := redis.New(redis.Config{Address: srv.Addr(), Password: password})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		defer b.Close(ctx)
		NewWithT(t).Expect(b.Ping(ctx)).To(Succeed())
		NewWithT(t).Expect(srv.Client().Keys(ctx, redis.PingKeyPrefix+"*").Val()).To(BeEmpty(), "the probe key is deleted")
	})
	for name, tc := range map[string]struct {
		cfg  redis.Config
		want string
	}{
		"WrongPassword": {redis.Config{Address: srv.Addr(), Password: "wrong-" + password}, "refused the password"},
		"NoPassword":    {redis.Config{Address: srv.Addr()}, "requires a password (NOAUTH)"},
		"Unreachable":   {redis.Config{Address: "127.0.0.1:1"}, "cannot connect"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := redis.New(tc.cfg)
			g.Expect(err).NotTo(HaveOccurred())
			defer b.Close(ctx)
			err = b.Ping(ctx)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
			g.Expect(err.Error()).To(ContainSubstring(tc.cfg.Address), "the error names the server")
			g.Expect(err.Error()).NotTo(ContainSubstring(password))
			t.Logf("Ping: %v", err)
		})
	}
}

// The backend refuses writes it cannot make on a read-only replica, and says why.
func TestPingReadOnlyReplica(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	primary := redistest.Start(t, redistest.Options{})
	replica := redistest.Start(t, redistest.Options{Args: []string{"--replicaof", "127.0.0.1", fmt.Sprint(primary.Port)}})
	b := newBackend(t, replica.Addr())
	err := b.Ping(ctx)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("read-only replica"))
	_, err = b.TryAcquire(ctx, "app/lock", "a", holdTTL)
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, backends.ErrLocked)).To(BeFalse())
}

// Lease times come from the injected clock: AcquireTime is the clock at the start of the call
// that began the hold (to the millisecond, as stored), ExpireTime the clock at the start of the
// call that last set the TTL, plus the TTL.
func TestTimesComeFromTheInjectedClock(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	clock := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 2, 3, 4, 5, 678_900_000, time.UTC))
	b := newBackend(t, srv.Addr(), redis.WithClock(clock))

	first, err := b.TryAcquire(ctx, "app/lock", "a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.AcquireTime).To(BeTemporally("==", time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)))
	g.Expect(first.ExpireTime).To(BeTemporally("==", clock.Now().Add(holdTTL)))

	clock.SetTime(clock.Now().Add(10 * time.Second))
	renewed, _, err := b.Renew(ctx, []backends.Lease{first}, 2*holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed).To(HaveLen(1))
	g.Expect(renewed[0].ExpireTime).To(BeTemporally("==", clock.Now().Add(2*holdTTL)))
	g.Expect(renewed[0].TTL).To(Equal(2 * holdTTL))
	g.Expect(renewed[0].AcquireTime).To(BeTemporally("==", first.AcquireTime))

	again, err := b.TryAcquire(ctx, "app/lock", "a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.AcquireTime).To(BeTemporally("==", first.AcquireTime))
	g.Expect(again.Version).To(Equal(first.Version))
	g.Expect(again.ExpireTime).To(BeTemporally("==", clock.Now().Add(holdTTL)))

	got, err := b.Inspect(ctx, "app/lock")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.ExpireTime).To(BeTemporally("~", clock.Now().Add(holdTTL), 2*time.Second), "Inspect: the clock plus PTTL")
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  redis.Config
		opts []redis.Option
	}{
		"no address":   {redis.Config{}, nil},
		"negative DB":  {redis.Config{Address: "127.0.0.1:6379", DB: -1}, nil},
		"zero timeout": {redis.Config{Address: "127.0.0.1:6379"}, []redis.Option{redis.WithCallTimeout(0)}},
		"nil clock":    {redis.Config{Address: "127.0.0.1:6379"}, []redis.Option{redis.WithClock(nil)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := redis.New(tc.cfg, tc.opts...)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

// Calls on a closed session fail without reaching the server.
func TestClosedSession(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	b, err := redis.New(redis.Config{Address: srv.Addr()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Close(ctx)).To(Succeed())
	g.Expect(b.Close(ctx)).To(Succeed(), "Close is idempotent")
	_, err = b.TryAcquire(ctx, "k", "a", holdTTL)
	g.Expect(err).To(MatchError(ContainSubstring("closed")))
	g.Expect(b.Ping(ctx)).To(MatchError(ContainSubstring("closed")))
	g.Expect(b.RoundTrips()).To(BeZero())
}
