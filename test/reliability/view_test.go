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

// timeline of ns/l's key: the states at the given milliseconds, observed until 1000 ms.
func timeline(states ...KeyState) KeyTimeline {
	tl := KeyTimeline{Lock: "ns/l", Key: "lockwarden/ns/l", End: at(1000)}
	for _, s := range states {
		tl.Add(s)
	}
	return tl
}

func state(ms int, holder string) KeyState { return KeyState{At: at(ms), Known: true, Holder: holder} }

func TestCheckBackendView(t *testing.T) {
	// a Held 100..500 (identity pod-a), b Held from 520 (pod-b).
	grants := []Grant{
		{Lock: "ns/l", Claim: "a", Acquired: at(100), Token: 1, Identity: "pod-a", Released: at(500)},
		{Lock: "ns/l", Claim: "b", Acquired: at(520), Token: 2, Identity: "pod-b"},
	}
	unknown := KeyState{At: at(300), Known: false}
	for name, c := range map[string]struct {
		tl      KeyTimeline
		bad     bool
		allowed int
	}{
		"clean handoff":          {timeline(state(90, "pod-a"), state(495, ""), state(515, "pod-b")), false, 0},
		"handoff before the end": {timeline(state(90, "pod-a"), state(450, "pod-b")), false, 1},
		"unknown says nothing":   {timeline(state(90, "pod-a"), unknown, state(400, "pod-a"), state(510, "pod-b")), false, 0},
		"free is not judged":     {timeline(state(90, "pod-a"), state(200, ""), state(510, "pod-b")), false, 0},
		"someone else all along": {timeline(state(0, "outside")), true, 0},
		// A wrong grant noticed at the first renewal: a ends soon, but the key was never its
		// successor's, so there is no grace.
		"outside, briefly":           {timeline(state(90, "pod-a"), state(400, "outside"), state(510, "pod-b")), true, 0},
		"b's key taken, never ended": {timeline(state(90, "pod-a"), state(495, ""), state(515, "pod-b"), state(700, "outside")), true, 0},
	} {
		v := CheckBackendView([]KeyTimeline{c.tl}, grants, 200*time.Millisecond)
		if got := len(v.Violations) > 0; got != c.bad || v.Allowed != c.allowed {
			t.Errorf("%s: violations %v, allowed %d; want a violation: %v, allowed %d", name, v.Violations, v.Allowed, c.bad, c.allowed)
		} else if got {
			t.Logf("%s: %s", name, v.Violations[0])
		}
	}
	// Polled states hold from the first read that found them to the start of the last one
	// (KeyState.Polled): a slow read that began before b was Held proves nothing about b.
	polled := func(ms int, holder string) KeyState {
		return KeyState{At: at(ms), Known: true, Holder: holder, Polled: true}
	}
	for name, c := range map[string]struct {
		tl  KeyTimeline
		bad bool
	}{
		// The read at 480 was slow: it ended after 520, when b was already Held. Stretched to the
		// next read at 800, a's state would overlap b's hold by 280 ms.
		"slow read before the handoff": {timeline(polled(90, "pod-a"), polled(300, "pod-a"), polled(480, "pod-a"), polled(800, "pod-b")), false},
		"read inside b's hold finds a": {timeline(polled(90, "pod-a"), polled(480, "pod-a"), polled(530, "pod-a"), polled(600, "pod-b")), true},
		"one read finds an outsider":   {timeline(polled(90, "pod-a"), polled(400, "outside"), polled(410, "pod-a"), polled(600, "pod-b")), true},
		"successor read before a ends": {timeline(polled(90, "pod-a"), polled(450, "pod-b"), polled(490, "pod-b")), false},
	} {
		v := CheckBackendView([]KeyTimeline{c.tl}, grants, 200*time.Millisecond)
		if got := len(v.Violations) > 0; got != c.bad {
			t.Errorf("%s: violations %v; want a violation: %v", name, v.Violations, c.bad)
		} else if got {
			t.Logf("%s: %s", name, v.Violations[0])
		}
	}
	// The record watch and the claim watch are two streams: b's Held (claim revision 20) can
	// arrive at 520 before the record that granted it (revision 19) arrives at 521. Judged by the
	// server's order, the record had changed first; a record that changed after b's Held write
	// (revision 21) is still judged from b's arrival.
	watched := func(ms int, holder string, revision int64) KeyState {
		s := state(ms, holder)
		s.Revision = revision
		return s
	}
	bRevised := []Grant{grants[0], grants[1]}
	bRevised[1].HeldRevision = 20
	for name, c := range map[string]struct {
		tl  KeyTimeline
		bad bool
	}{
		"record arrives after the claim, written before": {timeline(watched(90, "pod-a", 10), watched(521, "pod-b", 19)), false},
		"record written after the claim":                 {timeline(watched(90, "pod-a", 10), watched(521, "pod-b", 21)), true},
		"a's record stays after the claim's write":       {timeline(watched(90, "pod-a", 10), watched(510, "pod-a", 19), watched(600, "pod-b", 30)), true},
	} {
		v := CheckBackendView([]KeyTimeline{c.tl}, bRevised, 200*time.Millisecond)
		if got := len(v.Violations) > 0; got != c.bad {
			t.Errorf("%s: violations %v; want a violation: %v", name, v.Violations, c.bad)
		} else if got {
			t.Logf("%s: %s", name, v.Violations[0])
		}
	}
	// A mismatch that ends with the claim but outlasts the grace is a violation too.
	late := CheckBackendView([]KeyTimeline{timeline(state(90, "pod-a"), state(250, "pod-b"))}, grants, 200*time.Millisecond)
	if len(late.Violations) == 0 {
		t.Error("a 250 ms mismatch passed a 200 ms grace")
	}
	// Overlaps the observer saw are violations whatever the claims say.
	tl := timeline(state(0, "pod-a"))
	tl.Overlaps = []string{"x"}
	if v := CheckBackendView([]KeyTimeline{tl}, nil, time.Second); len(v.Violations) != 1 {
		t.Errorf("overlap not reported: %v", v.Violations)
	}
}

