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

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/backendtest"
	"github.com/lockwarden/lockwarden/internal/backends/internal/redisnode"
	"github.com/lockwarden/lockwarden/internal/backends/redlock"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

// These tests run against real redis-server processes that redistest starts per test.

const (
	// holdTTL is the TTL of holds that must outlast a test; its per-node timeout is 200 ms.
	holdTTL = time.Minute
	// eventually is how long a test waits for a restarted server to serve again: the client
	// redials a dead server at most once a second. Generous for a loaded machine.
	eventually = 30 * time.Second
	// stallBound is what a call may take when nodes are paused: a correctness bound (the call
	// does not wait for a paused node beyond about the 200 ms per-node timeout), not a benchmark.
	stallBound = time.Second
)

func addresses(servers []*redistest.Server) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

func newBackend(t *testing.T, servers []*redistest.Server, opts ...redlock.Option) *redlock.Backend {
	t.Helper()
	b, err := redlock.New(redlock.Config{Addresses: addresses(servers)}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// holders returns what each server's lock key holds ("" for nothing), and fails if a hold record
// is left without its lock key.
func holders(t *testing.T, servers []*redistest.Server, key string) []string {
	t.Helper()
	ctx := t.Context()
	got := make([]string, len(servers))
	for i, s := range servers {
		c := s.Client()
		got[i] = c.Get(ctx, key).Val()
		if got[i] == "" && c.Exists(ctx, redisnode.RecordKey(key)).Val() != 0 {
			t.Errorf("node %s has a hold record of %q but no lock key", s.Addr(), key)
		}
	}
	return got
}

func TestConformance(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	h := backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			b, err := redlock.New(redlock.Config{Addresses: addresses(servers)})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return b
		},
		// Real time: the nodes expire keys and places by their own clocks.
		TTL:        2 * time.Second,
		RoundTrips: func(b backends.Backend) int64 { return b.(*redlock.Backend).RoundTrips() },
	}
	backendtest.Run(t, h)
	// With 3 nodes every shared lock of the suite (2 places or more) needs all 3 nodes.
	backendtest.RunShared(t, h)
}

