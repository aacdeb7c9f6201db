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

package proccpu

import (
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     float64
		err      string
	}{
		{name: "plain", in: "4242 (kube-apiserver) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 566 0 0 20 0 12 0 100 0 0",
			want: 18.00},
		{name: "command with spaces and parentheses", in: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 50 50 0 0 20 0 1 0 5 0 0",
			want: 1.00},
		{name: "truncated", in: "7 (x) R 1 2 3", err: "fields after the command"},
		{name: "no command", in: "7 x R", err: "no command name"},
		{name: "not a number", in: "7 (x) R 1 7 7 0 -1 0 0 0 0 0 ab 50 0 0", err: "utime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseMachineStat(t *testing.T) {
	busy, total, err := parseMachineStat("cpu  100 10 50 800 40 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8\n")
	if err != nil {
		t.Fatal(err)
	}
	// busy = user+nice+system (+irq, softirq, steal) = 160 ticks; total = 1000 ticks.
	if busy != 1.6 || total != 10 {
		t.Fatalf("busy %v total %v, want 1.6 and 10", busy, total)
	}
	if _, _, err := parseMachineStat("intr 1 2 3"); err == nil {
		t.Fatal("a /proc/stat without the cpu line must fail")
	}
}

func TestCPUBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := Snapshot{at: t0, procs: map[string]float64{"etcd": 10, "kube-apiserver": 100, "gone": 5}, busy: 100, total: 400}
	b := Snapshot{at: t0.Add(10 * time.Second), procs: map[string]float64{"etcd": 12, "kube-apiserver": 110, "new": 3}, busy: 115, total: 420}
	u := Between(a, b, 2)
	if u.Cores["etcd"] != 0.2 || u.Cores["kube-apiserver"] != 1.0 {
		t.Fatalf("cores %v", u.Cores)
	}
	if _, ok := u.Cores["gone"]; ok {
		t.Fatal("a process missing at the end must be left out")
	}
	if _, ok := u.Cores["new"]; ok {
		t.Fatal("a process missing at the start must be left out")
	}
	if u.Machine != 1.5 { // 15 of 20 core-seconds busy on 2 cores
		t.Fatalf("machine %v, want 1.5", u.Machine)
	}
	want := "machine 1.50 of 2 cores busy; kube-apiserver 1.00, etcd 0.20"
	if got := u.Cell(); got != want {
		t.Fatalf("cell %q, want %q", got, want)
	}
	if got := (Usage{}).Cell(); got != "not measured" {
		t.Fatalf("empty usage: %q", got)
	}
}
