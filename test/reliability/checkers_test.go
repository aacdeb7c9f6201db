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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Every checker is shown to pass a good history and to fail each kind of broken one: a checker
// that cannot fail proves nothing.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// goodGrants: a holds token 10 and releases; b, waiting since 50 ms, gets 11; c loses its hold.
func goodGrants() []Grant {
	return []Grant{
		{Lock: "ns/l", Claim: "a", Created: at(0), Acquired: at(10), Token: 10, End: EndRelease, EndAt: at(100), Released: at(110)},
		{Lock: "ns/l", Claim: "b", Created: at(50), Acquired: at(120), Token: 11, End: EndPodDelete, EndAt: at(200), Released: at(210)},
		{Lock: "ns/l", Claim: "c", Created: at(60), Acquired: at(220), Token: 12, Released: at(400), Lost: true},
		{Lock: "ns/m", Claim: "d", Created: at(0), Acquired: at(10), Token: 5},
	}
}

func goodWrites() map[string][]Write {
	return map[string][]Write{"ns/l": {
		{Writer: "a", Token: 10, Accepted: true, Call: at(20), Return: at(20)},
		{Writer: "b", Token: 11, Accepted: true, Call: at(130), Return: at(130)},
		{Writer: "a", Token: 10, Accepted: false, Call: at(140), Return: at(140)}, // a outlived its lease
		{Writer: "c", Token: 12, Accepted: true, Call: at(230), Return: at(230)},
	}}
}

func TestFencedRegister(t *testing.T) {
	var r FencedRegister
	for _, w := range []struct {
		writer string
		token  int64
		want   bool
	}{{"a", 5, true}, {"a", 5, true}, {"b", 6, true}, {"a", 5, false}, {"c", 7, true}, {"b", 6, false}} {
		if got := r.Write(w.writer, w.token); got != w.want {
			t.Fatalf("write(%s, %d) = %v, want %v", w.writer, w.token, got, w.want)
		}
	}
	if v := CheckRegisterLog(r.Log()); len(v) != 0 {
		t.Fatalf("a correct register's log has violations: %v", v)
	}
}

func TestCheckRegisterLogFailsOnBrokenLogs(t *testing.T) {
	for name, log := range map[string][]Write{
		"stale accepted":         {{Writer: "b", Token: 6, Accepted: true}, {Writer: "a", Token: 5, Accepted: true}},
		"token from two writers": {{Writer: "a", Token: 5, Accepted: true}, {Writer: "b", Token: 5, Accepted: true}},
		"fresh rejected":         {{Writer: "a", Token: 5, Accepted: true}, {Writer: "b", Token: 6, Accepted: false}},
	} {
		if v := CheckRegisterLog(log); len(v) == 0 {
			t.Errorf("%s: no violation reported", name)
		} else {
			t.Logf("%s: %s", name, v[0])
		}
	}
}

func TestShadowCountsStaleWritesAndInterleavings(t *testing.T) {
	var s Shadow
	s.Write("a", 5)
	s.Write("a", 5)
	s.Write("b", 6)
	s.Write("a", 5) // stale, and a's section interleaved with b's
	s.Write("b", 6) // b's section interleaved with a's
	writes, stale, overlaps := s.Counts()
	if writes != 5 || stale != 1 || overlaps != 2 {
		t.Fatalf("counts: writes %d stale %d overlaps %d, want 5 1 2", writes, stale, overlaps)
	}
	var clean Shadow
	clean.Write("a", 5)
	clean.Write("b", 6)
	clean.Write("c", 7)
	if _, stale, overlaps := clean.Counts(); stale != 0 || overlaps != 0 {
		t.Fatalf("a clean sequence counted stale %d overlaps %d", stale, overlaps)
	}
}

