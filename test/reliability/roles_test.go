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
	"strings"
	"testing"
	"time"
)

// pod is an event of pod name (claim c-name) of lock ns/l at revision rev (ms after t0 too).
func pod(rev int, name, role string) PodRole {
	return PodRole{At: at(rev), Revision: int64(rev), Pod: name, Lock: "ns/l", Claim: "c-" + name, Role: role}
}

func terminating(p PodRole) PodRole { p.Terminating = true; return p }
func gone(p PodRole) PodRole        { p.Gone = true; return p }

// record is an event of lock ns/l's record naming claims, at revision rev.
func record(rev int, claims ...string) LockRecord {
	return LockRecord{At: at(rev), Revision: int64(rev), Lock: "ns/l", Holders: claims}
}

// failover is a correct failover of a mutex: a holds; its node is lost, the record hands the lock
// to b, a is labelled standby, then b holder.
func failover() ([]PodRole, []LockRecord) {
	return []PodRole{
			pod(10, "a", "standby"), pod(11, "b", "standby"),
			pod(30, "a", "holder"),
			pod(60, "a", "standby"), pod(70, "b", "holder"),
			// c is deleted gracefully while it holds: standby at once, the lock moves once it is gone.
			pod(80, "c", "standby"), pod(100, "b", "standby"), pod(101, "c", "holder"),
			terminating(pod(200, "c", "holder")), terminating(pod(210, "c", "standby")), gone(pod(3000, "c", "standby")),
		}, []LockRecord{
			record(5), record(20, "c-a"), record(50, "c-b"), record(90, "c-c"), record(3010),
		}
}

func TestCheckHolderLabels(t *testing.T) {
	mutex := func(string) int { return 1 }
	pods, _ := failover()
	if v := CheckHolderLabels(pods, mutex); len(v) != 0 {
		t.Fatalf("a correct failover: %v", v)
	}
	for name, c := range map[string]struct {
		pods   []PodRole
		places int
		want   string
	}{
		"the next labelled before the old one's label went": {[]PodRole{
			pod(10, "a", "holder"), pod(20, "b", "holder"), pod(21, "a", "standby")}, 1,
			"2 pods labelled holder at revision 20"},
		"a terminating holder still labelled beside the next": {[]PodRole{
			pod(10, "a", "holder"), terminating(pod(20, "a", "holder")), pod(30, "b", "holder")}, 1,
			"a (claim c-a), b (claim c-b)"},
		"three on a lock of two places": {[]PodRole{
			pod(10, "a", "holder"), pod(20, "b", "holder"), pod(30, "c", "holder")}, 2,
			"more than its 2 place(s): a (claim c-a), b (claim c-b), c (claim c-c)"},
	} {
		v := CheckHolderLabels(c.pods, func(string) int { return c.places })
		if len(v) != 1 || !strings.Contains(v[0], c.want) {
			t.Errorf("%s: got %v, want one violation containing %q", name, v, c.want)
			continue
		}
		t.Logf("%s: %s", name, v[0])
	}
	// Two on two places, and a deleted holder that no longer counts, are no violation; each
	// stretch over the places is reported once.
	ok := []PodRole{pod(10, "a", "holder"), pod(20, "b", "holder"), gone(pod(30, "a", "holder")), pod(40, "c", "holder")}
	if v := CheckHolderLabels(ok, func(string) int { return 2 }); len(v) != 0 {
		t.Fatalf("two places: %v", v)
	}
	long := []PodRole{pod(10, "a", "holder"), pod(20, "b", "holder"), pod(30, "c", "standby"), pod(40, "a", "standby"), pod(50, "a", "holder")}
	if v := CheckHolderLabels(long, mutex); len(v) != 2 {
		t.Fatalf("two stretches over the places: got %v", v)
	}
	// Locks are counted apart.
	other := pod(15, "x", "holder")
	other.Lock = "ns/m"
	if v := CheckHolderLabels([]PodRole{pod(10, "a", "holder"), other}, mutex); len(v) != 0 {
		t.Fatalf("one holder on each of two locks: %v", v)
	}
}

