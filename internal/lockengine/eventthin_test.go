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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestThinEvent(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		in         eventBudget
		wantRecord bool
		want       eventBudget
	}{
		{"a full budget", eventBudget{tokens: hotEventBurst, asOf: now}, true, eventBudget{tokens: hotEventBurst - 1, asOf: now}},
		{"spent", eventBudget{tokens: 0.5, asOf: now, skipped: 2}, false, eventBudget{tokens: 0.5, asOf: now, skipped: 3}},
		{"refilled by the time passed", eventBudget{tokens: 0.5, asOf: now.Add(-hotEventGap / 2), skipped: 3}, true, eventBudget{tokens: 0, asOf: now}},
		{"refilled no higher than the burst", eventBudget{tokens: 1, asOf: now.Add(-time.Hour)}, true, eventBudget{tokens: hotEventBurst - 1, asOf: now}},
	} {
		got, record := thinEvent(tc.in, now)
		if record != tc.wantRecord || got != tc.want {
			t.Errorf("%s: (%+v, %v), want (%+v, %v)", tc.name, got, record, tc.want, tc.wantRecord)
		}
	}
}

func TestEventThinningPerLock(t *testing.T) {
	e := newEventThinning()
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	hot, other := types.NamespacedName{Namespace: "a", Name: "db"}, types.NamespacedName{Namespace: "a", Name: "queue"}
	// A quiet lock records every event: a grant and a release, twice.
	for i := range hotEventBurst {
		if record, _ := e.admit(hot, now.Add(time.Duration(i)*time.Millisecond)); !record {
			t.Fatalf("event %d of a quiet lock left out", i)
		}
	}
	// Hot: the next ones within the gap are left out, another lock's are not.
	for i := range 3 {
		if record, _ := e.admit(hot, now.Add(time.Second+time.Duration(i)*time.Millisecond)); record {
			t.Fatalf("event %d of a hot lock recorded", i)
		}
	}
	if record, _ := e.admit(other, now.Add(time.Second)); !record {
		t.Fatal("another lock's event left out")
	}
	// A gap later, one is recorded, and says how many were left out.
	record, note := e.admit(hot, now.Add(hotEventGap+2*time.Second))
	if !record || note != " (3 earlier grant and release event(s) of this lock not recorded: a busy lock records about one every 10s)" {
		t.Fatalf("after the gap: (%v, %q)", record, note)
	}
}
