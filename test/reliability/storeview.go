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

// The decisions of the harness's direct readers (readers_test.go, sampler_test.go,
// observer_test.go): what a store's answer says about who holds a key, exclusively or in shared
// places. Each store's layout is restated here from its backend package's documentation, not
// borrowed from its code, so that a bug there cannot hide from the checks; the readers only
// fetch and call these.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// nodePlace is one live place of a key on one Redis node: its identity, and the number of places
// it was last taken under as the node's place record says (0 when the node has no record that
// names the identity).
type nodePlace struct {
	identity string
	limit    int
}

// nodeHolding is who holds a key on one Redis node: exclusive (the key's string value; "" when
// the key is not a string), or places.
type nodeHolding struct {
	exclusive string
	places    []nodePlace
}

// redisMember is a member of a sorted set and its score.
type redisMember struct {
	member string
	score  float64
}

// redisKeyRead is what one MULTI read of a lock key on a Redis node returned (package redisnode,
// places.go): the key's TYPE; its value when it is a string (GET); its members with their scores
// when it is a sorted set of places (ZRANGE 0 -1 WITHSCORES), each scored with the place's expiry
// in milliseconds of the node's clock; the hash of place records beside it ("lockwarden-places:"
// + key, HGETALL), identity → "<places>:<acquire ms>:<hold id>:<identity>"; and the node's clock
// (TIME) in milliseconds, read in the same transaction.
type redisKeyRead struct {
	typ     string
	value   string
	members []redisMember
	records map[string]string
	nowMs   int64
}

// redisPlacesPrefix starts the key of a lock key's hash of place records (redisnode.PlacesKeyPrefix).
const redisPlacesPrefix = "lockwarden-places:"

// holding decides who holds the key by the node's rule: a string is held by its value (the key
// exists only while its PX runs); a sorted set holds a place for each member whose score is after
// the node's clock (expired members stay until a script prunes them, and count for nobody).
// Another type is no lock of lockwarden's: an error.
func (r redisKeyRead) holding() (nodeHolding, error) {
	switch r.typ {
	case "none":
		return nodeHolding{}, nil
	case "string":
		return nodeHolding{exclusive: r.value}, nil
	case "zset":
		var h nodeHolding
		for _, m := range r.members {
			if m.score > float64(r.nowMs) {
				h.places = append(h.places, nodePlace{identity: m.member, limit: redisPlaceLimit(r.records[m.member], m.member)})
			}
		}
		return h, nil
	}
	return nodeHolding{}, fmt.Errorf("the lock key is a %s", r.typ)
}

// redisPlaceLimit reads the number of places from a place record
// "<places>:<acquire ms>:<hold id (hex)>:<identity>"; 0 when the record is missing, malformed or
// names another identity.
func redisPlaceLimit(record, identity string) int {
	parts := strings.SplitN(record, ":", 4)
	if len(parts) != 4 || parts[3] != identity || parts[2] == "" || strings.Trim(strings.ToLower(parts[2]), "0123456789abcdef") != "" {
		return 0
	}
	places, err := strconv.Atoi(parts[0])
	if _, err2 := strconv.ParseInt(parts[1], 10, 64); err != nil || err2 != nil || places < 1 {
		return 0
	}
	return places
}

// view is the node's holding as a BackendView (a single Redis server decides alone).
func (h nodeHolding) view() BackendView {
	places := make([]string, len(h.places))
	for i, p := range h.places {
		places[i] = p.identity
	}
	return placesView(h.exclusive, places)
}

// sharedQuorum is how many of n Redlock nodes must hold a place of a lock of the given number of
// places (package redlock, "Quorum"): the fewest q with (places+1)·q > n·places, so that
// places+1 holders cannot each hold a place on q nodes while no node holds more than places of
// them. For one place it is the majority.
func sharedQuorum(n, places int) int {
	return n*places/(places+1) + 1
}