func TestCheckHolderRecord(t *testing.T) {
	const grace = 2 * time.Second
	pods, records := failover()
	if v, longest := CheckHolderRecord(pods, records, grace, at(5000)); len(v) != 0 || longest != 10*time.Millisecond {
		t.Fatalf("a correct failover: %v, longest stretch %s (want 10ms)", v, longest)
	}
	// A pod labelled holder before the record names its claim, and one still labelled after the
	// record moved on, within the grace, pass: the label follows the record by a write.
	early := []PodRole{pod(10, "a", "holder"), pod(1500, "a", "standby")}
	if v, _ := CheckHolderRecord(early, []LockRecord{record(1000, "c-a"), record(1200)}, grace, at(5000)); len(v) != 0 {
		t.Fatalf("stretches within the grace: %v", v)
	}
	// A finished pod (a gated pod's process exited) keeps its label, but takes no traffic.
	exited := []PodRole{pod(10, "a", "holder"), finished(pod(100, "a", "holder"))}
	if v, _ := CheckHolderRecord(exited, []LockRecord{record(5, "c-a"), record(110)}, grace, at(5000)); len(v) != 0 {
		t.Fatalf("a finished pod labelled holder: %v", v)
	}
	for name, c := range map[string]struct {
		pods    []PodRole
		records []LockRecord
		want    string
	}{
		"a holder whose hold ended keeps its label": {
			[]PodRole{pod(10, "a", "holder"), pod(6000, "a", "standby")}, []LockRecord{record(5, "c-a"), record(1000)},
			"pod a labelled holder while its claim c-a is not among the holders its lock's record names (), from revision 1000"},
		"a terminating holder keeps its label until it is gone": {
			[]PodRole{pod(10, "a", "holder"), terminating(pod(100, "a", "holder")), gone(pod(2200, "a", "holder"))}, []LockRecord{record(5, "c-a")},
			"pod a labelled holder while terminating, from revision 100"},
		"a pod labelled holder whose claim never held": {
			[]PodRole{pod(10, "a", "holder")}, []LockRecord{record(5, "c-b")},
			"still at the end"},
		"the record names another claim of the pod's name": {
			[]PodRole{pod(10, "a", "holder")}, []LockRecord{record(5, "c-a-old")},
			"its claim c-a is not among"},
	} {
		v, _ := CheckHolderRecord(c.pods, c.records, grace, at(5000))
		if len(v) != 1 || !strings.Contains(v[0], c.want) {
			t.Errorf("%s: got %v, want one violation containing %q", name, v, c.want)
			continue
		}
		t.Logf("%s: %s", name, v[0])
	}
	// Events are merged by revision, not arrival: a record written before the pod's label but
	// delivered after it is no stretch at all.
	late := record(5, "c-a")
	late.At = at(4000)
	if v, _ := CheckHolderRecord([]PodRole{pod(10, "a", "holder")}, []LockRecord{late}, grace, at(4500)); len(v) != 0 {
		t.Fatalf("a record delivered late: %v", v)
	}
	if n := HolderLabelled(pods); n != 3 {
		t.Fatalf("HolderLabelled = %d, want 3 (a, b, c)", n)
	}
}

func TestResultRequiresAHolderLabelSeen(t *testing.T) {
	r := Result{Valid: true, Linearizable: "Ok", HolderLabelsRequired: true, HolderLabelled: 3}
	if !r.Passed() {
		t.Fatalf("a standby run that saw holders did not pass: %v", r.Unmet())
	}
	r.HolderLabelled = 0
	if r.Passed() || len(r.Unmet()) != 1 || !strings.Contains(r.Unmet()[0], "no pod was seen labelled holder") {
		t.Fatalf("a standby run that saw no holder: passed %v, unmet %v", r.Passed(), r.Unmet())
	}
}