func TestCheckTokens(t *testing.T) {
	if v := CheckTokens(goodGrants()); len(v) != 0 {
		t.Fatalf("good grants: %v", v)
	}
	dup := goodGrants()
	dup[1].Token = 10
	regress := goodGrants()
	regress[2].Token = 9
	for name, gs := range map[string][]Grant{"duplicate": dup, "regression": regress} {
		if v := CheckTokens(gs); len(v) == 0 {
			t.Errorf("%s: no violation reported", name)
		} else {
			t.Logf("%s: %s", name, v[0])
		}
	}
}

func TestCheckExclusion(t *testing.T) {
	if v := CheckExclusion(goodGrants()); len(v) != 0 {
		t.Fatalf("good grants: %v", v)
	}
	overlap := goodGrants()
	overlap[1].Acquired = at(105) // before a was observed released at 110
	neverReleased := goodGrants()
	neverReleased[0].Released = time.Time{}
	for name, gs := range map[string][]Grant{"overlap": overlap, "never released": neverReleased} {
		if v := CheckExclusion(gs); len(v) == 0 {
			t.Errorf("%s: no violation reported", name)
		} else {
			t.Logf("%s: %s", name, v[0])
		}
	}
}

func TestLinearizability(t *testing.T) {
	ops := Operations(t0, goodGrants(), goodWrites())
	if res, err := CheckLinearizable(ops, 10*time.Second, ""); err != nil || res != porcupine.Ok {
		t.Fatalf("good history: %v, %v", res, err)
	}

	doubleGrant := goodGrants()
	// b observed Held (returned at 90) before a's release was even called (100).
	doubleGrant[1].Created, doubleGrant[1].Acquired = at(50), at(90)
	reusedToken := goodGrants()
	reusedToken[2].Token = 11
	staleAccepted := goodWrites()
	staleAccepted["ns/l"][2].Accepted = true
	freshRejected := goodWrites()
	freshRejected["ns/l"][3].Accepted = false
	unissued := goodWrites()
	unissued["ns/l"] = append(unissued["ns/l"], Write{Writer: "z", Token: 99, Accepted: true, Call: at(240), Return: at(240)})
	// z writes with c's token, the last issued: only c may.
	borrowed := goodWrites()
	borrowed["ns/l"] = append(borrowed["ns/l"], Write{Writer: "z", Token: 12, Accepted: true, Call: at(240), Return: at(240)})
	// c's hold was confirmed at 300 (status.renewTime) and seen Lost at 400: d, Held at 280,
	// overlapped it. Without the renewal the loss could have happened right after c's grant.
	lostOverlap := goodGrants()
	lostOverlap[2].LastRenew = at(300)
	lostOverlap = append(lostOverlap, Grant{Lock: "ns/l", Claim: "d", Created: at(230), Acquired: at(280), Token: 13})

	html := filepath.Join(t.TempDir(), "history.html")
	for name, c := range map[string]struct {
		grants []Grant
		writes map[string][]Write
	}{
		"double grant":            {doubleGrant, goodWrites()},
		"reused token":            {reusedToken, goodWrites()},
		"stale write accepted":    {goodGrants(), staleAccepted},
		"fresh write rejected":    {goodGrants(), freshRejected},
		"write of unissued token": {goodGrants(), unissued},
		"last token from another": {goodGrants(), borrowed},
		"lost hold overlapped":    {lostOverlap, goodWrites()},
	} {
		res, err := CheckLinearizable(Operations(t0, c.grants, c.writes), 10*time.Second, html)
		if err != nil || res != porcupine.Illegal {
			t.Errorf("%s: got %v, %v; want Illegal", name, res, err)
		}
	}
	if fi, err := os.Stat(html); err != nil || fi.Size() == 0 {
		t.Fatalf("no visualization written for an illegal history: %v", err)
	}
}

func TestLostHoldWithoutRenewalMayEndAnyTime(t *testing.T) {
	// The same overlap as "lost hold overlapped", with no renewal seen: the loss may have come
	// right after c's grant, so the history is legal.
	gs := append(goodGrants(), Grant{Lock: "ns/l", Claim: "d", Created: at(230), Acquired: at(280), Token: 13})
	if res, err := CheckLinearizable(Operations(t0, gs, goodWrites()), 10*time.Second, ""); err != nil || res != porcupine.Ok {
		t.Fatalf("got %v, %v; want Ok", res, err)
	}
}

