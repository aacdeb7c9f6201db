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

package reliability

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// exclusiveView is a key held by holder alone.
func exclusiveView(holder string) BackendView {
	return BackendView{Known: true, Held: true, Holder: holder}
}

// sharedView is a key held in places by places, given sorted.
func sharedView(places ...string) BackendView {
	return BackendView{Known: true, Held: true, Holder: places[0], Places: places}
}

func viewsEqual(a, b BackendView) bool {
	return a.Known == b.Known && a.Held == b.Held && a.Holder == b.Holder && slices.Equal(a.Places, b.Places) &&
		slices.Equal(a.Reserved, b.Reserved)
}

// reserving is v with the given identities' places reserved.
func reserving(v BackendView, ids ...string) BackendView {
	v.Reserved = ids
	return v
}

func TestPlacesView(t *testing.T) {
	for name, c := range map[string]struct {
		exclusive string
		places    []string
		want      BackendView
	}{
		"free":                     {"", nil, BackendView{Known: true}},
		"exclusive":                {"a", nil, exclusiveView("a")},
		"places sorted, deduped":   {"", []string{"c", "a", "c"}, sharedView("a", "c")},
		"exclusive beside a place": {"x", []string{"b"}, BackendView{Known: true, Held: true, Holder: "x", Places: []string{"b"}}},
	} {
		if got := placesView(c.exclusive, c.places); !viewsEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}

func TestViewRoles(t *testing.T) {
	beside := placesView("x", []string{"b", "a"})
	for name, c := range map[string]struct {
		v         BackendView
		exclusive string
		keys      []string // holders as heldKeys lists them
	}{
		"free":      {BackendView{Known: true}, "", nil},
		"unknown":   {BackendView{}, "", nil},
		"exclusive": {exclusiveView("a"), "a", []string{"a"}},
		"places":    {sharedView("a", "b"), "", []string{"a", "b"}},
		"beside":    {beside, "x", []string{"x", "a", "b"}},
	} {
		if got := c.v.exclusiveHolder(); got != c.exclusive {
			t.Errorf("%s: exclusive holder %q, want %q", name, got, c.exclusive)
		}
		var holders []string
		for _, k := range heldKeys("k", c.v) {
			if k.Key != "k" {
				t.Errorf("%s: key %q", name, k.Key)
			}
			holders = append(holders, k.Holder)
		}
		if !slices.Equal(holders, c.keys) {
			t.Errorf("%s: held keys %v, want %v", name, holders, c.keys)
		}
	}
	// Mapping identities keeps each holder's role and sorts the places again.
	upper := func(s string) string { return strings.ToUpper(s) }
	rename := func(s string) string { return map[string]string{"a": "z", "b": "b", "x": "x"}[s] }
	for name, c := range map[string]struct {
		v, want BackendView
		f       func(string) string
	}{
		"exclusive": {exclusiveView("a"), exclusiveView("A"), upper},
		"places":    {sharedView("a", "b"), sharedView("b", "z"), rename},
		"beside":    {beside, BackendView{Known: true, Held: true, Holder: "x", Places: []string{"b", "z"}}, rename},
		"unknown":   {BackendView{}, BackendView{}, upper},
		"reserved":  {reserving(sharedView("b"), "x", "a"), reserving(sharedView("b"), "x", "z"), rename},
	} {
		if got := c.v.withIdentities(c.f); !viewsEqual(got, c.want) {
			t.Errorf("withIdentities %s: %+v, want %+v", name, got, c.want)
		}
	}
}

func TestExcluders(t *testing.T) {
	for name, c := range map[string]struct {
		v         BackendView
		identity  string
		exclusive bool
		want      []string
	}{
		"own exclusive hold":                  {exclusiveView("a"), "a", true, nil},
		"another's exclusive hold, exclusive": {exclusiveView("b"), "a", true, []string{"b"}},
		"another's exclusive hold, shared":    {exclusiveView("b"), "a", false, []string{"b"}},
		"own place among others":              {sharedView("a", "b"), "a", false, nil},
		"others' places, shared":              {sharedView("b", "c"), "a", false, nil}, // a's place missing: judged as free
		"others' places, exclusive":           {sharedView("b", "c"), "a", true, []string{"b", "c"}},
		"own place and others', exclusive":    {sharedView("a", "c"), "a", true, []string{"c"}},
		"exclusive beside places, shared":     {placesView("x", []string{"a"}), "a", false, []string{"x"}},
		"free":                                {BackendView{Known: true}, "a", true, nil},
		"unknown":                             {BackendView{}, "a", true, nil},
	} {
		if got := c.v.excluders(c.identity, c.exclusive); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

func TestRedisKeyRead(t *testing.T) {
	const now = 1_000_000
	rec := func(places int, identity string) string {
		return fmt.Sprintf("%d:999000:0a1b2c3d4e5f6071:%s", places, identity)
	}
	for name, c := range map[string]struct {
		read    redisKeyRead
		want    nodeHolding
		wantErr bool
	}{
		"free":      {redisKeyRead{typ: "none", nowMs: now}, nodeHolding{}, false},
		"exclusive": {redisKeyRead{typ: "string", value: "lockwarden/u/a", nowMs: now}, nodeHolding{exclusive: "lockwarden/u/a"}, false},
		"places, expired ones left out": {redisKeyRead{typ: "zset", nowMs: now,
			members: []redisMember{{"old", now - 1}, {"edge", now}, {"a", now + 1}, {"b", now + 5000}},
			records: map[string]string{"a": rec(3, "a"), "b": rec(2, "b"), "old": rec(3, "old")}},
			nodeHolding{places: []nodePlace{{"a", 3}, {"b", 2}}}, false},
		"a place without its record": {redisKeyRead{typ: "zset", nowMs: now, members: []redisMember{{"a", now + 1}}},
			nodeHolding{places: []nodePlace{{"a", 0}}}, false},
		"a record naming another identity": {redisKeyRead{typ: "zset", nowMs: now, members: []redisMember{{"a", now + 1}},
			records: map[string]string{"a": rec(3, "b")}},
			nodeHolding{places: []nodePlace{{"a", 0}}}, false},
		"every place expired": {redisKeyRead{typ: "zset", nowMs: now, members: []redisMember{{"a", now - 1}}}, nodeHolding{}, false},
		"not a lock":          {redisKeyRead{typ: "hash", nowMs: now}, nodeHolding{}, true},
	} {
		got, err := c.read.holding()
		if (err != nil) != c.wantErr || got.exclusive != c.want.exclusive || !slices.Equal(got.places, c.want.places) {
			t.Errorf("%s: %+v, %v; want %+v (error: %v)", name, got, err, c.want, c.wantErr)
		}
	}
	// The view of one node: one of the places, all of them listed.
	v := nodeHolding{places: []nodePlace{{"b", 3}, {"a", 3}}}.view()
	if !viewsEqual(v, sharedView("a", "b")) {
		t.Errorf("view of two places: %+v", v)
	}
}

func TestRedisPlaceLimit(t *testing.T) {
	for _, c := range []struct {
		record, identity string
		want             int
	}{
		{"3:1700000000000:0a1b:lockwarden/uid/pod", "lockwarden/uid/pod", 3},
		{"3:1700000000000:0a1b:lockwarden/uid/with:colons", "lockwarden/uid/with:colons", 3},
		{"3:1700000000000:0a1b:other", "lockwarden/uid/pod", 0},
		{"0:1700000000000:0a1b:a", "a", 0},
		{"x:1700000000000:0a1b:a", "a", 0},
		{"3:later:0a1b:a", "a", 0},
		{"3:1700000000000:nothex:a", "a", 0},
		{"3:1700000000000::a", "a", 0},
		{"1700000000000:0a1b:a", "a", 0}, // an exclusive hold's record, without the number of places
		{"", "a", 0},
	} {
		if got := redisPlaceLimit(c.record, c.identity); got != c.want {
			t.Errorf("redisPlaceLimit(%q, %q) = %d, want %d", c.record, c.identity, got, c.want)
		}
	}
}

func TestSharedQuorum(t *testing.T) {
	for _, c := range []struct{ n, places, want int }{
		{3, 1, 2}, {3, 2, 3}, {3, 3, 3}, {3, 10, 3},
		{5, 1, 3}, {5, 2, 4}, {5, 3, 4}, {5, 4, 5},
	} {
		if got := sharedQuorum(c.n, c.places); got != c.want {
			t.Errorf("sharedQuorum(%d, %d) = %d, want %d", c.n, c.places, got, c.want)
		}
		// The rule it stands for: places+1 holders on q nodes each need more places than the
		// nodes can hold, and q-1 nodes would not.
		if q := c.want; (c.places+1)*q <= c.n*c.places || (q > 1 && (c.places+1)*(q-1) > c.n*c.places) {
			t.Errorf("sharedQuorum(%d, %d) = %d is not the fewest nodes that rule out one holder too many", c.n, c.places, q)
		}
	}
}

func TestRedlockView(t *testing.T) {
	ex := func(id string) *nodeHolding { return &nodeHolding{exclusive: id} }
	pl := func(limit int, ids ...string) *nodeHolding {
		h := &nodeHolding{}
		for _, id := range ids {
			h.places = append(h.places, nodePlace{id, limit})
		}
		return h
	}
	free := &nodeHolding{}
	for name, c := range map[string]struct {
		nodes []*nodeHolding
		want  BackendView
	}{
		"free everywhere":                   {[]*nodeHolding{free, free, free}, BackendView{Known: true}},
		"exclusive on a majority":           {[]*nodeHolding{ex("a"), ex("a"), free}, exclusiveView("a")},
		"exclusive on one node":             {[]*nodeHolding{ex("a"), free, free}, BackendView{Known: true}},
		"exclusive on one, one down":        {[]*nodeHolding{ex("a"), nil, free}, BackendView{}},
		"exclusive on a majority, one down": {[]*nodeHolding{ex("a"), ex("a"), nil}, exclusiveView("a")},
		"two down":                          {[]*nodeHolding{free, nil, nil}, BackendView{}},
		// Three places on three nodes need every node.
		"places on every node": {[]*nodeHolding{pl(3, "a", "b"), pl(3, "a", "b"), pl(3, "b", "a")}, sharedView("a", "b")},
		// Released from one node only: no longer held, but no one else can have it.
		"a place on two of three":        {[]*nodeHolding{pl(3, "a", "b"), pl(3, "a", "b"), pl(3, "b")}, reserving(sharedView("b"), "a")},
		"a place on one of three":        {[]*nodeHolding{pl(3, "a"), free, free}, reserving(BackendView{Known: true}, "a")},
		"a place on two, the third down": {[]*nodeHolding{pl(3, "a"), pl(3, "a"), nil}, BackendView{}},
		// One place is a mutex: a majority holds it.
		"a place of one on a majority": {[]*nodeHolding{pl(1, "a"), pl(1, "a"), free}, sharedView("a")},
		"a place of one on one node":   {[]*nodeHolding{pl(1, "a"), free, free}, BackendView{Known: true}},
		"the highest limit decides":    {[]*nodeHolding{pl(1, "a"), pl(3, "a"), free}, reserving(BackendView{Known: true}, "a")},
		// Two places on five nodes: the quorum is four; on three nodes a place is reserved (the
		// other two holders would need eight of the seven node places left), on two it is free.
		"two places, on three of five": {[]*nodeHolding{pl(2, "a"), pl(2, "a"), pl(2, "a"), free, free}, reserving(BackendView{Known: true}, "a")},
		"two places, on two of five":   {[]*nodeHolding{pl(2, "a"), pl(2, "a"), free, free, free}, BackendView{Known: true}},
		"a node without the record":    {[]*nodeHolding{pl(1, "a"), pl(0, "a"), free}, BackendView{Known: true}},
		// A majority exclusive and places on every node cannot both be: shown as they are.
		"exclusive on a majority beside places": {[]*nodeHolding{ex("x"), ex("x"), pl(3, "a")},
			BackendView{Known: true, Held: true, Holder: "x", Reserved: []string{"a"}}},
	} {
		if got := redlockView(len(c.nodes), c.nodes); !viewsEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}

func TestEtcdPlaceKeys(t *testing.T) {
	for _, c := range []struct{ key, identity string }{
		{"lockwarden/ns/lock-0", "lockwarden/0f3c/pod-a"},
		{"a/b:c", "x:y/z"},
		{"k", "i"},
	} {
		placeKey := etcdPlacePrefix(c.key) + c.identity
		key, id, ok := etcdPlaceOf(placeKey)
		if !ok || key != c.key || id != c.identity {
			t.Errorf("etcdPlaceOf(%q) = %q, %q, %v; want %q, %q", placeKey, key, id, ok, c.key, c.identity)
		}
	}
	if got := etcdPlacePrefix("lockwarden/ns/l"); got != "lockwarden-places:15:lockwarden/ns/l/" {
		t.Errorf("etcdPlacePrefix = %q", got)
	}
	for _, k := range []string{
		"lockwarden/ns/l",                       // a lock key
		"lockwarden-hold:lockwarden/ns/l",       // a hold record
		"lockwarden-places:15:lockwarden/ns/l",  // no "/" after the key
		"lockwarden-places:15:lockwarden/ns/l/", // no identity
		"lockwarden-places:x:k/i",
		"lockwarden-places:015:lockwarden/ns/l/i",
		"lockwarden-places:99:short/i",
		"lockwarden-places:1:kk/i", // the key's length does not end at a "/"
	} {
		if key, id, ok := etcdPlaceOf(k); ok {
			t.Errorf("etcdPlaceOf(%q) = %q, %q, true; want no place", k, key, id)
		}
	}
}

func TestEtcdShadow(t *testing.T) {
	const key = "lockwarden/ns/l"
	place := func(id string) string { return etcdPlacePrefix(key) + id }
	type op struct {
		k, v    string
		deleted bool
	}
	for name, c := range map[string]struct {
		ops      []op
		limit    int
		want     BackendView
		problems int // from apply and from problems after the last op
	}{
		"exclusive":               {[]op{{key, "a", false}}, 3, exclusiveView("a"), 0},
		"renewed":                 {[]op{{key, "a", false}, {key, "a", false}}, 3, exclusiveView("a"), 0},
		"handed over":             {[]op{{key, "a", false}, {key, "", true}, {key, "b", false}}, 3, exclusiveView("b"), 0},
		"replaced with no delete": {[]op{{key, "a", false}, {key, "b", false}}, 3, exclusiveView("b"), 1},
		"places":                  {[]op{{place("a"), "t", false}, {place("b"), "t", false}}, 3, sharedView("a", "b"), 0},
		"a place leaves":          {[]op{{place("a"), "t", false}, {place("b"), "t", false}, {place("a"), "", true}}, 3, sharedView("b"), 0},
		"too many places":         {[]op{{place("a"), "", false}, {place("b"), "", false}, {place("c"), "", false}}, 2, sharedView("a", "b", "c"), 1},
		"no limit checked":        {[]op{{place("a"), "", false}, {place("b"), "", false}}, 0, sharedView("a", "b"), 0},
		"exclusive beside a place": {[]op{{place("a"), "", false}, {key, "x", false}}, 3,
			BackendView{Known: true, Held: true, Holder: "x", Places: []string{"a"}}, 1},
		"other keys ignored": {[]op{{"lockwarden/ns/l2", "z", false}, {etcdPlacePrefix("lockwarden/ns/l2") + "z", "", false}}, 3, BackendView{Known: true}, 0},
	} {
		s := newEtcdShadow(key)
		problems := 0
		for i, o := range c.ops {
			if p := s.apply(o.k, o.v, o.deleted, int64(i+1)); p != "" {
				problems++
				t.Logf("%s: %s", name, p)
			}
		}
		for _, p := range s.problems(c.limit, int64(len(c.ops))) {
			problems++
			t.Logf("%s: %s", name, p)
		}
		if got := s.view(); !viewsEqual(got, c.want) || problems != c.problems {
			t.Errorf("%s: %+v with %d problems, want %+v with %d", name, got, problems, c.want, c.problems)
		}
	}
}

func TestZooKeeperNodes(t *testing.T) {
	mtime := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).UnixMilli()
	for name, c := range map[string]struct {
		data    string
		holder  string
		until   time.Time
		forever bool
	}{
		"record":       {`{"holder":"lockwarden/u/a","ttlMillis":5000}`, "lockwarden/u/a", time.UnixMilli(mtime + 5000), false},
		"no TTL":       {`{"holder":"a"}`, "a", time.UnixMilli(mtime), false},
		"another's":    {"some client", "some client", time.Time{}, true},
		"no holder":    {`{"ttlMillis":5000}`, `{"ttlMillis":5000}`, time.Time{}, true},
		"negative TTL": {`{"holder":"a","ttlMillis":-1}`, "a", time.UnixMilli(mtime), false},
	} {
		h, until, forever := zkNodeHolder([]byte(c.data), mtime)
		if h != c.holder || !until.Equal(c.until) || forever != c.forever {
			t.Errorf("%s: %q until %s (forever %v), want %q until %s (forever %v)", name, h, until, forever, c.holder, c.until, c.forever)
		}
	}
	for _, c := range []struct {
		name, identity string
		ok             bool
	}{
		{"lockwarden%2Fu%2Fpod-a;0a1b2c3d4e5f6071", "lockwarden/u/pod-a", true},
		{"with%3Bsemicolon;00", "with;semicolon", true},
		{"plain;00", "plain", true},
		{"noseparator", "", false},
		{";00", "", false},
		{"bad%zz;00", "", false},
	} {
		id, ok := zkPlaceIdentity(c.name)
		if id != c.identity || ok != c.ok {
			t.Errorf("zkPlaceIdentity(%q) = %q, %v; want %q, %v", c.name, id, ok, c.identity, c.ok)
		}
	}
	for name, c := range map[string]struct {
		names []string
		limit int
		bad   bool
	}{
		"within":                  {[]string{"a;1", "b;2", "c;3"}, 3, false},
		"one too many":            {[]string{"a;1", "b;2", "c;3", "d;4"}, 3, true},
		"one identity, two nodes": {[]string{"a;1", "a;2", "b;3"}, 2, false},
		"names of no place count": {[]string{"a;1", "odd", "b;2"}, 2, true},
		"no limit checked":        {[]string{"a;1", "b;2"}, 0, false},
		"none":                    {nil, 1, false},
	} {
		if got := zkPlacesProblems("/lockwarden/k/places", c.names, c.limit); (len(got) > 0) != c.bad {
			t.Errorf("%s: %v, want a problem: %v", name, got, c.bad)
		}
	}
}

func TestSQLView(t *testing.T) {
	for name, c := range map[string]struct {
		rows []sqlHoldRow
		want BackendView
	}{
		"free":                                   {nil, BackendView{Known: true}},
		"exclusive":                              {[]sqlHoldRow{{"k", "a", false}}, exclusiveView("a")},
		"places":                                 {[]sqlHoldRow{{"k", "b", true}, {"k", "a", true}}, sharedView("a", "b")},
		"a live row naming nobody holds nothing": {[]sqlHoldRow{{"k", "", false}, {"k", "a", true}}, sharedView("a")},
		"exclusive beside a place": {[]sqlHoldRow{{"k", "x", false}, {"k", "a", true}},
			BackendView{Known: true, Held: true, Holder: "x", Places: []string{"a"}}},
	} {
		if got := sqlView(c.rows); !viewsEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}
