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

package fencing

import (
	"testing"
	"time"
)

func TestNextIsAboveSeedAndLast(t *testing.T) {
	created := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	seed := Seed(created)
	cases := []struct {
		name string
		last int64
		want int64
	}{
		{"first grant starts above the seed", 0, seed + 1},
		{"later grants count up", seed + 41, seed + 42},
		{"a token above the seed from an older scheme is still exceeded", seed + 10_000_000, seed + 10_000_001},
		{"a last token below the seed (impossible but harmless) is ignored", 7, seed + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Next(c.last, created); got != c.want {
				t.Fatalf("Next(%d) = %d, want %d", c.last, got, c.want)
			}
		})
	}
}

func TestRecreatedLockStartsAboveItsPredecessor(t *testing.T) {
	created := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	last := int64(0)
	for range 5000 { // a busy predecessor
		last = Next(last, created)
	}
	// The successor cannot be created before the predecessor is forgotten.
	recreated := SafeToForget(last)
	if first := Next(0, recreated); first <= last {
		t.Fatalf("successor's first token %d is not above predecessor's last %d", first, last)
	}
	if !SafeToForget(last).After(created) {
		t.Fatalf("SafeToForget(%d) = %v is not after creation %v", last, SafeToForget(last), created)
	}
}
