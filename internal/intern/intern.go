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

// Package intern keeps one copy of the strings that many cached objects repeat: namespaces, lock
// names, node names, condition types, reasons and messages. The manager caches every pod and
// every claim of the cluster; at 10,000 pod claims, each decoded with its own copy of the same
// few dozen strings, those copies are a measurable part of the heap.
//
// A Table is bounded: once it holds its maximum of distinct strings it returns new strings as
// they are, so a field that turns out to be unique per object costs a bounded table, not a
// leak. The Go standard library's unique package is not used: it forgets a string once no
// handle to it is left, which for strings kept only inside cached objects is at every garbage
// collection, and the copies made after it would no longer be shared.
package intern

import "sync"

// Table hands out one shared copy of each string it has seen, up to max distinct strings.
// It is safe for concurrent use: each informer calls its transform from its own goroutine.
type Table struct {
	mu      sync.Mutex
	max     int
	strings map[string]string
}

// New returns a table that keeps at most limit distinct strings.
func New(limit int) *Table {
	return &Table{max: limit, strings: make(map[string]string)}
}

// String returns the table's copy of s, keeping s as that copy if it is new and the table has
// room. The empty string is returned as it is.
func (t *Table) String(s string) string {
	if s == "" {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept, ok := t.strings[s]; ok {
		return kept
	}
	if len(t.strings) < t.max {
		t.strings[s] = s
	}
	return s
}

// Len is how many distinct strings the table keeps.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.strings)
}
