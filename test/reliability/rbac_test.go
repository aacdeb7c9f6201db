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
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRBACRefusals(t *testing.T) {
	const user = "system:serviceaccount:lockwarden-system:lockwarden"
	log := `2026-12-05T12:00:00Z	INFO	Lock granted	{"lock": "ns/lock-0"}
2026-12-05T12:00:01Z	ERROR	Reconciler error	{"error": "distributedlocks.locks.lockwarden.io \"lock-0\" is forbidden: User \"system:serviceaccount:lockwarden-system:lockwarden\" cannot get resource \"distributedlocks\" in API group \"locks.lockwarden.io\" in the namespace \"ns\""}
E1205 12:00:02 reflector.go:200] failed to list *v1.Node: nodes is forbidden: User "system:serviceaccount:lockwarden-system:lockwarden" cannot list resource "nodes" in API group "" at the cluster scope
2026-12-05T12:00:03Z	ERROR	Reconciler error	{"error": "distributedlocks.locks.lockwarden.io \"lock-1\" is forbidden: User \"system:serviceaccount:lockwarden-system:lockwarden\" cannot get resource \"distributedlocks\" in API group \"locks.lockwarden.io\" in the namespace \"ns\""}
2026-12-05T12:00:04Z	ERROR	other	{"error": "pods is forbidden: User \"someone-else\" cannot list resource \"pods\""}
`
	got := RBACRefusals(log, user, nil)
	want := []string{`refused: cannot get resource "distributedlocks" in API group "locks.lockwarden.io"`,
		`refused: cannot list resource "nodes" in API group ""`}
	if !slices.Equal(got, want) {
		t.Fatalf("RBACRefusals = %q, want %q", got, want)
	}
	if got := RBACRefusals("2026-12-05T12:00:00Z\tINFO\tLock granted\n", user, nil); len(got) != 0 {
		t.Fatalf("a clean log: %q", got)
	}
	// An API server starting from 12:00:00.500 to 12:00:01.200 excuses the line of 12:00:01
	// (a whole second) but not those of 12:00:02.000000 (klog) or 12:00:03.
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339Nano, s); return t }
	starting := []Span{{From: at("2026-12-05T12:00:00.5Z"), To: at("2026-12-05T12:00:01.2Z")}}
	// lock-1's refusal at 12:00:03 still counts, now after the klog line's.
	if got := RBACRefusals(log, user, starting); !slices.Equal(got, []string{want[1], want[0]}) {
		t.Fatalf("with 12:00:00.5-12:00:01.2 excused: %q, want %q", got, want)
	}
	first, _, _ := strings.Cut(strings.SplitN(log, "\n", 3)[1], "\n")
	if got := RBACRefusals(first, user, starting); len(got) != 0 {
		t.Fatalf("the refusal of 12:00:01 with 12:00:00.5-12:00:01.2 excused: %q", got)
	}
}

func TestLogLineTime(t *testing.T) {
	year := time.Now().UTC().Year()
	cases := map[string]struct {
		line     string
		from, to string
		ok       bool
	}{
		"zap JSON, whole seconds": {line: `{"level":"error","ts":"2026-12-06T03:44:11Z","msg":"x"}`, from: "2026-12-06T03:44:11Z", to: "2026-12-06T03:44:12Z", ok: true},
		"zap JSON, fraction":      {line: `{"level":"error","ts":"2026-12-06T03:44:11.25Z","msg":"x"}`, from: "2026-12-06T03:44:11.25Z", to: "2026-12-06T03:44:11.25Z", ok: true},
		"zap console":             {line: "2026-12-05T12:00:01Z\tERROR\tx", from: "2026-12-05T12:00:01Z", to: "2026-12-05T12:00:02Z", ok: true},
		"klog":                    {line: "E1206 03:44:11.717575   22489 reflector.go:227] x", from: strconv.Itoa(year) + "-12-06T03:44:11.717575Z", to: strconv.Itoa(year) + "-12-06T03:44:11.717575Z", ok: true},
		"no time":                 {line: "panic: x"},
	}
	for name, tc := range cases {
		from, to, ok := logLineTime(tc.line)
		if ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", name, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		wantFrom, _ := time.Parse(time.RFC3339Nano, tc.from)
		wantTo, _ := time.Parse(time.RFC3339Nano, tc.to)
		if !from.Equal(wantFrom) || !to.Equal(wantTo) {
			t.Errorf("%s: [%s, %s], want [%s, %s]", name, from, to, wantFrom, wantTo)
		}
	}
}