func TestCheckBackendViewWithPlaces(t *testing.T) {
	// w0 held the lock alone until 90; readers r1 (100..500) and r2 (120..510) held places;
	// writer w from 520.
	grants := []Grant{
		{Lock: "ns/l", Claim: "w0", Acquired: at(0), Token: 1, Identity: "w0", Released: at(90), Exclusive: true},
		{Lock: "ns/l", Claim: "r1", Acquired: at(100), Token: 2, Identity: "r1", Released: at(500)},
		{Lock: "ns/l", Claim: "r2", Acquired: at(120), Token: 3, Identity: "r2", Released: at(510)},
		{Lock: "ns/l", Claim: "w", Acquired: at(520), Token: 4, Identity: "w", Exclusive: true},
	}
	places := func(ms int, ids ...string) KeyState {
		return KeyState{At: at(ms), Known: true, Holder: ids[0], Places: ids}
	}
	for name, c := range map[string]struct {
		tl      KeyTimeline
		bad     bool
		allowed int
	}{
		"clean": {timeline(state(0, "w0"), state(85, ""), places(95, "r1"), places(115, "r1", "r2"), places(495, "r2"), state(505, ""), state(515, "w")), false, 0},
		// r1's place goes before its claim's end is seen, while r2 keeps its own: nothing holds
		// the key against r1 (a missing place is the phantom check's, as a free key).
		"a place released before its claim ends": {timeline(state(0, "w0"), state(85, ""), places(95, "r1", "r2"), places(450, "r2"), state(505, ""), state(515, "w")), false, 0},
		// The writer took the key just before the readers' ends were seen: its successor.
		"the writer before the readers end": {timeline(state(0, "w0"), state(85, ""), places(95, "r1", "r2"), state(480, "w")), false, 2},
		// The previous writer still held the key alone when r1 was Held: no grace.
		"a reader beside the previous writer": {timeline(state(0, "w0"), places(150, "r1", "r2"), state(505, ""), state(515, "w")), true, 0},
		// A reader's place outlived its claim into the writer's hold.
		"the writer beside a reader's place": {timeline(state(0, "w0"), state(85, ""), places(95, "r1", "r2"), places(505, "r2"), state(700, "w")), true, 0},
		// An exclusive hold beside places (a store that shows both): held against both readers.
		"an outsider beside the places": {timeline(state(0, "w0"), state(85, ""), places(95, "r1", "r2"),
			KeyState{At: at(200), Known: true, Holder: "outside", Places: []string{"r1", "r2"}}, places(250, "r1", "r2"), state(505, ""), state(515, "w")), true, 0},
	} {
		v := CheckBackendView([]KeyTimeline{c.tl}, grants, 200*time.Millisecond)
		if got := len(v.Violations) > 0; got != c.bad || v.Allowed != c.allowed {
			t.Errorf("%s: violations %v, allowed %d; want a violation: %v, allowed %d", name, v.Violations, v.Allowed, c.bad, c.allowed)
		} else if got {
			t.Logf("%s: %s", name, v.Violations[0])
		}
	}
}

