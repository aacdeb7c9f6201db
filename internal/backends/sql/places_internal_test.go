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

package sqlbackend

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// Holders and Inspect report live holds only, the exclusive one before any place, and places in
// a repeatable order; the places marker is nobody's hold.
func TestLiveHolders(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exclusive := func(holder string, live bool) row {
		return row{holder: holder, grant: 7, live: live, expires: at, ttl: time.Second}
	}
	place := func(holder string, live bool) row {
		r := exclusive(holder, live)
		r.shared = true
		return r
	}
	for name, tc := range map[string]struct {
		rows []row
		want []string // identity, with "*" after a place
	}{
		"no rows":                       {nil, []string{}},
		"the marker alone":              {[]row{exclusive("", false)}, []string{}},
		"a live exclusive hold":         {[]row{exclusive("w", true)}, []string{"w"}},
		"an expired exclusive hold":     {[]row{exclusive("w", false)}, []string{}},
		"places, sorted":                {[]row{exclusive("", false), place("c", true), place("a", true), place("b", true)}, []string{"a*", "b*", "c*"}},
		"expired places are not holds":  {[]row{exclusive("", false), place("a", false), place("b", true)}, []string{"b*"}},
		"exclusive before places":       {[]row{place("a", true), exclusive("w", true)}, []string{"w"}},
		"a live row naming nobody":      {[]row{exclusive("", true), place("a", true)}, []string{"a*"}},
		"expired exclusive, live place": {[]row{exclusive("w", false), place("a", true)}, []string{"a*"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := liveHolders("k", tc.rows)
			g.Expect(got).NotTo(BeNil(), "a free key gives an empty list, not nil")
			ids := []string{}
			for _, l := range got {
				g.Expect(l.Key).To(Equal("k"))
				g.Expect(l.Version).To(Equal("7"))
				id := l.Identity
				if l.Shared {
					id += "*"
				}
				ids = append(ids, id)
			}
			g.Expect(ids).To(Equal(tc.want))
		})
	}
}

// A refused acquire finds its own hold (MySQL's read-back, or a racer of the same identity), or
// contention naming someone else where it can, or nothing, and then tries again.
func TestAfterRefusal(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	hold := func(id string, shared bool) backends.Lease {
		return backends.Lease{Key: "k", Identity: id, Shared: shared, ExpireTime: at}
	}
	for name, tc := range map[string]struct {
		holders    []backends.Lease
		identity   string
		shared     bool
		wantOwn    string
		wantLocked string // the holder named; "" for no error
	}{
		"free: try again":                       {nil, "me", false, "", ""},
		"own exclusive hold":                    {[]backends.Lease{hold("me", false)}, "me", false, "me", ""},
		"own place":                             {[]backends.Lease{hold("a", true), hold("me", true)}, "me", true, "me", ""},
		"exclusive hold of another":             {[]backends.Lease{hold("w", false)}, "me", false, "", "w"},
		"places refuse an exclusive acquire":    {[]backends.Lease{hold("a", true), hold("b", true)}, "me", false, "", "a"},
		"own place refuses own exclusive":       {[]backends.Lease{hold("me", true)}, "me", false, "", "me"},
		"another is named before self":          {[]backends.Lease{hold("me", true), hold("z", true)}, "me", false, "", "z"},
		"own exclusive refuses own place":       {[]backends.Lease{hold("me", false)}, "me", true, "", "me"},
		"every place taken by others":           {[]backends.Lease{hold("a", true), hold("b", true)}, "me", true, "", "a"},
		"exclusive hold refuses a shared racer": {[]backends.Lease{hold("w", false)}, "me", true, "", "w"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			own, locked := afterRefusal("k", tc.holders, tc.identity, tc.shared)
			if tc.wantOwn == "" {
				g.Expect(own).To(BeNil())
			} else {
				g.Expect(own).NotTo(BeNil())
				g.Expect(own.Identity).To(Equal(tc.wantOwn))
				g.Expect(own.Shared).To(Equal(tc.shared))
			}
			if tc.wantLocked == "" {
				g.Expect(locked).To(BeNil())
				return
			}
			g.Expect(locked).NotTo(BeNil())
			g.Expect(locked).To(MatchError(backends.ErrLocked))
			g.Expect(*locked).To(Equal(backends.LockedError{Key: "k", Holder: tc.wantLocked, ExpireTime: at}))
		})
	}
}

