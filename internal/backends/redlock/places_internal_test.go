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
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
)

func TestSharedQuorum(t *testing.T) {
	for _, tc := range []struct{ nodes, places, want int }{
		{3, 1, 2}, // one place is a mutex: the majority
		{3, 2, 3}, // a majority would admit A on 1,2, B on 2,3 and C on 1,3
		{3, 3, 3},
		{3, 100, 3},
		{5, 1, 3},
		{5, 2, 4},
		{5, 3, 4},
		{5, 4, 5},
		{7, 1, 4},
		{7, 2, 5},
		{7, 3, 6},
		{7, 6, 7},
	} {
		t.Run(fmt.Sprintf("%d nodes %d places", tc.nodes, tc.places), func(t *testing.T) {
			NewWithT(t).Expect(SharedQuorum(tc.nodes, tc.places)).To(Equal(tc.want))
		})
	}
}

// SharedQuorum is the least that is safe: with one node fewer, places+1 holders can each hold a
// place on that many nodes without any node admitting more than places of them (the placement is
// built below); with SharedQuorum nodes each, they would need more places than the nodes admit.
func TestSharedQuorumIsTheLeastSafe(t *testing.T) {
	for nodes := 3; nodes <= 9; nodes += 2 {
		g := NewWithT(t)
		g.Expect(SharedQuorum(nodes, 1)).To(Equal(Quorum(nodes)), "one place needs a majority of %d", nodes)
		for places := 1; places <= 12; places++ {
			q := SharedQuorum(nodes, places)
			g.Expect(q).To(BeNumerically("<=", nodes))
			g.Expect(q).To(BeNumerically(">=", Quorum(nodes)), "an exclusive hold and a place meet on a node")
			g.Expect((places+1)*q).To(BeNumerically(">", nodes*places), "%d holders on %d of %d nodes fit in no node set admitting %d each", places+1, q, nodes, places)
			// Deal places+1 holders onto q-1 consecutive nodes each, round the ring: every node
			// gets at most places of them, so q-1 nodes would admit one holder too many.
			load := make([]int, nodes)
			next := 0
			for range places + 1 {
				for range q - 1 {
					load[next%nodes]++
					next++
				}
			}
			for node, n := range load {
				g.Expect(n).To(BeNumerically("<=", places), "%d nodes, %d places, quorum %d: node %d", nodes, places, q-1, node)
			}
		}
	}
}

func TestPlaceQuorum(t *testing.T) {
	for name, tc := range map[string]struct {
		nodes  int
		limits []int
		want   int
	}{
		"one place":                         {3, []int{1, 1}, 2},
		"two places":                        {5, []int{2, 2, 2, 2}, 4},
		"the highest limit decides":         {5, []int{1, 4, 1}, 5},
		"limits lowered on some nodes":      {5, []int{3, 1, 1, 1}, 4},
		"a node without the record":         {5, []int{1, 0, 1}, 5},
		"no node holds it (lost any way)":   {3, nil, 2},
		"more places than nodes need all 3": {3, []int{7}, 3},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(placeQuorum(tc.nodes, tc.limits)).To(Equal(tc.want))
		})
	}
}

func TestFullPlaces(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := time.Second
	placed := map[string][]time.Duration{
		"a": {9 * s, 8 * s, 7 * s},
		"b": {5 * s, 6 * s, 9 * s},
		"c": {1 * s, 1 * s}, // on too few nodes to count
	}
	first, expire, n := fullPlaces(now, placed, 3)
	g.Expect(n).To(Equal(2))
	g.Expect(first).To(Equal("b"))
	g.Expect(expire).To(Equal(now.Add(5 * s)))
	first, _, n = fullPlaces(now, nil, 3)
	g.Expect(first).To(BeEmpty())
	g.Expect(n).To(BeZero())
}

func TestSharedQuorumErrorMessages(t *testing.T) {
	for name, tc := range map[string]struct {
		err    *QuorumError
		want   string
		locked bool
	}{
		"full": {
			&QuorumError{Op: "acquire", Key: "k", Nodes: 3, Quorum: 3, Places: 2, Full: true, HolderNodes: 3, Locked: &backends.LockedError{Key: "k", Holder: "b"}},
			`redlock acquire "k": all 2 places are held, each on at least 3 of 3 nodes; "b"'s is the first to expire`, true,
		},
		"exclusive": {
			&QuorumError{Op: "acquire", Key: "k", Nodes: 3, Quorum: 3, Places: 2, Exclusive: true, HolderNodes: 2, Locked: &backends.LockedError{Key: "k", Holder: "w"}},
			`redlock acquire "k": held exclusively by "w" on 2 of 3 nodes`, true,
		},
		"contended": {
			&QuorumError{Op: "acquire", Key: "k", Nodes: 5, Quorum: 4, Places: 2, Agreed: 1, HolderNodes: 3, Locked: &backends.LockedError{Key: "k", Holder: "b"}},
			`redlock acquire "k": contended: a place of 2 needs 4 of 5 nodes, and other holders ("b" on 3) leave only 1 granted`, true,
		},
		"unavailable": {
			&QuorumError{Op: "acquire", Key: "k", Nodes: 3, Quorum: 3, Places: 2, Agreed: 2, Failed: []NodeError{{Address: "10.0.0.5:6379", Err: errors.New("boom")}}},
			`redlock acquire "k": only 2 of 3 nodes granted, 3 needed; 1 failed: 10.0.0.5:6379: boom`, false,
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.err.Error()).To(Equal(tc.want))
			g.Expect(errors.Is(tc.err, backends.ErrLocked)).To(Equal(tc.locked))
			g.Expect(errors.Is(tc.err, ErrUnavailable)).To(Equal(!tc.locked))
		})
	}
}
