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
	"testing"
	"time"
)

func TestNextPass(t *testing.T) {
	now := time.Unix(1000, 0)
	sec := time.Second
	cases := map[string]struct {
		due       time.Time
		tolerance time.Duration
		wantDue   time.Time
		wantWait  time.Duration
	}{
		"a full bucket (never seen) begins at once":        {time.Time{}, 0, now.Add(sec), 0},
		"a bucket full again long ago begins at once":      {now.Add(-time.Hour), 0, now.Add(sec), 0},
		"due now begins at once":                           {now, 0, now.Add(sec), 0},
		"due later waits for it, and books the next after": {now.Add(300 * time.Millisecond), 0, now.Add(1300 * time.Millisecond), 300 * time.Millisecond},
		"within the burst begins at once":                  {now.Add(2 * sec), 2 * sec, now.Add(3 * sec), 0},
		"past the burst waits for the part beyond it":      {now.Add(3 * sec), 2 * sec, now.Add(4 * sec), sec},
		"a long queue of bookings waits for all before it": {now.Add(10 * sec), 0, now.Add(11 * sec), 10 * sec},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			due, wait := nextPass(c.due, now, sec, c.tolerance)
			if !due.Equal(c.wantDue) || wait != c.wantWait {
				t.Fatalf("got due %v wait %v, want due %v wait %v", due.Sub(now), wait, c.wantDue.Sub(now), c.wantWait)
			}
		})
	}
}

// A tenant's bursts, then one pass per interval, each booked by the item that waits for it;
// another tenant's bucket is its own; an item that paid begins at once the next time.
func TestPacesBookPassesPerTenant(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPaces(func(s string) string { return s[:1] }, 4, 2) // 250 ms a pass, bursts of 2
	steps := []struct {
		item string
		at   time.Duration
		want time.Duration
	}{
		{"a1", 0, 0},
		{"a2", 0, 0},
		{"a3", 0, 250 * time.Millisecond},
		{"a4", 0, 500 * time.Millisecond},
		{"b1", 0, 0},                      // another tenant
		{"a3", 250 * time.Millisecond, 0}, // paid: its booked pass
		{"a4", 500 * time.Millisecond, 0},
		{"a5", 600 * time.Millisecond, 150 * time.Millisecond},
		{"a6", 2 * time.Second, 0}, // the bucket has refilled
		{"a7", 2 * time.Second, 0},
		{"a8", 2 * time.Second, 250 * time.Millisecond},
	}
	for i, s := range steps {
		if got := p.take(s.item, now.Add(s.at)); got != s.want {
			t.Fatalf("step %d: %s at %v waits %v, want %v", i, s.item, s.at, got, s.want)
		}
	}
	p.paidFor("a9")
	if got := p.take("a9", now.Add(2*time.Second)); got != 0 {
		t.Fatalf("an item that paid for a pass it did not begin waits %v", got)
	}
	p.forgetFull(now.Add(time.Hour))
	if len(p.due) != 0 {
		t.Fatalf("tenants with full buckets are remembered: %v", p.due)
	}
}

func TestNoPaceBoundsNothing(t *testing.T) {
	p := newPaces(func(s string) string { return s }, 0, 0)
	for range 1000 {
		if got := p.take("a", time.Unix(0, 0)); got != 0 {
			t.Fatalf("rate 0 waits %v", got)
		}
	}
	p.paidFor("a")
	if len(p.paid) != 0 || len(p.due) != 0 {
		t.Fatal("rate 0 keeps state")
	}
}