func TestKeyTimelineKeepsChangesOnly(t *testing.T) {
	tl := timeline(state(0, "a"), state(10, "a"), state(20, ""), state(30, ""), KeyState{At: at(40)}, KeyState{At: at(50)}, state(60, "a"))
	if len(tl.States) != 4 {
		t.Fatalf("states %v, want 4 changes", tl.States)
	}
}

func TestKeyTimelineConfirmsPolledStates(t *testing.T) {
	read := func(ms int, holder string) KeyState {
		return KeyState{At: at(ms), Known: true, Holder: holder, Polled: true}
	}
	tl := timeline(read(0, "a"), read(10, "a"), read(20, "a"), state(30, "a"), read(40, "a"), read(50, "b"))
	want := []KeyState{
		{At: at(0), Known: true, Holder: "a", Polled: true, Confirmed: at(20)},
		{At: at(30), Known: true, Holder: "a"}, // the watch says more than the reads: kept
		{At: at(50), Known: true, Holder: "b", Polled: true, Confirmed: at(50)},
	}
	if len(tl.States) != len(want) {
		t.Fatalf("states %+v, want %+v", tl.States, want)
	}
	for i := range want {
		if g := tl.States[i]; !g.At.Equal(want[i].At) || g.Holder != want[i].Holder || g.Polled != want[i].Polled || !g.Confirmed.Equal(want[i].Confirmed) {
			t.Errorf("state %d: %+v, want %+v", i, g, want[i])
		}
	}
}

func TestCheckFinalIsFinal(t *testing.T) {
	gs := goodGrants()
	if v := CheckFinalIsFinal(gs); len(v) != 0 {
		t.Fatalf("good grants: %v", v)
	}
	gs[0].Phase, gs[0].HeldAgain, gs[0].HeldAgainToken = "Released", at(600), 10
	if v := CheckFinalIsFinal(gs); len(v) != 1 {
		t.Fatalf("a claim Held again after Released: %v", v)
	} else {
		t.Log(v[0])
	}
}

func TestClassifyWrites(t *testing.T) {
	grants := goodGrants() // a: token 10, released at 110; b: 11 from 120; c: 12 from 220
	for name, c := range map[string]struct {
		log  []Write
		want StaleWrites
	}{
		"good": {goodWrites()["ns/l"], StaleWrites{Rejected: 1}},
		"a writes after its release, before b's first write": {[]Write{
			{Writer: "a", Token: 10, Accepted: true, Call: at(20)},
			{Writer: "a", Token: 10, Accepted: true, Call: at(115)},
			{Writer: "b", Token: 11, Accepted: true, Call: at(130)},
			{Writer: "a", Token: 10, Accepted: false, Call: at(140)},
		}, StaleWrites{InWindow: 1, Rejected: 1}},
		"a write before the writer's end is not stale": {[]Write{
			{Writer: "a", Token: 10, Accepted: true, Call: at(105)},
		}, StaleWrites{}},
		"broken register": {[]Write{
			{Writer: "b", Token: 11, Accepted: true, Call: at(130)},
			{Writer: "a", Token: 10, Accepted: true, Call: at(140)},
		}, StaleWrites{AfterNewer: 1}},
		"holder refused": {[]Write{
			{Writer: "c", Token: 12, Accepted: true, Call: at(230)},
			{Writer: "b", Token: 11, Accepted: false, Call: at(100)},
		}, StaleWrites{HolderRejected: 1}},
	} {
		if got := ClassifyWrites("ns/l", grants, c.log); got != c.want {
			t.Errorf("%s: got %+v, want %+v", name, got, c.want)
		}
	}
}

