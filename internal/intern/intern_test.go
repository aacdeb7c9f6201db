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

package intern

import (
	"strings"
	"testing"
	"unsafe"
)

// fresh returns a copy of s in memory of its own, as a decoder would make it.
func fresh(s string) string { return strings.Clone(s) }

func sameMemory(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestStringSharesOneCopy(t *testing.T) {
	table := New(10)
	first := fresh("locks-system")
	second := fresh("locks-system")
	if sameMemory(first, second) {
		t.Fatal("the test's two copies share memory: it would prove nothing")
	}
	got1, got2 := table.String(first), table.String(second)
	if got1 != "locks-system" || got2 != "locks-system" {
		t.Fatalf("values changed: %q, %q", got1, got2)
	}
	if !sameMemory(got1, first) || !sameMemory(got2, first) {
		t.Error("the second copy is not replaced by the first")
	}
}

func TestStringIsBounded(t *testing.T) {
	table := New(2)
	for _, s := range []string{"a", "b", "c", "d"} {
		table.String(fresh(s))
	}
	if table.Len() != 2 {
		t.Fatalf("table keeps %d strings, want its maximum 2", table.Len())
	}
	// A string met after the table filled comes back as it is, and equal.
	c := fresh("c")
	if got := table.String(c); got != "c" || !sameMemory(got, c) {
		t.Errorf("a string past the maximum: got %q (same memory %v), want it unchanged", got, sameMemory(got, c))
	}
	// Strings kept before it filled are still shared.
	if got := table.String(fresh("a")); got != "a" {
		t.Errorf("got %q, want a", got)
	}
}

func TestEmptyStringIsNotKept(t *testing.T) {
	table := New(1)
	if got := table.String(""); got != "" {
		t.Fatalf("got %q", got)
	}
	if table.Len() != 0 {
		t.Error("the empty string took the table's one place")
	}
}
