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

package kubernetes

import (
	"testing"
	"time"
)

func TestHistoryAlive(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ttl := 10 * time.Second
	cases := []struct {
		name       string
		h          history
		acquired   time.Time
		now        time.Time
		wantAlive  bool
		wantExpire time.Time
	}{
		{"renewed since the grant", history{renewed: at(20)}, at(15), at(25), true, at(30)},
		{"granted after the last renewal", history{renewed: at(20)}, at(22), at(25), true, at(32)},
		{"not renewed for a lease", history{renewed: at(20)}, at(15), at(30), false, at(30)},
		{"a long gap after the grant", history{renewed: at(60), gaps: []gap{{at(20), at(40)}}}, at(15), at(61), false, time.Time{}},
		{"a long gap before the grant", history{renewed: at(60), gaps: []gap{{at(20), at(40)}}}, at(41), at(61), true, at(70)},
		{"granted inside a gap, lived to its end", history{renewed: at(60), gaps: []gap{{at(20), at(40)}}}, at(35), at(61), true, at(70)},
		{"granted inside a gap that outlasted it", history{renewed: at(60), gaps: []gap{{at(20), at(40)}}}, at(25), at(61), false, time.Time{}},
		{"a gap shorter than its lease", history{renewed: at(60), gaps: []gap{{at(20), at(29)}}}, at(15), at(61), true, at(70)},
		{"older than the history kept", history{renewed: at(60), completeSince: at(30)}, at(15), at(61), false, time.Time{}},
	}
	for _, c := range cases {
		expire, alive := c.h.alive(c.acquired, ttl, c.now)
		if alive != c.wantAlive || (c.wantAlive && !expire.Equal(c.wantExpire)) {
			t.Errorf("%s: alive %v until %s; want %v until %s", c.name, alive, expire, c.wantAlive, c.wantExpire)
		}
	}
}

func TestHistoryRenewedAt(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	h := history{}.renewedAt(at(0))
	if len(h.gaps) != 1 || !h.gaps[0].from.IsZero() {
		t.Fatalf("a new session: %+v; want one gap from the beginning of time to its first renewal", h)
	}
	if _, alive := h.alive(at(-3), 10*time.Second, at(1)); !alive {
		t.Fatal("a hold granted 3 s before the session's first renewal was judged lapsed")
	}
	if _, alive := h.alive(at(-11), 10*time.Second, at(1)); alive {
		t.Fatal("a hold granted a lease before the session's first renewal was judged alive")
	}
	h = h.renewedAt(at(3)) // shorter than any lease: not kept
	if len(h.gaps) != 1 || !h.renewed.Equal(at(3)) {
		t.Fatalf("after a short gap: %+v", h)
	}
	h = h.renewedAt(at(23)) // a failover
	if len(h.gaps) != 2 || h.gaps[0] != (gap{at(3), at(23)}) {
		t.Fatalf("after a 20 s gap: %+v", h.gaps)
	}
	if h2 := h.renewedAt(at(20)); !h2.renewed.Equal(at(23)) {
		t.Fatalf("a renewal stamped earlier (another replica's clock) moved renewTime back: %s", h2.renewed)
	}
	// Gaps each shorter than the one before: none covers another, so the oldest must go.
	next := 100
	for i := range maxGaps + 3 {
		next += 40 - i
		h = h.renewedAt(at(next))
	}
	if len(h.gaps) != maxGaps {
		t.Fatalf("kept %d gaps, want %d", len(h.gaps), maxGaps)
	}
	// Holds older than the oldest gap kept are judged lapsed, never alive by mistake.
	if _, alive := h.alive(at(1), time.Hour, h.renewed); alive {
		t.Fatalf("a hold older than the history kept was judged alive (complete since %s)", h.completeSince)
	}
	if _, alive := h.alive(h.renewed.Add(-time.Second), time.Hour, h.renewed); !alive {
		t.Fatal("a recent hold was judged lapsed")
	}
}

func TestGapsRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 123456789, time.UTC)
	in := []gap{{t0, t0.Add(20 * time.Second)}, {t0.Add(-time.Hour), t0.Add(-time.Hour + 7*time.Second)}}
	out, err := parseGaps(formatGaps(in))
	if err != nil || len(out) != 2 || !out[0].from.Equal(in[0].from) || !out[1].to.Equal(in[1].to) {
		t.Fatalf("round trip: %v, %v", out, err)
	}
	if _, err := parseGaps("nonsense"); err == nil {
		t.Fatal("a malformed annotation was accepted")
	}
}

// TestHistoryKeepsLongHoldsAlive renews a session as the Renewer does for 30 s leases, every
// 10 s give or take, for a day: a hold granted at the start must live throughout, and the
// history must stay small.
func TestHistoryKeepsLongHoldsAlive(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	h := history{}.renewedAt(t0)
	acquired := t0.Add(time.Second)
	now := t0
	for i := range 8640 {
		// 9.9 s to 10.2 s: jitter of the work queue and the API server.
		now = now.Add(10*time.Second + time.Duration(i%4-1)*100*time.Millisecond)
		h = h.renewedAt(now)
		if _, alive := h.alive(acquired, 30*time.Second, now); !alive {
			t.Fatalf("renewal %d, %s after the grant: a 30 s hold renewed every 10 s was judged lapsed (gaps %d, complete since %s)",
				i+1, now.Sub(acquired), len(h.gaps), h.completeSince)
		}
	}
	if len(h.gaps) > 3 {
		t.Fatalf("kept %d gaps of regular renewals: %v", len(h.gaps), h.gaps)
	}
	// A gap of a lease still lapses it, however long it lived before.
	now = now.Add(31 * time.Second)
	h = h.renewedAt(now)
	if _, alive := h.alive(acquired, 30*time.Second, now); alive {
		t.Fatal("a 31 s gap did not lapse a 30 s hold")
	}
}

func TestCovers(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	g := func(from, length time.Duration) gap { return gap{t0.Add(from), t0.Add(from + length)} }
	cases := []struct {
		name         string
		newer, older gap
		want         bool
	}{
		{"equal gaps", g(100*time.Second, 10*time.Second), g(50*time.Second, 10*time.Second), true},
		{"a longer newer gap", g(100*time.Second, 20*time.Second), g(50*time.Second, 10*time.Second), true},
		{"a shorter newer gap", g(100*time.Second, 9*time.Second), g(50*time.Second, 10*time.Second), false},
		{"within the same whole second", g(100*time.Second, 10*time.Second), g(50*time.Second, 10900*time.Millisecond), true},
		{"a whole second shorter", g(100*time.Second, 9900*time.Millisecond), g(50*time.Second, 10*time.Second), false},
		{"the session's first gap, from the beginning of time", g(100*time.Second, time.Hour), gap{time.Time{}, t0}, false},
	}
	for _, c := range cases {
		if got := covers(c.newer, c.older); got != c.want {
			t.Errorf("%s: covers = %v, want %v", c.name, got, c.want)
		}
	}
}
