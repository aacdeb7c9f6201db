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

package zookeeper

import (
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/go-zookeeper/zk"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// Identities are opaque strings; every one must make a node name ZooKeeper accepts, and give
// itself back, so that Release and Renew find a place by its name.
func TestPlaceNames(t *testing.T) {
	for _, identity := range []string{
		"0b7c1f0e-5d4a-4f36-9a51-3f0c2d9e8b11", "team/a", "a;b", ".", "..", "zookeeper", "with space",
		"100%", "%41", "ünïcödé", "tab\there", "nul\x00byte", "del\x7f", "\u2028", "\ufff0", "a;b;c/d",
	} {
		name := placeName(identity, "0123456789abcdef")
		if strings.Contains(name, "/") || name == "." || name == ".." {
			t.Errorf("placeName(%q) = %q: not one node name", identity, name)
		}
		if strings.Count(name, ";") != 1 {
			t.Errorf("placeName(%q) = %q: the identity's ';' is not escaped", identity, name)
		}
		for _, r := range name {
			// ZooKeeper refuses control characters and several non-ASCII ranges; escaping
			// every non-ASCII byte keeps clear of all of them.
			if r > unicode.MaxASCII || unicode.IsControl(r) {
				t.Errorf("placeName(%q) = %q: holds %q", identity, name, r)
			}
		}
		got, ok := placeIdentity(name)
		if !ok || got != identity {
			t.Errorf("placeIdentity(placeName(%q)) = %q, %t", identity, got, ok)
		}
	}
	for _, name := range []string{"lock", "places", "", ";0123", "%zz;0123"} {
		if id, ok := placeIdentity(name); ok {
			t.Errorf("placeIdentity(%q) = %q: a name placeName did not make", name, id)
		}
	}
}

// serverNow is the ensemble's time in the planning tests.
var serverNow = time.UnixMilli(1_700_000_000_000)

// placeOf is identity's place, written so that it expires at serverNow + left.
func placeOf(identity string, left time.Duration) place {
	return place{
		node: node{
			rec:    record{Holder: identity, TTLMillis: time.Minute.Milliseconds()},
			stat:   &zk.Stat{Mtime: serverNow.Add(left - time.Minute).UnixMilli(), Version: 3},
			exists: true,
		},
		name: placeName(identity, "0123456789abcdef"),
	}
}

// foreignPlace is a node under the places node whose data is not our record.
func foreignPlace(identity string) place {
	p := placeOf(identity, -time.Hour)
	p.rec, p.foreign = record{Holder: identity}, true
	return p
}

func TestSplitPlaces(t *testing.T) {
	live, expired := splitPlaces([]place{
		placeOf("a", time.Second), placeOf("b", 0), placeOf("c", -time.Second), foreignPlace("d"),
	}, serverNow)
	if got := holders(live); got != "a,d" {
		t.Errorf("live = %s, want a,d (an expiry at serverNow has passed; foreign data never expires)", got)
	}
	if got := holders(expired); got != "b,c" {
		t.Errorf("expired = %s, want b,c", got)
	}
}

func holders(places []place) string {
	var ids []string
	for _, p := range places {
		ids = append(ids, p.rec.Holder)
	}
	return strings.Join(ids, ",")
}

func TestPlanShared(t *testing.T) {
	liveLock := node{rec: record{Holder: "writer", TTLMillis: 60_000}, stat: &zk.Stat{Mtime: serverNow.UnixMilli()}, exists: true}
	expiredLock := node{rec: record{Holder: "writer", TTLMillis: 1_000}, stat: &zk.Stat{Mtime: serverNow.Add(-time.Minute).UnixMilli()}, exists: true}
	foreignLock := node{rec: record{Holder: "batch-job"}, stat: &zk.Stat{}, exists: true, foreign: true}
	for name, tc := range map[string]struct {
		lock   node
		places []place
		limit  int
		// blocker is the identity that refuses the place, "" when it is granted.
		blocker string
		// own is set when the identity's place is refreshed rather than taken anew.
		own   bool
		prune string
	}{
		"a free key":                      {limit: 1},
		"a live lock refuses":             {lock: liveLock, limit: 3, blocker: "writer"},
		"an outside client's lock":        {lock: foreignLock, limit: 3, blocker: "batch-job"},
		"a live lock refuses its holder":  {lock: liveLock, places: []place{placeOf("me", time.Minute)}, limit: 3, blocker: "writer"},
		"an expired lock is no obstacle":  {lock: expiredLock, limit: 1},
		"a free place":                    {places: []place{placeOf("a", time.Minute)}, limit: 2},
		"every place taken":               {places: []place{placeOf("a", time.Minute), placeOf("b", time.Minute)}, limit: 2, blocker: "a"},
		"an expired place does not count": {places: []place{placeOf("a", time.Minute), placeOf("b", -time.Second)}, limit: 2, prune: "b"},
		"the holder refreshes":            {places: []place{placeOf("a", time.Minute), placeOf("me", time.Minute)}, limit: 2, own: true},
		"the holder keeps its place over a lower limit": {
			places: []place{placeOf("a", time.Minute), placeOf("b", time.Minute), placeOf("me", time.Minute)}, limit: 1, own: true,
		},
		"the holder's expired place is a new one": {
			places: []place{placeOf("a", time.Minute), placeOf("me", -time.Second)}, limit: 1, blocker: "a",
		},
		"the holder's expired place is pruned when one is free": {
			places: []place{placeOf("me", -time.Second)}, limit: 1, prune: "me",
		},
		"foreign data under the holder's name counts as another's": {
			places: []place{foreignPlace("me")}, limit: 1, blocker: "me",
		},
		"a second node of the holder goes": {
			places: []place{placeOf("me", time.Minute), placeOf("me", 2*time.Minute)}, limit: 1, own: true, prune: "me",
		},
	} {
		t.Run(name, func(t *testing.T) {
			plan := planShared(tc.lock, tc.places, "me", tc.limit, serverNow)
			blocker := ""
			if plan.blocker != nil {
				blocker = plan.blocker.rec.Holder
			}
			if blocker != tc.blocker {
				t.Errorf("blocker = %q, want %q", blocker, tc.blocker)
			}
			if plan.blocker != nil {
				return
			}
			if (plan.own != nil) != tc.own {
				t.Errorf("own = %v, want set %t", plan.own, tc.own)
			}
			if got := holders(plan.prune); got != tc.prune {
				t.Errorf("prune = %q, want %q", got, tc.prune)
			}
		})
	}
}

// A key's exclusive hold is one hold whoever asks for it; its places are one per identity.
func TestHoldID(t *testing.T) {
	lock := func(id string) backends.Lease { return backends.Lease{Key: "k", Identity: id} }
	place := func(id string) backends.Lease { return backends.Lease{Key: "k", Identity: id, Shared: true} }
	again := place("a") // a second lease of one identity's place, made apart from the first
	switch {
	case holdID(lock("a")) != holdID(lock("b")):
		t.Error("two identities' leases of one lock are two holds")
	case holdID(place("a")) == holdID(place("b")):
		t.Error("two identities' places are one hold")
	case holdID(place("a")) == holdID(lock("a")):
		t.Error("a place and the lock are one hold")
	case holdID(place("a")) != holdID(again):
		t.Error("one identity's place is two holds")
	}
}
