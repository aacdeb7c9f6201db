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
	"slices"
	"testing"
)

func TestRBACRefusals(t *testing.T) {
	const user = "system:serviceaccount:lockwarden-system:lockwarden"
	log := `2026-12-05T12:00:00Z	INFO	Lock granted	{"lock": "ns/lock-0"}
2026-12-05T12:00:01Z	ERROR	Reconciler error	{"error": "distributedlocks.locks.lockwarden.io \"lock-0\" is forbidden: User \"system:serviceaccount:lockwarden-system:lockwarden\" cannot get resource \"distributedlocks\" in API group \"locks.lockwarden.io\" in the namespace \"ns\""}
E1205 12:00:02 reflector.go:200] failed to list *v1.Node: nodes is forbidden: User "system:serviceaccount:lockwarden-system:lockwarden" cannot list resource "nodes" in API group "" at the cluster scope
2026-12-05T12:00:03Z	ERROR	Reconciler error	{"error": "distributedlocks.locks.lockwarden.io \"lock-1\" is forbidden: User \"system:serviceaccount:lockwarden-system:lockwarden\" cannot get resource \"distributedlocks\" in API group \"locks.lockwarden.io\" in the namespace \"ns\""}
2026-12-05T12:00:04Z	ERROR	other	{"error": "pods is forbidden: User \"someone-else\" cannot list resource \"pods\""}
`
	got := RBACRefusals(log, user)
	want := []string{`refused: cannot get resource "distributedlocks" in API group "locks.lockwarden.io"`,
		`refused: cannot list resource "nodes" in API group ""`}
	if !slices.Equal(got, want) {
		t.Fatalf("RBACRefusals = %q, want %q", got, want)
	}
	if got := RBACRefusals("2026-12-05T12:00:00Z\tINFO\tLock granted\n", user); len(got) != 0 {
		t.Fatalf("a clean log: %q", got)
	}
}