func TestLiveness(t *testing.T) {
	l := ComputeLiveness(goodGrants())
	// a's release at 100 → b Held at 120 (b waited since 50); b's pod deleted at 200 → c at 220.
	if len(l.Handoffs) != 2 || l.Handoffs[0] != 20*time.Millisecond || l.Handoffs[1] != 20*time.Millisecond {
		t.Fatalf("handoffs: %v", l.Handoffs)
	}
	if l.Lost != 1 || len(l.Stuck) != 0 {
		t.Fatalf("lost %d stuck %v", l.Lost, l.Stuck)
	}
	if after := l.HandoffsAfter; len(after[EndRelease]) != 1 || len(after[EndPodDelete]) != 1 || len(after[EndSilentDeath]) != 0 {
		t.Fatalf("handoffs by end: %v", after)
	}
	// A hang ends with a release: its handoff counts as one; a hang that lost its hold counts
	// as a hang not held through.
	hangs := []Grant{
		{Lock: "ns/h", Claim: "a", Created: at(0), Acquired: at(10), Token: 1, End: EndHang, EndAt: at(100), Released: at(105), HeldThroughHang: true},
		{Lock: "ns/h", Claim: "b", Created: at(50), Acquired: at(130), Token: 2, End: EndHang, EndAt: at(300), Released: at(200), Lost: true},
	}
	if l := ComputeLiveness(hangs); l.Hangs != 2 || l.HeldThroughHangs != 1 || len(l.HandoffsAfter[EndRelease]) != 1 || l.HandoffsAfter[EndRelease][0] != 30*time.Millisecond {
		t.Fatalf("hangs %d held through %d, handoffs by end %v", l.Hangs, l.HeldThroughHangs, l.HandoffsAfter)
	}
	stuck := append(goodGrants(), Grant{Lock: "ns/m", Claim: "e", Created: at(20), Pending: true})
	if l := ComputeLiveness(stuck); len(l.Stuck) != 1 || l.Stuck[0] != "ns/m/e" {
		t.Fatalf("a claim still pending is not reported stuck: %v", l.Stuck)
	}
	if Percentile([]time.Duration{1, 2, 3, 4}, 50) == 0 || Percentile(nil, 99) != 0 {
		t.Fatal("Percentile")
	}
}

func TestResultPassed(t *testing.T) {
	ok := Result{Valid: true, Linearizable: "Ok"}
	if !ok.Passed() {
		t.Fatal("a clean result did not pass")
	}
	for name, r := range map[string]Result{
		"violation": {Valid: true, Linearizable: "Ok", Violations: []Finding{{Checker: "tokens", Detail: "x"}}},
		"illegal":   {Valid: true, Linearizable: "Illegal"},
		"unknown":   {Valid: true, Linearizable: "Unknown"},
		"stuck":     {Valid: true, Linearizable: "Ok", Liveness: Liveness{Stuck: []string{"x"}}},
		"invalid":   {Linearizable: "Ok"},
	} {
		if r.Passed() {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestWriteBetweenMarkers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "doc.md")
	doc := "intro\n" + BeginMarker + "\nOLD-CONTENT\n" + EndMarker + "\noutro\n"
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteBetweenMarkers(p, Table([]Result{{Scenario: "s", Backend: "b", Valid: true, Linearizable: "Ok"}})); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if strings.Contains(string(got), "OLD-CONTENT") || !strings.Contains(string(got), "| s | b |") || !strings.HasSuffix(string(got), EndMarker+"\noutro\n") {
		t.Fatalf("rewritten doc:\n%s", got)
	}
	if err := os.WriteFile(p, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if WriteBetweenMarkers(p, "x") == nil {
		t.Fatal("no error without markers")
	}
}
