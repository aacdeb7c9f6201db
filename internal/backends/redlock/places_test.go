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
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/internal/redisnode"
	"github.com/lockwarden/lockwarden/internal/backends/redlock"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

// placeHolders returns, per server, the identities that hold a place of key.
func placeHolders(t *testing.T, servers []*redistest.Server, key string) [][]string {
	t.Helper()
	got := make([][]string, len(servers))
	for i, s := range servers {
		got[i] = s.Client().ZRange(t.Context(), key, 0, -1).Val()
	}
	return got
}

// With 3 nodes and 2 places, a third holder that finds a free place on 2 nodes (a majority) is
// refused: A and B each still hold a place on 2 nodes, and a majority would admit A, B and C.
func TestSharedQuorumRefusesWhatAMajorityWouldAdmit(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	servers := redistest.StartN(t, 3, redistest.Options{})
	b := newBackend(t, servers)
	key := "app/sem"

	for _, id := range []string{"a", "b"} {
		_, err := b.TryAcquireShared(ctx, key, id, holdTTL, 2)
		g.Expect(err).NotTo(HaveOccurred())
	}
	// Node 1 lost a's place and node 3 lost b's (say, by restarts); on 2 nodes each, they are
	// still live until their next renewal.
	g.Expect(servers[0].Client().ZRem(ctx, key, "a").Err()).To(Succeed())
	g.Expect(servers[2].Client().ZRem(ctx, key, "b").Err()).To(Succeed())
	g.Expect(placeHolders(t, servers, key)).To(Equal([][]string{{"b"}, {"a", "b"}, {"a"}}))

	_, err := b.TryAcquireShared(ctx, key, "c", holdTTL, 2)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	var qe *redlock.QuorumError
	g.Expect(errors.As(err, &qe)).To(BeTrue())
	g.Expect(qe.Quorum).To(Equal(3))
	g.Expect(err.Error()).To(ContainSubstring("a place of 2 needs 3 of 3 nodes"))
	t.Logf("TryAcquireShared: %v", err)
	g.Expect(placeHolders(t, servers, key)).To(Equal([][]string{{"b"}, {"a", "b"}, {"a"}}), "c's places on nodes 1 and 3 are undone")

	// Neither a nor b keeps its quorum of 3: both are lost at renewal, and their remains removed.
	renewed, lost, err := b.Renew(ctx, []backends.Lease{{Key: key, Identity: "a", Shared: true}, {Key: key, Identity: "b", Shared: true}}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(HaveLen(2))
	g.Expect(placeHolders(t, servers, key)).To(Equal([][]string{{}, {}, {}}))
	_, err = b.TryAcquireShared(ctx, key, "c", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
}

// More places need more nodes: with one of 3 nodes down, a mutex and a place of 1 are granted
// (2 of 3), a place of 2 is not (3 of 3), and places of 2 taken before are lost at renewal. With
// 5 nodes, places of 2 need 4 and survive one node down.
func TestPlacesAvailability(t *testing.T) {
	ctx := t.Context()
	t.Run("ThreeNodes", func(t *testing.T) {
		g := NewWithT(t)
		servers := redistest.StartN(t, 3, redistest.Options{})
		b := newBackend(t, servers)
		two, err := b.TryAcquireShared(ctx, "app/two", "r", holdTTL, 2)
		g.Expect(err).NotTo(HaveOccurred())
		one, err := b.TryAcquireShared(ctx, "app/one", "r", holdTTL, 1)
		g.Expect(err).NotTo(HaveOccurred())

		servers[2].Kill()
		_, err = b.TryAcquireShared(ctx, "app/new-one", "r", holdTTL, 1)
		g.Expect(err).NotTo(HaveOccurred(), "a place of 1 needs a majority")
		_, err = b.TryAcquireShared(ctx, "app/new-two", "r", holdTTL, 2)
		g.Expect(err).To(MatchError(redlock.ErrUnavailable))
		g.Expect(errors.Is(err, backends.ErrLocked)).To(BeFalse(), "a dead node is not contention")
		g.Expect(err.Error()).To(ContainSubstring("only 2 of 3 nodes granted, 3 needed"))
		g.Expect(placeHolders(t, servers[:2], "app/new-two")).To(Equal([][]string{{}, {}}), "undone on the live nodes")

		renewed, lost, err := b.Renew(ctx, []backends.Lease{two, one}, holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(renewed).To(HaveLen(1))
		g.Expect(renewed[0].Key).To(Equal("app/one"))
		g.Expect(lost).To(Equal([]backends.Lease{two}))
		g.Expect(placeHolders(t, servers[:2], "app/two")).To(Equal([][]string{{}, {}}), "the lost place's remains are released")

		// The node comes back empty: the place of 1 is renewed on the other two, not re-created.
		servers[2].Restart()
		g.Eventually(func() error {
			renewed, lost, err = b.Renew(ctx, []backends.Lease{one}, holdTTL)
			return err
		}, eventually, 50*time.Millisecond).Should(Succeed())
		g.Expect(lost).To(BeEmpty())
		g.Expect(renewed).To(HaveLen(1))
		g.Expect(placeHolders(t, servers, "app/one")).To(Equal([][]string{{"r"}, {"r"}, {}}))
	})
	t.Run("FiveNodes", func(t *testing.T) {
		g := NewWithT(t)
		servers := redistest.StartN(t, 5, redistest.Options{})
		b := newBackend(t, servers)
		held, err := b.TryAcquireShared(ctx, "app/sem", "a", holdTTL, 2)
		g.Expect(err).NotTo(HaveOccurred())

		servers[4].Kill()
		l, err := b.TryAcquireShared(ctx, "app/sem", "b", holdTTL, 2)
		g.Expect(err).NotTo(HaveOccurred(), "4 of 5 nodes")
		renewed, lost, err := b.Renew(ctx, []backends.Lease{held, l}, holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(BeEmpty())
		g.Expect(renewed).To(HaveLen(2))
		holders, err := b.Holders(ctx, "app/sem")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holders).To(HaveLen(2))

		servers[3].Kill()
		_, err = b.TryAcquireShared(ctx, "app/sem", "c", holdTTL, 3)
		g.Expect(err).To(MatchError(redlock.ErrUnavailable), "a place of 3 needs 4 of 5 nodes")
		renewed, lost, err = b.Renew(ctx, []backends.Lease{held}, holdTTL)
		g.Expect(err).NotTo(HaveOccurred(), "a majority answered")
		g.Expect(renewed).To(BeEmpty())
		g.Expect(lost).To(HaveLen(1), "3 of 5 is no quorum for a place of 2")
	})
}

// Another application running Redlock with SET NX PX is refused on every node while places are
// held, and refuses places while it holds a majority.
func TestForeignRedlockClientAndPlaces(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	servers := redistest.StartN(t, 3, redistest.Options{})
	b := newBackend(t, servers)

	r, err := b.TryAcquireShared(ctx, "shared/lock", "reader", holdTTL, 3)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range servers {
		g.Expect(s.Client().SetNX(ctx, "shared/lock", "foreign", holdTTL).Val()).To(BeFalse(), "refused on %s", s.Addr())
	}
	got, err := b.Inspect(ctx, "shared/lock")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Identity).To(Equal("reader"))
	g.Expect(got.Shared).To(BeTrue())
	g.Expect(got.AcquireTime).To(BeTemporally("==", r.AcquireTime))
	g.Expect(got.Version).To(Equal(r.Version))
	g.Expect(b.Release(ctx, r)).To(Succeed())
	for _, s := range servers {
		g.Expect(s.Client().Exists(ctx, "shared/lock", redisnode.PlacesKey("shared/lock")).Val()).To(BeZero())
	}

	for _, s := range servers[1:] {
		g.Expect(s.Client().SetNX(ctx, "shared/lock", "foreign", holdTTL).Val()).To(BeTrue())
	}
	start := time.Now()
	_, err = b.TryAcquireShared(ctx, "shared/lock", "reader", holdTTL, 3)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second), "an exclusive hold on a majority is not retried")
	g.Expect(err.Error()).To(ContainSubstring(`held exclusively by "foreign" on 2 of 3 nodes`))
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue())
	g.Expect(locked.Holder).To(Equal("foreign"))
	g.Expect(locked.ExpireTime).To(BeTemporally("~", time.Now().Add(holdTTL), 5*time.Second))
	g.Expect(placeHolders(t, servers, "shared/lock")[0]).To(BeEmpty(), "the place taken on the free node is undone")
	holders, err := b.Holders(ctx, "shared/lock")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders).To(HaveLen(1))
	g.Expect(holders[0].Shared).To(BeFalse())
}

// Every place held on its quorum refuses a newcomer at once, naming the place that frees first.
func TestFullPlacesAreNotRetried(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	servers := redistest.StartN(t, 3, redistest.Options{})
	b := newBackend(t, servers)
	_, err := b.TryAcquireShared(ctx, "app/sem", "long", 2*holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.TryAcquireShared(ctx, "app/sem", "short", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())

	before := b.RoundTrips()
	_, err = b.TryAcquireShared(ctx, "app/sem", "late", holdTTL, 2)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	g.Expect(b.RoundTrips()-before).To(BeEquivalentTo(3), "one attempt, one request per node, nothing to undo")
	g.Expect(err.Error()).To(ContainSubstring(`all 2 places are held, each on at least 3 of 3 nodes; "short"'s is the first to expire`))
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue())
	g.Expect(locked.ExpireTime).To(BeTemporally("~", time.Now().Add(holdTTL), 5*time.Second))
}
