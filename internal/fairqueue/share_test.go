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

package fairqueue

import (
	"strings"
	"testing"
)

// TestShares follows the places of tenants "a" and "b" (an item's tenant is what precedes its
// '/') through takes and finishes. A take's want is "run" or "park"; a finish's is the item let
// back (released) or "".
func TestShares(t *testing.T) {
	type step struct {
		op, item, want string
	}
	take := func(item, want string) step { return step{"take", item, want} }
	finish := func(item, released string) step { return step{"finish", item, released} }
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"no bound runs everything", 0, []step{
			take("a/1", "run"), take("a/2", "run"), take("a/3", "run"), finish("a/1", ""),
		}},
		{"a tenant at its bound parks; another tenant still runs", 2, []step{
			take("a/1", "run"), take("a/2", "run"), take("a/3", "park"), take("b/1", "run"), take("b/2", "run"), take("b/3", "park"),
		}},
		{"a finish lets the oldest parked item of the same tenant back, with the place kept for it", 1, []step{
			take("a/1", "run"), take("a/2", "park"), take("a/3", "park"), take("b/1", "run"),
			finish("b/1", ""), finish("a/1", "a/2"),
			take("a/4", "park"), // the freed place is a/2's
			take("a/2", "run"), finish("a/2", "a/3"), take("a/3", "run"), finish("a/3", "a/4"), take("a/4", "run"),
			finish("a/4", ""), take("a/5", "run"),
		}},
		{"an item finished that never took a place frees nothing", 1, []step{
			take("a/1", "run"), take("a/2", "park"), finish("a/9", ""), take("a/3", "park"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newShares(func(item string) string { return strings.SplitN(item, "/", 2)[0] }, tc.max)
			for i, st := range tc.steps {
				var got string
				switch st.op {
				case "take":
					got = map[bool]string{true: "run", false: "park"}[s.take(st.item, 0)]
				case "finish":
					if p, ok := s.finish(st.item); ok {
						got = p.item
					}
				}
				if got != st.want {
					t.Fatalf("step %d, %s %s: got %q, want %q", i, st.op, st.item, got, st.want)
				}
			}
		})
	}
}

// A shutdown lets every parked item go and ends the bound.
func TestSharesRelease(t *testing.T) {
	s := newShares(func(item string) string { return item[:1] }, 1)
	s.take("a1", 0)
	s.take("a2", 3)
	s.take("a3", 0)
	if n := s.parkedCount(); n != 2 {
		t.Fatalf("parked %d, want 2", n)
	}
	released := s.release()
	if len(released) != 2 || released[0] != (parkedItem[string]{"a2", 3}) || s.parkedCount() != 0 {
		t.Fatalf("released %v, parked %d", released, s.parkedCount())
	}
	if !s.take("a4", 0) {
		t.Fatal("parked after the shutdown")
	}
}