// A renewal keeps what this session still holds with this TTL, moves what another session (or
// another TTL) holds, and loses anything else: a place is never mistaken for the exclusive hold
// of the same identity, nor a new hold for the old one.
func TestJudgeRenewal(t *testing.T) {
	const session = "s1"
	ttl := 30 * time.Second
	held := row{holder: "a", grant: 42, session: session, ttl: ttl, live: true}
	lease := backends.Lease{Key: "k", Identity: "a", Version: "42"}
	with := func(f func(*row)) row { r := held; f(&r); return r }
	shared := func(l backends.Lease) backends.Lease { l.Shared = true; return l }
	for name, tc := range map[string]struct {
		lease backends.Lease
		row   row
		found bool
		want  renewal
	}{
		"held by this session":         {lease, held, true, renewKeep},
		"a place held by this session": {shared(lease), with(func(r *row) { r.shared = true }), true, renewKeep},
		"no row":                       {lease, row{}, false, renewLost},
		"expired":                      {lease, with(func(r *row) { r.live = false }), true, renewLost},
		"another identity":             {lease, with(func(r *row) { r.holder = "b" }), true, renewLost},
		"a new hold":                   {lease, with(func(r *row) { r.grant = 43 }), true, renewLost},
		"any hold when no Version":     {backends.Lease{Key: "k", Identity: "a"}, with(func(r *row) { r.grant = 43 }), true, renewKeep},
		"a place, not the lock row":    {lease, with(func(r *row) { r.shared = true }), true, renewLost},
		"the lock row, not a place":    {shared(lease), held, true, renewLost},
		"another session":              {lease, with(func(r *row) { r.session = "s0" }), true, renewMove},
		"another TTL":                  {shared(lease), with(func(r *row) { r.shared, r.ttl = true, time.Minute }), true, renewMove},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(judgeRenewal(tc.lease, tc.row, tc.found, session, ttl)).To(Equal(tc.want))
		})
	}
}

// MySQL reads after a renewal name at most a budget of key bytes each, lock keys before place
// keys, and never split a key or skip one.
func TestChunkKeys(t *testing.T) {
	k := func(n int, c string) string { return strings.Repeat(c, n) }
	for name, tc := range map[string]struct {
		locks, places []string
		budget        int
		want          []keyChunk
	}{
		"nothing":     {nil, nil, 10, nil},
		"one read":    {[]string{"a", "b"}, []string{"c"}, 10, []keyChunk{{locks: []string{"a", "b"}, places: []string{"c"}}}},
		"places only": {nil, []string{"c"}, 10, []keyChunk{{places: []string{"c"}}}},
		"split at the budget": {[]string{k(4, "a"), k(4, "b")}, []string{k(3, "c"), k(5, "d")}, 10,
			[]keyChunk{{locks: []string{k(4, "a"), k(4, "b")}}, {places: []string{k(3, "c"), k(5, "d")}}}},
		"exactly the budget": {[]string{k(5, "a")}, []string{k(5, "b")}, 10,
			[]keyChunk{{locks: []string{k(5, "a")}, places: []string{k(5, "b")}}}},
		"a key over the budget goes alone": {[]string{"a", k(20, "b"), "c"}, nil, 10,
			[]keyChunk{{locks: []string{"a"}}, {locks: []string{k(20, "b")}}, {locks: []string{"c"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(chunkKeys(tc.locks, tc.places, tc.budget)).To(Equal(tc.want))
		})
	}
}

// A renewal reads each key once per kind: a key may have an exclusive lease and places leases in
// one batch (a stale lease beside a new one), and both must be read.
func TestDistinctKeys(t *testing.T) {
	g := NewWithT(t)
	locks, places := distinctKeys([]backends.Lease{
		{Key: "x"}, {Key: "s", Shared: true, Identity: "a"}, {Key: "s", Shared: true, Identity: "b"},
		{Key: "x"}, {Key: "s"}, {Key: "y"},
	})
	g.Expect(locks).To(Equal([]string{"x", "s", "y"}))
	g.Expect(places).To(Equal([]string{"s"}))
}
