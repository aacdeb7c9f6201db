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

package lockengine

import (
	"fmt"
	"strings"
	"testing"
)

// slots builds a queue or a set of holds from a compact spelling: "S" a Shared claim, "X" an
// Exclusive one, and "=n" an identity shared with the other
// entries that say "=n" (default: every entry its own identity).
func slots(spec string) ([]waiterSlot, []holdSlot) {
	var ws []waiterSlot
	var hs []holdSlot
	for i, f := range strings.Fields(spec) {
		mode := grantShared
		if f[0] == 'X' {
			mode = grantExclusive
		}
		id := fmt.Sprintf("id%d", i)
		if j := strings.IndexByte(f, '='); j >= 0 {
			id = "shared" + f[j+1:]
		}
		ws = append(ws, waiterSlot{mode: mode, identity: id})
		hs = append(hs, holdSlot{mode: mode, identity: "held-" + id})
	}
	return ws, hs
}

func TestPlanGrants(t *testing.T) {
	cases := []struct {
		name       string
		queue      string
		holds      string
		maxHolders int32
		want       int
	}{
		{"an empty queue grants nothing", "", "", 3, 0},
		{"a mutex grants its head into a free lock", "X X", "", 1, 1},
		{"a mutex grants nothing while held", "X", "X", 1, 0},
		{"an exclusive head takes an empty lock alone", "X S S", "", 3, 1},
		{"an exclusive head waits for every shared holder to leave", "X S", "S", 3, 0},
		{"the run of shared claims at the head is granted together", "S S S X S", "", 5, 3},
		{"the run stops when places run out", "S S S S", "S", 3, 2},
		{"no place left: nothing", "S", "S S S", 3, 0},
		{"nothing beside an exclusive holder", "S S", "X", 3, 0},
		{"writers are not starved: readers behind a waiting writer wait", "X S S", "S S", 5, 0},
		{"a writer stops the run ahead of it at once", "S X S", "S", 5, 1},
		{"maxHolders lowered below the holders: nothing until enough leave", "S", "S S S", 2, 0},
		{"maxHolders lowered to the holders: nothing", "S", "S S", 2, 0},
		{"maxHolders raised: the new places are granted at once", "S S S", "S S", 4, 2},
		{"claims of one identity share one place", "S=a S=a S S", "", 2, 3},
		{"zero or negative maxHolders is one place", "X X", "", 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			queue, _ := slots(tc.queue)
			_, holds := slots(tc.holds)
			if got := planGrants(queue, holds, tc.maxHolders); got != tc.want {
				t.Errorf("planGrants(%q, holds %q, maxHolders %d) = %d, want %d", tc.queue, tc.holds, tc.maxHolders, got, tc.want)
			}
		})
	}
}

// A waiting claim whose identity already holds a place does not need another.
func TestPlanGrantsIdentityOfAHolder(t *testing.T) {
	queue := []waiterSlot{{mode: grantShared, identity: "a"}, {mode: grantShared, identity: "b"}}
	holds := []holdSlot{{mode: grantShared, identity: "a"}, {mode: grantShared, identity: "c"}}
	if got := planGrants(queue, holds, 3); got != 2 {
		t.Errorf("planGrants = %d, want 2 (a rejoins its place, b takes the last)", got)
	}
	if got := planGrants(queue, holds, 2); got != 1 {
		t.Errorf("planGrants at 2 places = %d, want 1 (a rejoins its place, no place for b)", got)
	}
}

func TestEffectiveMode(t *testing.T) {
	cases := []struct {
		exclusive  bool
		maxHolders int32
		want       grantMode
	}{
		{false, 1, grantExclusive},
		{false, 0, grantExclusive},
		{true, 1, grantExclusive},
		{true, 5, grantExclusive},
		{false, 2, grantShared},
	}
	for _, tc := range cases {
		if got := effectiveMode(tc.exclusive, tc.maxHolders); got != tc.want {
			t.Errorf("effectiveMode(exclusive %t, maxHolders %d) = %d, want %d", tc.exclusive, tc.maxHolders, got, tc.want)
		}
	}
}
