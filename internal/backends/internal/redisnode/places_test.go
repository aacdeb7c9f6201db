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

package redisnode

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

func TestPlaceRecordRoundTrip(t *testing.T) {
	g := NewWithT(t)
	rec := NewRecord(time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC), "pod:uid:with:colons")
	places, back, ok := parsePlaceRecord(placeRecord(3, rec))
	g.Expect(ok).To(BeTrue())
	g.Expect(places).To(Equal(3))
	g.Expect(back).To(Equal(rec))
	for _, bad := range []string{"", "3", "0:" + rec.String(), "x:" + rec.String(), "3:123:zz:id", "-1:" + rec.String()} {
		_, _, ok := parsePlaceRecord(bad)
		g.Expect(ok).To(BeFalse(), "%q", bad)
	}
}

// placesNode is a Node on a fresh server, the server's own client, and a bounded context maker.
func placesNode(t *testing.T) (*Node, *goredis.Client, *atomic.Int64, func() context.Context) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	var requests atomic.Int64
	n := New(Config{Address: srv.Addr()}, &requests)
	t.Cleanup(func() { _ = n.Close() })
	call := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	return n, srv.Client(), &requests, call
}

// The layout on the server: a sorted set at the lock key scored with expiries by the server's
// clock, a hash of place records beside it, both expiring with the last place.
func TestPlacesLayout(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	n, c, _, call := placesNode(t)
	key := "app/lock"

	recA := NewRecord(time.Now(), "a")
	res, err := n.AcquireShared(call(), key, time.Minute, 2, recA)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(AcquireResult{Outcome: Acquired, Record: recA}))
	res, err = n.AcquireShared(call(), key, 2*time.Minute, 2, NewRecord(time.Now(), "b"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Outcome).To(Equal(Acquired))

	g.Expect(c.Type(ctx, key).Val()).To(Equal("zset"))
	serverNow := c.Time(ctx).Val()
	g.Expect(c.ZScore(ctx, key, "a").Val()).To(BeNumerically("~", serverNow.Add(time.Minute).UnixMilli(), 2000))
	g.Expect(c.ZScore(ctx, key, "b").Val()).To(BeNumerically("~", serverNow.Add(2*time.Minute).UnixMilli(), 2000))
	g.Expect(c.HGet(ctx, PlacesKey(key), "a").Val()).To(Equal(placeRecord(2, recA)))
	for _, k := range []string{key, PlacesKey(key)} {
		g.Expect(c.PTTL(ctx, k).Val()).To(BeNumerically("~", 2*time.Minute, 5*time.Second), "%s expires with the last place", k)
	}
	g.Expect(c.Exists(ctx, RecordKey(key)).Val()).To(BeZero(), "places write no exclusive hold record")

	// Releasing the last place to expire shortens the key's life to the next; releasing the last
	// place deletes both keys.
	freed, err := n.ReleaseShared(call(), key, "b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(freed.Outcome).To(Equal(Released))
	g.Expect(c.PTTL(ctx, key).Val()).To(BeNumerically("~", time.Minute, 5*time.Second))
	g.Expect(c.HExists(ctx, PlacesKey(key), "b").Val()).To(BeFalse())
	freed, err = n.ReleaseShared(call(), key, "a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(freed.Outcome).To(Equal(Released))
	g.Expect(c.Exists(ctx, key, PlacesKey(key)).Val()).To(BeZero())
	freed, err = n.ReleaseShared(call(), key, "a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(freed.Outcome).To(Equal(Free))
}

// Places and exclusive holds exclude each other on the lock key, whoever writes it: lockwarden's
// scripts and any client using SET NX.
func TestPlacesAndExclusiveHolds(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	n, c, _, call := placesNode(t)
	key := "app/lock"

	_, err := n.AcquireShared(call(), key, time.Minute, 3, NewRecord(time.Now(), "reader"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.SetNX(ctx, key, "foreign", time.Minute).Val()).To(BeFalse(), "SET NX of another client is refused while a place is live")

	res, err := n.Acquire(call(), key, time.Minute, NewRecord(time.Now(), "reader"))
	g.Expect(err).NotTo(HaveOccurred(), "a sorted set at the key is contention, not WRONGTYPE")
	g.Expect(res.Outcome).To(Equal(Locked))
	g.Expect(res.Holder).To(Equal("reader"))
	g.Expect(res.PTTL).To(BeNumerically("~", time.Minute, 5*time.Second))
	g.Expect(c.Exists(ctx, RecordKey(key)).Val()).To(BeZero())

	rel, err := n.Release(call(), key, "reader")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Outcome).To(Equal(Free), "an exclusive release finds no exclusive hold")
	held, err := n.Renew(call(), []Claim{{Key: key, Record: Record{Identity: "reader"}}}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held).To(Equal([]Renewal{{}}), "an exclusive renewal finds no exclusive hold")
	g.Expect(c.ZScore(ctx, key, "reader").Err()).NotTo(HaveOccurred(), "the place is untouched")

	// The other way round: a SET NX hold refuses places, and keeps its value and TTL.
	g.Expect(c.SetNX(ctx, "held", "foreign", 30*time.Second).Val()).To(BeTrue())
	res, err = n.AcquireShared(call(), "held", time.Minute, 3, NewRecord(time.Now(), "reader"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Outcome).To(Equal(Locked))
	g.Expect(res.Holder).To(Equal("foreign"))
	g.Expect(res.Places).To(BeNil(), "held exclusively")
	g.Expect(res.PTTL).To(BeNumerically("~", 30*time.Second, 5*time.Second))
	rel, err = n.ReleaseShared(call(), "held", "foreign")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Outcome).To(Equal(Free), "a shared release never frees an exclusive hold")
	held, err = n.Renew(call(), []Claim{{Key: "held", Record: Record{Identity: "foreign"}, Shared: true}}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held).To(Equal([]Renewal{{}}))
	g.Expect(c.Get(ctx, "held").Val()).To(Equal("foreign"))
	g.Expect(c.PTTL(ctx, "held").Val()).To(BeNumerically("<=", 30*time.Second))

	// A key of another type is an error, not contention.
	g.Expect(c.HSet(ctx, "hash", "f", "v").Err()).To(Succeed())
	_, err = n.AcquireShared(call(), "hash", time.Minute, 3, NewRecord(time.Now(), "reader"))
	g.Expect(err).To(MatchError(ContainSubstring("WRONGTYPE")))
	_, err = n.Inspect(call(), "hash")
	g.Expect(err).To(MatchError(ContainSubstring("WRONGTYPE")))
}

// The limit counts live places of other identities; a holder keeps and extends its place whatever
// the limit, with its record; expired places are pruned by the server's clock.
func TestPlacesLimitAndExpiry(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	n, c, _, call := placesNode(t)
	key := "app/lock"

	recA := NewRecord(time.Now(), "a")
	_, err := n.AcquireShared(call(), key, time.Minute, 2, recA)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = n.AcquireShared(call(), key, 300*time.Millisecond, 2, NewRecord(time.Now(), "short"))
	g.Expect(err).NotTo(HaveOccurred())
	res, err := n.AcquireShared(call(), key, time.Minute, 2, NewRecord(time.Now(), "c"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Outcome).To(Equal(Locked))
	g.Expect(res.Places).To(HaveLen(2))
	g.Expect(res.Holder).To(Equal("short"), "the place that expires first")
	g.Expect(res.Places[1].Identity).To(Equal("a"))
	g.Expect(c.ZScore(ctx, key, "c").Err()).To(MatchError(goredis.Nil), "a refused acquire writes nothing")

	// A lower limit refreshes a's place, keeps its record and stores the new limit.
	res, err = n.AcquireShared(call(), key, time.Minute, 1, NewRecord(time.Now(), "a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(AcquireResult{Outcome: Refreshed, Record: recA}))
	g.Expect(c.HGet(ctx, PlacesKey(key), "a").Val()).To(Equal(placeRecord(1, recA)))

	time.Sleep(500 * time.Millisecond)
	res, err = n.AcquireShared(call(), key, time.Minute, 2, NewRecord(time.Now(), "c"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Outcome).To(Equal(Acquired), "the expired place does not count")
	g.Expect(c.ZRange(ctx, key, 0, -1).Val()).To(ConsistOf("a", "c"))
	g.Expect(c.HExists(ctx, PlacesKey(key), "short").Val()).To(BeFalse(), "pruned with its record")

	// Records of places long gone are dropped when a key starts over.
	g.Expect(c.HSet(ctx, PlacesKey("stale"), "x", "junk").Err()).To(Succeed())
	_, err = n.AcquireShared(call(), "stale", time.Minute, 2, NewRecord(time.Now(), "a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.HKeys(ctx, PlacesKey("stale")).Val()).To(ConsistOf("a"))
}

// Inspect, Renew and Settle on places: a mixed renewal is one request and reports each place's
// limit; a lost place is not revived; Settle drops places and restores none.
func TestPlacesInspectRenewSettle(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	n, c, requests, call := placesNode(t)

	h, err := n.Inspect(call(), "free")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h).To(Equal(Holding{}))

	recA, recB := NewRecord(time.Now(), "a"), NewRecord(time.Now(), "b")
	_, err = n.AcquireShared(call(), "shared", time.Minute, 3, recA)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = n.AcquireShared(call(), "shared", 2*time.Minute, 2, recB)
	g.Expect(err).NotTo(HaveOccurred())
	recX := NewRecord(time.Now(), "x")
	_, err = n.Acquire(call(), "exclusive", time.Minute, recX)
	g.Expect(err).NotTo(HaveOccurred())

	h, err = n.Inspect(call(), "shared")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.Holder).To(BeEmpty())
	g.Expect(h.Places).To(HaveLen(2))
	g.Expect(h.Places[0].PTTL).To(BeNumerically("~", time.Minute, 5*time.Second))
	g.Expect(h.Places[1].PTTL).To(BeNumerically("~", 2*time.Minute, 5*time.Second))
	h.Places[0].PTTL, h.Places[1].PTTL = 0, 0
	g.Expect(h.Places).To(Equal([]Place{
		{Identity: "a", Record: recA, HasRecord: true, Places: 3},
		{Identity: "b", Record: recB, HasRecord: true, Places: 2},
	}), "the first to expire first, with records and limits")
	h, err = n.Inspect(call(), "exclusive")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.PTTL).To(BeNumerically("~", time.Minute, 5*time.Second))
	h.PTTL = 0
	g.Expect(h).To(Equal(Holding{Holder: "x", Record: recX, HasRecord: true}))

	// A place whose record is lost renews with an unknown limit.
	g.Expect(c.HDel(ctx, PlacesKey("shared"), "b").Err()).To(Succeed())
	before := requests.Load()
	held, err := n.Renew(call(), []Claim{
		{Key: "shared", Record: Record{Identity: "a"}, Shared: true},
		{Key: "exclusive", Record: Record{Identity: "x"}},
		{Key: "shared", Record: Record{Identity: "b"}, Shared: true},
		{Key: "shared", Record: Record{Identity: "nobody"}, Shared: true},
		{Key: "exclusive", Record: Record{Identity: "a"}, Shared: true},
		{Key: "free", Record: Record{Identity: "a"}, Shared: true},
	}, 3*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(requests.Load()-before).To(BeEquivalentTo(1), "one pipeline")
	g.Expect(held).To(Equal([]Renewal{{Held: true, Places: 3}, {Held: true}, {Held: true}, {}, {}, {}}))
	g.Expect(c.PTTL(ctx, "shared").Val()).To(BeNumerically("~", 3*time.Minute, 5*time.Second))
	g.Expect(c.ZScore(ctx, "shared", "nobody").Err()).To(MatchError(goredis.Nil), "renewal revives nothing")
	g.Expect(c.Exists(ctx, "free").Val()).To(BeZero())

	before = requests.Load()
	err = n.Settle(call(),
		[]Claim{{Key: "restore-me", Record: recA, Shared: true}},
		[]Claim{{Key: "shared", Record: Record{Identity: "a"}, Shared: true}}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(requests.Load() - before).To(BeEquivalentTo(1))
	g.Expect(c.Exists(ctx, "restore-me").Val()).To(BeZero(), "places are never restored")
	g.Expect(c.ZRange(ctx, "shared", 0, -1).Val()).To(ConsistOf("b"))
	before = requests.Load()
	g.Expect(n.Settle(call(), []Claim{{Key: "restore-me", Record: recA, Shared: true}}, nil, time.Minute)).To(Succeed())
	g.Expect(requests.Load()).To(Equal(before), "nothing to send, nothing sent")
}
