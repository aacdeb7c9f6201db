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

package etcd

import (
	"strings"
	"testing"
)

func TestSharedStep(t *testing.T) {
	for name, tc := range map[string]struct {
		exclusive bool
		holders   []string
		identity  string
		places    int
		want      step
		wantIndex int
	}{
		"free key":                       {places: 1, identity: "a", want: stepTake, wantIndex: -1},
		"a place left":                   {holders: []string{"b", "c"}, identity: "a", places: 3, want: stepTake, wantIndex: -1},
		"every place taken":              {holders: []string{"b", "c"}, identity: "a", places: 2, want: stepLocked, wantIndex: 0},
		"more holders than places":       {holders: []string{"b", "c", "d"}, identity: "a", places: 1, want: stepLocked, wantIndex: 0},
		"own place":                      {holders: []string{"a", "b"}, identity: "b", places: 2, want: stepRefresh, wantIndex: 1},
		"own place, limit lowered below": {holders: []string{"a", "b", "c"}, identity: "c", places: 1, want: stepRefresh, wantIndex: 2},
		"held exclusively":               {exclusive: true, identity: "a", places: 3, want: stepLocked, wantIndex: -1},
		// Places beside an exclusive hold can only come from an outside client writing the lock
		// key; the exclusive hold wins, as in every other call.
		"held exclusively, own place too": {exclusive: true, holders: []string{"a"}, identity: "a", places: 3, want: stepLocked, wantIndex: -1},
	} {
		t.Run(name, func(t *testing.T) {
			got, i := sharedStep(tc.exclusive, tc.holders, tc.identity, tc.places)
			if got != tc.want || i != tc.wantIndex {
				t.Errorf("sharedStep = (%d, %d), want (%d, %d)", got, i, tc.want, tc.wantIndex)
			}
		})
	}
}

// A place key belongs to one lock key only, however the keys nest: keys that contain "/" or ":",
// keys that look like a length, and keys that are prefixes of one another.
func TestPlacePrefixesNeverOverlap(t *testing.T) {
	keys := []string{
		"a", "a/", "a/b", "a/b/c", "ab", "a:b", "1:a", "2:a/", "a/1:b",
		"lockwarden/ns/db", "lockwarden/ns/db/replica", "lockwarden/ns/db/x",
		PlaceKeyPrefix + "1:a/", "",
	}
	identities := []string{"pod", "x", "b", "b/c", "1:a/pod", ""}
	for _, k1 := range keys {
		for _, k2 := range keys {
			if k1 == k2 {
				continue
			}
			for _, id := range identities {
				if pk := placeKey(k2, id); strings.HasPrefix(pk, placePrefix(k1)) {
					t.Errorf("the place of %q for %q is under the places of %q: %q", k2, id, k1, pk)
				}
			}
		}
	}
	for _, k := range keys {
		if strings.HasPrefix(placePrefix(k), HoldKeyPrefix) || strings.HasPrefix(placePrefix(k), PingKeyPrefix) {
			t.Errorf("the places of %q are under another kind of key", k)
		}
	}
}
