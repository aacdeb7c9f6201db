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
	"slices"
	"strings"
	"testing"
)

// step is one operation on an order: push or touch an item ("ns/name") at a priority, or pop.
type step struct {
	op       string // "push", "touch", "pop"
	item     string
	priority int
}

func push(item string, priority int) step  { return step{"push", item, priority} }
func touch(item string, priority int) step { return step{"touch", item, priority} }

var pop = step{op: "pop"}

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
		want  []string // the items popped, in order
	}{
		{"one tenant is first in, first out",
			[]step{push("a/1", 0), push("a/2", 0), push("a/3", 0), pop, pop, pop},
			[]string{"a/1", "a/2", "a/3"}},
		{"a quiet tenant waits for one item of the busy one, not all of them",
			[]step{push("noisy/1", 0), push("noisy/2", 0), push("noisy/3", 0), push("noisy/4", 0), push("quiet/1", 0), pop, pop, pop, pop, pop},
			[]string{"noisy/1", "quiet/1", "noisy/2", "noisy/3", "noisy/4"}},
		{"three tenants take turns, each in its own order",
			[]step{push("a/1", 0), push("a/2", 0), push("b/1", 0), push("b/2", 0), push("c/1", 0), pop, pop, pop, pop, pop},
			[]string{"a/1", "b/1", "c/1", "a/2", "b/2"}},
		{"a tenant that comes back waits its turn behind those waiting",
			[]step{push("a/1", 0), push("b/1", 0), pop, push("a/2", 0), push("b/2", 0), pop, pop, pop},
			[]string{"a/1", "b/1", "a/2", "b/2"}},
		{"a higher priority comes first, whatever the turns",
			[]step{push("a/1", -100), push("b/1", -100), push("c/1", 0), push("a/2", 0), pop, pop, pop, pop},
			[]string{"c/1", "a/2", "a/1", "b/1"}},
		{"an initial-list item touched by a fresh event moves up to it",
			[]step{push("a/1", -100), push("a/2", -100), push("b/1", 0), touch("a/2", 0), pop, pop, pop},
			[]string{"b/1", "a/2", "a/1"}},
		{"a touch never lowers an item",
			[]step{push("a/1", 0), push("b/1", 0), touch("a/1", -100), pop, pop},
			[]string{"a/1", "b/1"}},
		{"a touch at the same priority keeps the item's place",
			[]step{push("a/1", 0), push("a/2", 0), touch("a/1", 0), pop, pop},
			[]string{"a/1", "a/2"}},
		{"a touch of the tenant's only item at a new level leaves no empty turn behind",
			[]step{push("a/1", -100), push("b/1", -100), touch("a/1", 5), pop, pop},
			[]string{"a/1", "b/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wanted := map[string]int{}
			o := newOrder(func(s string) string { return strings.Split(s, "/")[0] }, func(s string) (int, bool) {
				p, ok := wanted[s]
				delete(wanted, s)
				return p, ok
			})
			var got []string
			for _, s := range tc.steps {
				switch s.op {
				case "push":
					wanted[s.item] = s.priority
					o.Push(s.item)
				case "touch":
					wanted[s.item] = s.priority
					o.Touch(s.item)
				case "pop":
					item := o.Pop()
					got = append(got, item)
					o.priorityOf(item)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("popped %v, want %v", got, tc.want)
			}
			if o.Len() != 0 || len(o.levels) != 0 || len(o.priorities) != 0 || len(o.at) != 0 {
				t.Errorf("left behind: len %d, levels %v, priorities %v, at %v", o.Len(), o.levels, o.priorities, o.at)
			}
		})
	}
}

func TestOrderRemembersThePriorityItWasHandedOutAt(t *testing.T) {
	o := newOrder(func(s string) string { return s }, func(s string) (int, bool) {
		if s == "low" {
			return -100, true
		}
		return 0, false
	})
	o.Push("low")
	o.Push("plain")
	if item := o.Pop(); item != "plain" || o.priorityOf(item) != 0 {
		t.Errorf("first %q", item)
	}
	if item := o.Pop(); item != "low" || o.priorityOf(item) != -100 {
		t.Errorf("second %q", item)
	}
	if len(o.given) != 0 {
		t.Errorf("given %v after both were asked for", o.given)
	}
}