func TestCheckNoResumedLapse(t *testing.T) {
	base := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	state := func(ms int, holder string) KeyState {
		return KeyState{At: at(ms), Known: true, Holder: holder, Polled: true}
	}
	unknown := func(ms int) KeyState { return KeyState{At: at(ms)} }
	g := Grant{Lock: "ns/l", Claim: "c", Token: 7, Identity: "a", Acquired: at(100)}
	ended := g
	ended.Released = at(20_000)
	deleted := g // its pod deleted at 4.5 s; the claim seen released at 16 s
	deleted.End, deleted.EndAt, deleted.Released = EndPodDelete, at(4_500), at(16_000)
	hung := g // hung from 4.5 s, then went on writing; its claim seen released at 20 s
	hung.End, hung.EndAt, hung.Released = EndHang, at(4_500), at(20_000)
	hungEnded := hung // its claim deleted, seen released 79 ms after a late renewal brought its key back at 15 s
	hungEnded.Released = at(15_079)
	disowned := g // seen Lost 300 ms after a late renewal brought its key back at 15 s
	disowned.Lost, disowned.Released = true, at(15_300)
	lostLater := g // seen Lost only 5 s after
	lostLater.Lost, lostLater.Released = true, at(20_000)
	cases := map[string]struct {
		states []KeyState
		grant  Grant
		want   string
	}{
		"held throughout":                   {states: []KeyState{state(0, ""), state(50, "a")}, grant: g},
		"lapsed and resumed":                {states: []KeyState{state(50, "a"), state(5_000, ""), state(15_000, "a")}, grant: g, want: "gone from the backend for it from"},
		"lapsed and then lost":              {states: []KeyState{state(50, "a"), state(5_000, ""), state(15_000, "b")}, grant: g},
		"a stale read in between":           {states: []KeyState{state(50, "a"), state(3_000, "z"), state(3_200, "a")}, grant: g},
		"a predecessor before it held":      {states: []KeyState{state(0, "z"), state(2_000, "a")}, grant: g},
		"unknown while it lapsed":           {states: []KeyState{state(50, "a"), unknown(5_000), state(15_000, "a")}, grant: g},
		"back for it after it ended":        {states: []KeyState{state(50, "a"), state(5_000, ""), state(25_000, "a")}, grant: ended},
		"lapsed, unknown, then back":        {states: []KeyState{state(50, "a"), state(4_000, ""), unknown(4_500), state(15_000, "a")}, grant: g, want: "from Dec  5 12:00:04.000"},
		"key taken by another then given":   {states: []KeyState{state(50, "a"), state(4_000, "b"), state(9_000, "a")}, grant: g, want: "held for it again at Dec  5 12:00:09.000"},
		"back after its holder stopped":     {states: []KeyState{state(50, "a"), state(5_000, ""), state(15_000, "a")}, grant: deleted},
		"lapsed before its holder stopped":  {states: []KeyState{state(50, "a"), state(3_000, ""), state(4_400, "a")}, grant: deleted, want: "from Dec  5 12:00:03.000"},
		"back after a hang":                 {states: []KeyState{state(50, "a"), state(5_000, ""), state(15_000, "a")}, grant: hung, want: "from Dec  5 12:00:05.000"},
		"back, and disowned (Lost) at once": {states: []KeyState{state(50, "a"), state(5_000, ""), state(15_000, "a")}, grant: disowned},
		"back, and Lost only 5 s later":     {states: []KeyState{state(50, "a"), state(5_000, ""), state(15_000, "a")}, grant: lostLater, want: "from Dec  5 12:00:05.000"},
		"back, and released at once":        {states: []KeyState{state(50, "a"), state(5_000, ""), state(15_000, "a")}, grant: hungEnded},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tl := KeyTimeline{Lock: "ns/l", Key: "k", End: at(30_000)}
			for _, s := range tc.states {
				tl.Add(s)
			}
			got := CheckNoResumedLapse([]KeyTimeline{tl}, []Grant{tc.grant}, LapseGap)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("violations %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("violations %q, want one mentioning %q", got, tc.want)
			}
		})
	}
}