// redlockView decides who holds a key over n Redlock nodes from the holdings of those that
// answered (nil for a node that did not), as the redlock backend's rule says: a key is held
// exclusively by the value that holds it on a majority of the nodes, and a place by the identity
// whose place is live on as many nodes as the quorum of the number of places it was taken under
// (the highest any of those nodes records; a node with no record makes it every node). The view
// is unknown when the nodes that did not answer could make a quorum for a hold it does not show.
// A key held exclusively on a majority shows the places that reach their quorum too (there
// should be none).
func redlockView(n int, holdings []*nodeHolding) BackendView {
	majority := n/2 + 1
	failed := 0
	votes := map[string]int{}
	limits := map[string][]int{}
	for _, h := range holdings {
		if h == nil {
			failed++
			continue
		}
		if h.exclusive != "" {
			votes[h.exclusive]++
		}
		for _, p := range h.places {
			limits[p.identity] = append(limits[p.identity], p.limit)
		}
	}
	exclusive, most := "", 0
	for _, id := range slices.Sorted(maps.Keys(votes)) {
		if votes[id] > most {
			exclusive, most = id, votes[id]
		}
	}
	undecided := false
	if most < majority {
		exclusive = ""
		undecided = most+failed >= majority
	}
	var places, reserved []string
	for _, id := range slices.Sorted(maps.Keys(limits)) {
		held := limits[id]
		quorum := placeQuorum(n, held)
		switch {
		case len(held) >= quorum:
			places = append(places, id)
		case len(held)+failed >= quorum:
			undecided = true
		case placeReserved(n, held):
			reserved = append(reserved, id)
		}
	}
	if undecided && exclusive == "" {
		return BackendView{}
	}
	v := placesView(exclusive, places)
	v.Reserved = reserved
	return v
}

// placeReserved says whether a place live on len(limits) nodes, fewer than its quorum, still
// cannot be taken by another claimant: with k places and quorum q over n nodes, k other holders
// need k·q node places, and the n·k places of the nodes less the ones this place fills leave
// too few when it fills more than k·(n−q). A release that reached only some nodes leaves such
// a place behind until it is retried; the claim stays Held meanwhile, rightly. A node with no
// record of the number of places (0) makes the place unjudgeable: not reserved.
func placeReserved(n int, limits []int) bool {
	k := 0
	for _, l := range limits {
		if l <= 0 {
			return false
		}
		k = max(k, l)
	}
	return k > 0 && len(limits) > k*(n-sharedQuorum(n, k))
}

// placeQuorum is the quorum of a place whose nodes record the given numbers of places: that of
// the highest; every node when one of them has no record (0).
func placeQuorum(n int, limits []int) int {
	most := 1
	for _, l := range limits {
		if l <= 0 {
			return n
		}
		most = max(most, l)
	}
	return sharedQuorum(n, most)
}

// etcdPlaceKeyPrefix starts the key of every shared place on etcd (etcd.PlaceKeyPrefix).
const etcdPlaceKeyPrefix = "lockwarden-places:"

// etcdPlacePrefix starts the key of each place of lock key on etcd (package etcd, places.go):
// the prefix, key's length in decimal, ":", key and "/"; the identity follows. Each place key
// lives on its holder's session lease, as an exclusive lock key does, so it exists while it holds.
func etcdPlacePrefix(key string) string {
	return etcdPlaceKeyPrefix + strconv.Itoa(len(key)) + ":" + key + "/"
}

// etcdPlaceOf splits a place key into its lock key and identity; ok is false for any other key.
// The length says where the lock key ends, whatever bytes ("/", ":") it holds.
func etcdPlaceOf(placeKey string) (key, identity string, ok bool) {
	rest, found := strings.CutPrefix(placeKey, etcdPlaceKeyPrefix)
	if !found {
		return "", "", false
	}
	digits, rest, found := strings.Cut(rest, ":")
	n, err := strconv.Atoi(digits)
	if !found || err != nil || n < 0 || strconv.Itoa(n) != digits || len(rest) < n+2 || rest[n] != '/' {
		return "", "", false
	}
	return rest[:n], rest[n+1:], true
}

// etcdShadow follows one lock key's holds on etcd from a read and the watch events after it:
// the exclusive holder (the lock key's value) and the identities of its places.
type etcdShadow struct {
	key, prefix string
	exclusive   string
	places      map[string]bool
}

// newEtcdShadow starts following key.
func newEtcdShadow(key string) *etcdShadow {
	return &etcdShadow{key: key, prefix: etcdPlacePrefix(key), places: map[string]bool{}}
}

// apply takes one put (or delete) of etcd key k with value v; keys that are neither the lock key
// nor one of its places are ignored. It returns a problem when the put replaced one exclusive
// holder's value with another's with no delete between: two holders at once.
func (s *etcdShadow) apply(k, v string, deleted bool, rev int64) string {
	switch {
	case k == s.key && deleted:
		s.exclusive = ""
	case k == s.key:
		prev := s.exclusive
		s.exclusive = v
		if prev != "" && prev != v {
			return fmt.Sprintf("etcd key %s: %q replaced by %q at revision %d without a delete (two holders at once)", s.key, prev, v, rev)
		}
	case strings.HasPrefix(k, s.prefix):
		id := strings.TrimPrefix(k, s.prefix)
		if deleted {
			delete(s.places, id)
		} else {
			s.places[id] = true
		}
	}
	return ""
}

