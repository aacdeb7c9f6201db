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

package redlock

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/internal/redisnode"
)

func TestQuorumErrorMessagesAndUnwrap(t *testing.T) {
	nodeErr := NodeError{Address: "10.0.0.3:6379", Err: errors.New("redis 10.0.0.3:6379: acquire \"k\": cannot connect: connection refused")}
	bare := NodeError{Address: "10.0.0.5:6379", Err: errors.New("boom")}
	for name, tc := range map[string]struct {
		err    *QuorumError
		want   string
		locked bool
	}{
		"held": {
			&QuorumError{Op: "acquire", Key: "k", Nodes: 3, Quorum: 2, HolderNodes: 2, Locked: &backends.LockedError{Key: "k", Holder: "b"}},
			`redlock acquire "k": held by "b" on 2 of 3 nodes`, true,
		},
		"split": {
			&QuorumError{Op: "acquire", Key: "k", Nodes: 3, Quorum: 2, Agreed: 1, HolderNodes: 1, Locked: &backends.LockedError{Key: "k", Holder: "b"}},
			`redlock acquire "k": contended: no holder has a quorum of 2 ("b" has 1 of 3 nodes) and only 1 granted, so none can`, true,
		},
		"unavailable": {
			&QuorumError{Op: "acquire", Key: "k", Nodes: 5, Quorum: 3, Agreed: 2, Failed: []NodeError{nodeErr, bare}},
			`redlock acquire "k": only 2 of 5 nodes granted, 3 needed; 2 failed: redis 10.0.0.3:6379: acquire "k": cannot connect: connection refused; 10.0.0.5:6379: boom`, false,
		},
		"too slow": {
			&QuorumError{Op: "renew", Nodes: 3, Quorum: 2, Agreed: 3, Elapsed: 5 * time.Second, TTL: 5 * time.Second},
			`redlock renew: 3 of 3 nodes answered, but only after 5s of the 5s TTL, leaving no validity (allowing 52ms of clock drift)`, false,
		},
		"ping": {
			&QuorumError{Op: "ping", Nodes: 3, Quorum: 2, Agreed: 1, Failed: []NodeError{bare}},
			`redlock ping: only 1 of 3 nodes passed, 2 needed; 1 failed: 10.0.0.5:6379: boom`, false,
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.err.Error()).To(Equal(tc.want))
			g.Expect(errors.Is(tc.err, backends.ErrLocked)).To(Equal(tc.locked))
			g.Expect(errors.Is(tc.err, ErrUnavailable)).To(Equal(!tc.locked))
			g.Expect(errors.Is(tc.err, backends.ErrNotHeld)).To(BeFalse())
			var locked *backends.LockedError
			g.Expect(errors.As(tc.err, &locked)).To(Equal(tc.locked))
		})
	}
}

func TestQuorumExpiry(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := time.Second
	for name, tc := range map[string]struct {
		pttls  []time.Duration
		quorum int
		want   time.Duration // -1: zero time
	}{
		"all equal":              {[]time.Duration{5 * s, 5 * s, 5 * s}, 2, 5 * s},
		"held until the 2nd one": {[]time.Duration{1 * s, 9 * s, 5 * s}, 2, 5 * s},
		"exactly a quorum":       {[]time.Duration{9 * s, 3 * s}, 2, 3 * s},
		"five nodes":             {[]time.Duration{1 * s, 2 * s, 3 * s, 4 * s, 5 * s}, 3, 3 * s},
		"one without TTL":        {[]time.Duration{-1, 4 * s, 2 * s}, 2, 4 * s},
		"quorum without TTL":     {[]time.Duration{-1, -1, 2 * s}, 2, -1},
		"no quorum":              {[]time.Duration{5 * s}, 2, -1},
	} {
		t.Run(name, func(t *testing.T) {
			got := quorumExpiry(now, tc.pttls, tc.quorum)
			if tc.want < 0 {
				NewWithT(t).Expect(got.IsZero()).To(BeTrue(), "got %s", got)
				return
			}
			NewWithT(t).Expect(got).To(Equal(now.Add(tc.want)))
		})
	}
}

func TestMostCommonAndStrongest(t *testing.T) {
	g := NewWithT(t)
	early := redisnode.Record{AcquireTime: time.UnixMilli(1000), HoldID: "aa", Identity: "x"}
	late := redisnode.Record{AcquireTime: time.UnixMilli(2000), HoldID: "bb", Identity: "x"}
	g.Expect(mostCommon([]redisnode.Record{late, early, late})).To(Equal(late))
	g.Expect(mostCommon([]redisnode.Record{late, early})).To(Equal(early), "ties go to the earliest")

	h, v := strongest(map[string][]time.Duration{"b": {1, 2}, "a": {3, 4}, "c": {5}})
	g.Expect(h).To(Equal("a"), "ties go to the smaller name")
	g.Expect(v).To(HaveLen(2))
	h, v = strongest(nil)
	g.Expect(h).To(BeEmpty())
	g.Expect(v).To(BeEmpty())
}
