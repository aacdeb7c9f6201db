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

// Shared places on one Redis server.
//
// # Layout
//
// A lock held in shared places keeps its usual key, which becomes a sorted set: one member per
// holder identity, scored with the place's expiry in milliseconds of the server's own clock
// (TIME, the clock that expires keys). PlacesKey(key) is a hash beside it that maps each identity
// to its place record, "<places>:<acquire ms>:<hold id>:<identity>": when the place was taken and
// which hold it is (Lease.AcquireTime and Lease.Version, as for an exclusive hold), and the number
// of places it was last taken under, which the redlock backend needs to know how many nodes a
// place must keep. After every write both keys expire (PEXPIREAT) with the place that expires
// last, and are deleted when no place is left.
//
// # Why the two kinds of hold exclude each other atomically
//
// Every decision is taken inside one Lua script, which Redis runs with no other command in
// between, and is taken on the type of the one lock key:
//   - The lock key exists while any place is live: its expiry is the latest place's. So the
//     exclusive acquire's `SET key identity NX PX ttl`, lockwarden's or any other client's, is
//     refused, and the exclusive scripts then read the key's type and report the places as
//     holders rather than fail on a sorted set.
//   - The shared acquire reads the key's type first and refuses while it is a string, that is
//     while the key is held exclusively, by lockwarden or by any client speaking SET NX.
//   - Within the sorted set, a script drops the places whose score is past (by the server's
//     clock, so that an expired place never counts) and then counts the rest against the limit.
//
// Places are taken one per identity: a reentrant acquire finds its member and extends it, whatever
// the limit is now, and keeps the place record's acquire time and hold id.

import (
	"context"
	_ "embed" // the Lua scripts
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PlacesKeyPrefix starts the key of every place-record hash: PlacesKey(key) = PlacesKeyPrefix +
// key.
const PlacesKeyPrefix = "lockwarden-places:"

var (
	// placesLib holds the helpers every place script starts with.
	//go:embed places.lua
	placesLib string
	//go:embed acquire_shared.lua
	acquireSharedBody string
	//go:embed renew_shared.lua
	renewSharedBody string
	//go:embed release_shared.lua
	releaseSharedBody string

	acquireSharedSource = placesLib + acquireSharedBody
	renewSharedSource   = placesLib + renewSharedBody
	releaseSharedSource = placesLib + releaseSharedBody
)

// PlacesKey returns the key of the hash of key's place records.
func PlacesKey(key string) string { return PlacesKeyPrefix + key }

// Place is one live place of a key, as a server reports it.
type Place struct {
	// Identity is the place's holder.
	Identity string
	// PTTL is how long the place has left on the server's clock.
	PTTL time.Duration
	// Record is the place's record, when there is one and it names Identity.
	Record Record
	// HasRecord says whether Record is set.
	HasRecord bool
	// Places is the number of places the place was last taken under; zero when unknown.
	Places int
}

// placeRecord is the value stored for a place in PlacesKey's hash.
func placeRecord(places int, rec Record) string {
	return strconv.Itoa(places) + ":" + rec.String()
}

// parsePlaceRecord reads a stored place record: the number of places and the hold record.
func parsePlaceRecord(s string) (int, Record, bool) {
	n, rest, ok := strings.Cut(s, ":")
	if !ok {
		return 0, Record{}, false
	}
	places, err := strconv.Atoi(n)
	if err != nil || places < 1 {
		return 0, Record{}, false
	}
	rec, ok := ParseRecord(rest)
	return places, rec, ok
}

// AcquireShared takes one of key's places for rec.Identity with ttl, or extends the identity's
// place. rec is the record a new place gets. It is Locked while the key is held exclusively
// (Holder and PTTL are that hold's) or while places other identities hold live places (Places
// lists them).
func (n *Node) AcquireShared(ctx context.Context, key string, ttl time.Duration, places int, rec Record) (AcquireResult, error) {
	start := time.Now()
	op := "acquire a place of " + strconv.Quote(key)
	reply, err := n.run(ctx, n.acquireShared, []string{key, PlacesKey(key)}, rec.Identity, millis(ttl), rec.String(), places).Slice()
	if err != nil {
		return AcquireResult{}, n.fail(ctx, start, op, err)
	}
	res, err := parseAcquireShared(reply)
	if err != nil {
		return AcquireResult{}, n.fail(ctx, start, op, err)
	}
	return res, nil
}

func parseAcquireShared(reply []any) (AcquireResult, error) {
	if len(reply) == 0 {
		return AcquireResult{}, fmt.Errorf("unexpected reply %v from the shared acquire script", reply)
	}
	if code, _ := reply[0].(int64); code == 3 {
		full, err := parsePlaces(reply[1:], 2)
		if err != nil || len(full) == 0 {
			return AcquireResult{}, fmt.Errorf("unexpected reply %v from the shared acquire script", reply)
		}
		return AcquireResult{Outcome: Locked, Holder: full[0].Identity, PTTL: full[0].PTTL, Places: full}, nil
	}
	res, err := parseAcquire(reply)
	if err != nil {
		return AcquireResult{}, fmt.Errorf("unexpected reply %v from the shared acquire script", reply)
	}
	return res, nil
}

// parsePlaces reads a flat list of places of width fields each: identity, remaining milliseconds
// and, when width is 3, the place record (empty for none).
func parsePlaces(flat []any, width int) ([]Place, error) {
	if len(flat)%width != 0 {
		return nil, fmt.Errorf("unexpected list of places %v", flat)
	}
	places := make([]Place, 0, len(flat)/width)
	for i := 0; i < len(flat); i += width {
		identity, ok := flat[i].(string)
		ms, ok2 := flat[i+1].(int64)
		if !ok || !ok2 || identity == "" {
			return nil, fmt.Errorf("unexpected list of places %v", flat)
		}
		p := Place{Identity: identity, PTTL: time.Duration(max(ms, 0)) * time.Millisecond}
		if width == 3 {
			s, _ := flat[i+2].(string)
			if limit, rec, ok := parsePlaceRecord(s); ok && rec.Identity == identity {
				p.Record, p.HasRecord, p.Places = rec, true, limit
			}
		}
		places = append(places, p)
	}
	return places, nil
}

// ReleaseShared frees identity's place of key, and only that place. Released when it held a live
// place; Free otherwise (the key is free, the place expired, or the key is held exclusively, which
// is left alone).
func (n *Node) ReleaseShared(ctx context.Context, key, identity string) (ReleaseResult, error) {
	start := time.Now()
	op := "release a place of " + strconv.Quote(key)
	freed, err := n.run(ctx, n.releaseShared, []string{key, PlacesKey(key)}, identity).Int64Slice()
	if err != nil {
		return ReleaseResult{}, n.fail(ctx, start, op, err)
	}
	if len(freed) != 1 {
		return ReleaseResult{}, n.fail(ctx, start, op, fmt.Errorf("unexpected reply %v from the shared release script", freed))
	}
	if freed[0] == 1 {
		return ReleaseResult{Outcome: Released}, nil
	}
	return ReleaseResult{Outcome: Free}, nil
}