// problems checks the key as it stands after every event of one revision: never held
// exclusively beside a place, and never more places than limit (0: not checked). The etcd
// backend's transactions exclude both, and an expired place counts until etcd deletes it.
func (s *etcdShadow) problems(limit int, rev int64) []string {
	var out []string
	if s.exclusive != "" && len(s.places) > 0 {
		out = append(out, fmt.Sprintf("etcd key %s held by %q with %d place(s) beside it at revision %d (an exclusive hold beside places)", s.key, s.exclusive, len(s.places), rev))
	}
	if limit > 0 && len(s.places) > limit {
		out = append(out, fmt.Sprintf("etcd key %s: %d places at revision %d, more than its %d", s.key, len(s.places), rev, limit))
	}
	return out
}

// view is the key as the shadow stands.
func (s *etcdShadow) view() BackendView {
	return placesView(s.exclusive, slices.Collect(maps.Keys(s.places)))
}

// zkRecord is the part of a ZooKeeper lock or place node's record the harness needs.
type zkRecord struct {
	Holder    string `json:"holder"`
	TTLMillis int64  `json:"ttlMillis"`
}

// zkNodeHolder reads a lock or place node's data: lockwarden's record names its holder, valid
// until the node's mtime (milliseconds of the server's clock) plus the record's TTL; data that is
// no such record is another client's, held by the raw data with no expiry (forever is true).
func zkNodeHolder(data []byte, mtimeMs int64) (holder string, validUntil time.Time, forever bool) {
	var rec zkRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.Holder == "" {
		return string(data), time.Time{}, true
	}
	return rec.Holder, zkValidUntil(rec, mtimeMs), false
}

// zkValidUntil is when a lock or place node's record stops holding: the node's mtime plus its
// TTL, by the ZooKeeper server's clock (the backend's rule; the record's expireTime is the
// writer's clock and informational).
func zkValidUntil(rec zkRecord, mtimeMs int64) time.Time {
	return time.UnixMilli(mtimeMs).Add(time.Duration(max(rec.TTLMillis, 0)) * time.Millisecond)
}

// zkPlacesNode is the name of the container node under a key's guard whose EPHEMERAL children
// are the key's places (zookeeper.PlacesNodeName).
const zkPlacesNode = "places"

// zkPlaceIdentity is the identity a place node's name was made from ("<escaped identity>;<random
// hex>", the identity escaped with url.PathEscape, which escapes ';'); ok is false for another
// name.
func zkPlaceIdentity(name string) (identity string, ok bool) {
	escaped, _, found := strings.Cut(name, ";")
	if !found || escaped == "" {
		return "", false
	}
	identity, err := url.PathUnescape(escaped)
	return identity, err == nil
}

// zkPlacesProblems checks a listing of a key's place nodes (one GetChildren, so one moment of the
// server's state): never more identities holding places than limit (0: not checked). The
// ZooKeeper backend admits a place only in a Multi that deletes the expired places it read and
// versions the guard against every other acquire, so not even expired places make the count
// exceed the limit.
func zkPlacesProblems(path string, names []string, limit int) []string {
	ids := map[string]bool{}
	for _, n := range names {
		if id, ok := zkPlaceIdentity(n); ok {
			ids[id] = true
		} else {
			ids[n] = true
		}
	}
	if limit > 0 && len(ids) > limit {
		return []string{fmt.Sprintf("ZooKeeper node %s lists places of %d identities, more than its %d", path, len(ids), limit)}
	}
	return nil
}

// sqlPlacesTableSuffix makes the SQL backend's places table's name from the lock table's
// (package sqlbackend, places.go).
const sqlPlacesTableSuffix = "_places"

// sqlHoldRow is one live row of the SQL backend for a key: from the places table (shared) or
// the lock table.
type sqlHoldRow struct {
	key, holder string
	shared      bool
}

// sqlView is a key's view from its live rows: the lock table's row holds it exclusively, each
// places row holds a place. The marker row a shared key keeps in the lock table names no holder
// and never lives; a live row with no holder is taken for no hold.
func sqlView(rows []sqlHoldRow) BackendView {
	var exclusive string
	var places []string
	for _, r := range rows {
		switch {
		case r.holder == "":
		case r.shared:
			places = append(places, r.holder)
		default:
			exclusive = r.holder
		}
	}
	return placesView(exclusive, places)
}