// Renewal costs one pipeline per node, however many leases.
func TestRenewIsOneRoundTripPerNode(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	servers := redistest.StartN(t, 3, redistest.Options{})
	b := newBackend(t, servers)

	leases := make([]backends.Lease, 600)
	for i := range leases {
		l, err := b.TryAcquire(ctx, fmt.Sprintf("app/lock-%03d", i), fmt.Sprintf("holder-%03d", i), holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		leases[i] = l
	}
	before := b.RoundTrips()
	renewed, lost, err := b.Renew(ctx, leases, 2*holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(len(leases)))
	g.Expect(b.RoundTrips()-before).To(BeEquivalentTo(3), "one pipeline per node")
	for _, s := range servers {
		g.Expect(s.Client().PTTL(ctx, leases[599].Key).Val()).To(BeNumerically(">", holdTTL))
	}
}

// With 5 nodes, locks are granted and renewed while 2 are dead; with 3 dead nothing is granted
// (fail closed) and the error names the dead nodes.
func TestFiveNodesSurviveTwoFailuresAndFailClosedWithThree(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	servers := redistest.StartN(t, 5, redistest.Options{})
	b := newBackend(t, servers)
	held, err := b.TryAcquire(ctx, "app/held", "a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())

	servers[1].Kill()
	servers[3].Kill()
	l, err := b.TryAcquire(ctx, "app/new", "b", holdTTL)
	g.Expect(err).NotTo(HaveOccurred(), "3 of 5 nodes are a quorum")
	g.Expect(l.Identity).To(Equal("b"))
	renewed, lost, err := b.Renew(ctx, []backends.Lease{held, l}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(2))
	got, err := b.Inspect(ctx, "app/held")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Identity).To(Equal("a"))
	_, err = b.TryAcquire(ctx, "app/held", "c", holdTTL)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	err = b.Ping(ctx)
	var degraded *backends.DegradedError
	g.Expect(errors.As(err, &degraded)).To(BeTrue(), "a quorum of nodes is usable, but degraded: %v", err)
	g.Expect(errors.Is(err, redlock.ErrUnavailable)).To(BeFalse())
	g.Expect(err.Error()).To(ContainSubstring(servers[1].Addr()))

	servers[4].Kill()
	dead := []string{servers[1].Addr(), servers[3].Addr(), servers[4].Addr()}

	_, err = b.TryAcquire(ctx, "app/refused", "c", holdTTL)
	g.Expect(err).To(MatchError(redlock.ErrUnavailable))
	g.Expect(errors.Is(err, backends.ErrLocked)).To(BeFalse(), "dead nodes are not contention")
	var qe *redlock.QuorumError
	g.Expect(errors.As(err, &qe)).To(BeTrue())
	g.Expect(qe.FailedAddresses()).To(ConsistOf(dead))
	g.Expect(qe.Agreed).To(Equal(2))
	for _, addr := range dead {
		g.Expect(err.Error()).To(ContainSubstring(addr))
	}
	g.Expect(err.Error()).To(ContainSubstring("only 2 of 5 nodes granted, 3 needed; 3 failed"))
	t.Logf("TryAcquire with 3 of 5 nodes dead: %v", err)
	g.Expect(holders(t, servers[:1], "app/refused")).To(Equal([]string{""}), "the failed attempt is undone on the live nodes")
	g.Expect(holders(t, servers[2:3], "app/refused")).To(Equal([]string{""}))

	renewed, lost, err = b.Renew(ctx, []backends.Lease{held}, holdTTL)
	g.Expect(err).To(MatchError(redlock.ErrUnavailable), "nothing is known without a quorum")
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(BeEmpty())
	err = b.Ping(ctx)
	g.Expect(err).To(MatchError(redlock.ErrUnavailable))
	for _, addr := range dead {
		g.Expect(err.Error()).To(ContainSubstring(addr))
	}
	_, err = b.Inspect(ctx, "app/held")
	g.Expect(err).To(MatchError(redlock.ErrUnavailable), "2 live nodes hold it; the 3 dead ones might")

	// The dead nodes come back empty: the old hold survives on 2 of 5, which is no quorum, so a
	// renewal reports it lost (and removes what is left of it), and the key can be taken.
	for _, i := range []int{1, 3, 4} {
		servers[i].Restart()
	}
	g.Eventually(func() error {
		renewed, lost, err = b.Renew(ctx, []backends.Lease{held}, holdTTL)
		return err
	}, eventually, 50*time.Millisecond).Should(Succeed())
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(HaveLen(1))
	g.Expect(holders(t, servers, "app/held")).To(Equal([]string{"", "", "", "", ""}), "its remains are released")
	g.Eventually(func() error {
		_, err := b.TryAcquire(ctx, "app/held", "c", holdTTL)
		return err
	}, eventually, 50*time.Millisecond).Should(Succeed())
}

// A paused node (SIGSTOP) costs a call about the per-node timeout, not more.
func TestPausedNodeDoesNotStallCalls(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	servers := redistest.StartN(t, 3, redistest.Options{})
	warm := newBackend(t, servers)
	held, err := warm.TryAcquire(ctx, "app/held", "a", holdTTL) // pooled connections exist
	g.Expect(err).NotTo(HaveOccurred())

	servers[0].Pause()
	fresh := newBackend(t, servers) // has to dial the paused node
	for name, b := range map[string]*redlock.Backend{"warm": warm, "fresh": fresh} {
		start := time.Now()
		l, err := b.TryAcquire(ctx, "app/"+name, "b", holdTTL)
		g.Expect(err).NotTo(HaveOccurred(), "%s session: 2 of 3 nodes are a quorum", name)
		g.Expect(time.Since(start)).To(BeNumerically("<", stallBound), "%s session: TryAcquire", name)

		start = time.Now()
		renewed, _, err := b.Renew(ctx, []backends.Lease{held, l}, holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(renewed).To(HaveLen(2))
		g.Expect(time.Since(start)).To(BeNumerically("<", stallBound), "%s session: Renew", name)

		start = time.Now()
		_, err = b.Inspect(ctx, "app/held")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(time.Since(start)).To(BeNumerically("<", stallBound), "%s session: Inspect", name)

		start = time.Now()
		g.Expect(b.Release(ctx, l)).To(Succeed())
		g.Expect(time.Since(start)).To(BeNumerically("<", stallBound), "%s session: Release", name)
	}

	// Two of three paused: nothing is granted, still within the bound, and the error says the
	// paused nodes did not answer.
	servers[1].Pause()
	start := time.Now()
	_, err = warm.TryAcquire(ctx, "app/refused", "c", holdTTL)
	g.Expect(time.Since(start)).To(BeNumerically("<", stallBound))
	g.Expect(err).To(MatchError(redlock.ErrUnavailable))
	g.Expect(err.Error()).To(ContainSubstring(servers[0].Addr() + `: acquire "app/refused": no answer within `))
	g.Expect(err.Error()).To(ContainSubstring(servers[1].Addr() + `: acquire "app/refused": no answer within `))
	g.Expect(holders(t, servers[2:], "app/refused")).To(Equal([]string{""}), "undone on the node that granted it")

	servers[0].Resume()
	servers[1].Resume()
	g.Eventually(func() error {
		_, err := warm.TryAcquire(ctx, "app/later", "c", holdTTL)
		return err
	}, eventually, 50*time.Millisecond).Should(Succeed())
}

// WithNodeTimeout replaces the TTL rule.
func TestFixedNodeTimeout(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	servers := redistest.StartN(t, 3, redistest.Options{})
	b := newBackend(t, servers, redlock.WithNodeTimeout(50*time.Millisecond))
	servers[2].Pause()
	t.Cleanup(servers[2].Resume)
	l, err := b.TryAcquire(ctx, "app/lock", "a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	servers[1].Pause()
	t.Cleanup(servers[1].Resume)
	_, _, err = b.Renew(ctx, []backends.Lease{l}, holdTTL)
	g.Expect(err).To(MatchError(ContainSubstring(servers[1].Addr() + ": renew: no answer within ")))
}

// An attempt that fails is undone on every node where it took the key, and leaves other
// holders' keys alone.
func TestFailedAttemptLeavesNoKeys(t *testing.T) {
	ctx := t.Context()
	servers := redistest.StartN(t, 3, redistest.Options{})
	b := newBackend(t, servers)

	t.Run("HeldByAQuorum", func(t *testing.T) {
		g := NewWithT(t)
		key := "app/quorum"
		// Another Redlock client (plain SET NX PX, as redsync does) holds 2 of 3 nodes.
		for _, s := range servers[1:] {
			g.Expect(s.Client().SetNX(ctx, key, "foreign", holdTTL).Val()).To(BeTrue())
		}
		_, err := b.TryAcquire(ctx, key, "a", holdTTL)
		g.Expect(err).To(MatchError(backends.ErrLocked))
		var locked *backends.LockedError
		g.Expect(errors.As(err, &locked)).To(BeTrue())
		g.Expect(locked.Holder).To(Equal("foreign"))
		g.Expect(locked.ExpireTime).To(BeTemporally("~", time.Now().Add(holdTTL), 5*time.Second))
		g.Expect(err.Error()).To(ContainSubstring(`held by "foreign" on 2 of 3 nodes`))
		g.Expect(holders(t, servers, key)).To(Equal([]string{"", "foreign", "foreign"}))
	})
	t.Run("SplitVote", func(t *testing.T) {
		g := NewWithT(t)
		key := "app/split"
		g.Expect(servers[1].Client().SetNX(ctx, key, "x", holdTTL).Val()).To(BeTrue())
		g.Expect(servers[2].Client().SetNX(ctx, key, "y", holdTTL).Val()).To(BeTrue())
		start := time.Now()
		_, err := b.TryAcquire(ctx, key, "a", holdTTL)
		g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "a few retries, each after a pause under 200 ms")
		g.Expect(err).To(MatchError(backends.ErrLocked), "quorum is out of reach")
		g.Expect(err.Error()).To(ContainSubstring("contended: no holder has a quorum of 2"))
		g.Expect(holders(t, servers, key)).To(Equal([]string{"", "x", "y"}))
	})
}

// A node that restarts empty gets a held lock back at the next renewal, so that the quorum does
// not erode one restart at a time; a lock that lost its quorum is reported lost and its remains
// are released.
func TestRenewRestoresQuorumAfterNodeRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	servers := redistest.StartN(t, 3, redistest.Options{})
	b := newBackend(t, servers)
	held, err := b.TryAcquire(ctx, "app/lock", "a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	record := servers[1].Client().Get(ctx, redisnode.RecordKey("app/lock")).Val()

	servers[0].Kill()
	servers[0].Restart()
	g.Expect(holders(t, servers, "app/lock")).To(Equal([]string{"", "a", "a"}))
	var renewed, lost []backends.Lease
	g.Eventually(func() error {
		renewed, lost, err = b.Renew(ctx, []backends.Lease{held}, holdTTL)
		return err
	}, eventually, 50*time.Millisecond).Should(Succeed())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(1))
	g.Expect(holders(t, servers, "app/lock")).To(Equal([]string{"a", "a", "a"}), "restored on the restarted node")
	g.Expect(servers[0].Client().Get(ctx, redisnode.RecordKey("app/lock")).Val()).To(Equal(record), "with the same hold record")
	g.Expect(servers[0].Client().PTTL(ctx, "app/lock").Val()).To(BeNumerically("~", holdTTL, 5*time.Second))

	servers[0].Kill()
	servers[1].Kill()
	servers[0].Restart()
	servers[1].Restart()
	g.Eventually(func() error {
		renewed, lost, err = b.Renew(ctx, []backends.Lease{held}, holdTTL)
		return err
	}, eventually, 50*time.Millisecond).Should(Succeed())
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(HaveLen(1), "1 of 3 is no quorum")
	g.Expect(holders(t, servers, "app/lock")).To(Equal([]string{"", "", ""}), "not revived, and its remains released")
}

// Another application running Redlock with SET NX PX on the same nodes is refused while
// lockwarden holds the key, and lockwarden is refused while it holds it.
func TestForeignRedlockClientIsExcluded(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	servers := redistest.StartN(t, 3, redistest.Options{})
	b := newBackend(t, servers)

	ours, err := b.TryAcquire(ctx, "shared/lock", "lockwarden-holder", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range servers {
		g.Expect(s.Client().SetNX(ctx, "shared/lock", "foreign", holdTTL).Val()).To(BeFalse(), "refused on %s", s.Addr())
	}
	g.Expect(b.Release(ctx, ours)).To(Succeed())
	g.Expect(holders(t, servers, "shared/lock")).To(Equal([]string{"", "", ""}))
	for _, s := range servers {
		g.Expect(s.Client().SetNX(ctx, "shared/lock", "foreign", holdTTL).Val()).To(BeTrue())
	}
	_, err = b.TryAcquire(ctx, "shared/lock", "lockwarden-holder", holdTTL)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	g.Expect(b.Release(ctx, ours)).To(MatchError(backends.ErrNotHeld))
	got, err := b.Inspect(ctx, "shared/lock")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Identity).To(Equal("foreign"))
	g.Expect(holders(t, servers, "shared/lock")).To(Equal([]string{"foreign", "foreign", "foreign"}))
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, addrs := range map[string][]string{
		"none":      nil,
		"one":       {"127.0.0.1:1"},
		"two":       {"127.0.0.1:1", "127.0.0.1:2"},
		"four":      {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"},
		"duplicate": {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:1"},
		"empty":     {"127.0.0.1:1", "", "127.0.0.1:3"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := redlock.New(redlock.Config{Addresses: addrs})
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
	_, err := redlock.New(redlock.Config{Addresses: []string{"a:1", "b:1", "c:1"}}, redlock.WithClock(nil))
	NewWithT(t).Expect(err).To(HaveOccurred())
}

func TestTimingRules(t *testing.T) {
	g := NewWithT(t)
	for ttl, want := range map[time.Duration]time.Duration{
		2 * time.Second:  100 * time.Millisecond,
		5 * time.Second:  100 * time.Millisecond,
		7 * time.Second:  140 * time.Millisecond,
		10 * time.Second: 200 * time.Millisecond,
		time.Hour:        200 * time.Millisecond,
	} {
		g.Expect(redlock.NodeTimeout(ttl)).To(Equal(want), "NodeTimeout(%s)", ttl)
	}
	g.Expect(redlock.Drift(5 * time.Second)).To(Equal(52 * time.Millisecond))
	g.Expect(redlock.Drift(30 * time.Second)).To(Equal(302 * time.Millisecond))
	for n, q := range map[int]int{3: 2, 5: 3, 7: 4, 15: 8} {
		g.Expect(redlock.Quorum(n)).To(Equal(q))
	}
}
