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
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

func TestRecordRoundTrip(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2030, 5, 6, 7, 8, 9, 123_456_789, time.UTC)
	r := NewRecord(now, "pod:uid:with:colons")
	g.Expect(r.AcquireTime).To(BeTemporally("==", now.Truncate(time.Millisecond)))
	g.Expect(r.HoldID).To(HaveLen(16))
	g.Expect(NewRecord(now, "x").HoldID).NotTo(Equal(r.HoldID), "hold ids are random")
	back, ok := ParseRecord(r.String())
	g.Expect(ok).To(BeTrue())
	g.Expect(back).To(Equal(Record{AcquireTime: time.UnixMilli(now.UnixMilli()), HoldID: r.HoldID, Identity: "pod:uid:with:colons"}))
	for _, bad := range []string{"", "123", "123:abc", "x:ab:id", "123::id", "123:zz:id"} {
		_, ok := ParseRecord(bad)
		g.Expect(ok).To(BeFalse(), "%q", bad)
	}
}

func TestErrorsNeverShowThePassword(t *testing.T) {
	g := NewWithT(t)
	n := &Node{addr: "10.1.2.3:6379", password: "hunter22"}
	err := n.fail(context.Background(), time.Now(), "ping", errors.New("ERR weird reply mentioning hunter22"))
	g.Expect(err.Error()).To(Equal("redis 10.1.2.3:6379: ping: ERR weird reply mentioning [redacted]"))
	g.Expect(errors.Unwrap(err)).To(MatchError(ContainSubstring("weird reply")), "the driver's error is kept for errors.Is")

	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(150*time.Millisecond))
	defer cancel()
	<-ctx.Done()
	err = n.fail(ctx, start, "renew", ctx.Err())
	var e *Error
	g.Expect(errors.As(err, &e)).To(BeTrue())
	g.Expect(e.Timeout).To(BeTrue())
	g.Expect(err.Error()).To(HavePrefix("redis 10.1.2.3:6379: renew: no answer within 150ms"))
}

// Edge cases of the scripts against a real server: keys of other types, stale records.
func TestScriptsEdgeCases(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	var requests atomic.Int64
	n := New(Config{Address: srv.Addr()}, &requests)
	defer n.Close()
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 5*time.Second) }

	// A key of another type is an error for acquire, not contention, and is not ours to renew.
	g.Expect(c.HSet(ctx, "hash", "f", "v").Err()).To(Succeed())
	cctx, cancel := call()
	_, err := n.Acquire(cctx, "hash", time.Minute, NewRecord(time.Now(), "a"))
	cancel()
	g.Expect(err).To(MatchError(ContainSubstring("WRONGTYPE")))
	g.Expect(err).To(MatchError(ContainSubstring(`redis ` + srv.Addr() + `: acquire "hash"`)))

	cctx, cancel = call()
	res, err := n.Acquire(cctx, "plain", time.Minute, NewRecord(time.Now(), "a"))
	cancel()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Outcome).To(Equal(Acquired))
	cctx, cancel = call()
	held, err := n.Renew(cctx, []Claim{{Key: "hash", Record: Record{Identity: "a"}}, {Key: "plain", Record: Record{Identity: "a"}}, {Key: "free", Record: Record{Identity: "a"}}}, 2*time.Minute)
	cancel()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held).To(Equal([]Renewal{{}, {Held: true}, {}}))
	g.Expect(c.Exists(ctx, "free").Val()).To(BeZero(), "renewal revives nothing")

	// A record that names another identity (the key was rewritten by a client that writes no
	// records) is replaced when the new value's identity refreshes its hold, and not reported by
	// Inspect meanwhile.
	g.Expect(c.Set(ctx, "plain", "b", time.Minute).Err()).To(Succeed())
	cctx, cancel = call()
	h, err := n.Inspect(cctx, "plain")
	cancel()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.Holder).To(Equal("b"))
	g.Expect(h.HasRecord).To(BeFalse(), "the record is a's")
	g.Expect(h.PTTL).To(BeNumerically("~", time.Minute, 5*time.Second))
	rec := NewRecord(time.Now(), "b")
	cctx, cancel = call()
	res, err = n.Acquire(cctx, "plain", time.Minute, rec)
	cancel()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Outcome).To(Equal(Refreshed))
	g.Expect(res.Record).To(Equal(rec), "b's hold gets a record of its own")

	// A key without TTL is held by its value for ever.
	g.Expect(c.Set(ctx, "forever", "z", 0).Err()).To(Succeed())
	cctx, cancel = call()
	res, err = n.Acquire(cctx, "forever", time.Minute, NewRecord(time.Now(), "a"))
	cancel()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(AcquireResult{Outcome: Locked, Holder: "z", PTTL: -1}))

	// Settle takes free keys and drops its own, leaving others' alone.
	g.Expect(c.Set(ctx, "others", "z", time.Minute).Err()).To(Succeed())
	cctx, cancel = call()
	before := requests.Load()
	err = n.Settle(cctx,
		[]Claim{{Key: "restored", Record: rec}, {Key: "others", Record: rec}},
		[]Claim{{Key: "plain", Record: Record{Identity: "b"}}, {Key: "forever", Record: Record{Identity: "b"}}}, time.Minute)
	cancel()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(requests.Load() - before).To(BeEquivalentTo(1))
	g.Expect(c.Get(ctx, "restored").Val()).To(Equal("b"))
	g.Expect(c.Get(ctx, RecordKey("restored")).Val()).To(Equal(rec.String()))
	g.Expect(c.Get(ctx, "others").Val()).To(Equal("z"))
	g.Expect(c.Exists(ctx, "plain", RecordKey("plain")).Val()).To(BeZero())
	g.Expect(c.Get(ctx, "forever").Val()).To(Equal("z"))
}
