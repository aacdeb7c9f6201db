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
	"slices"
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

// delayGrants: on lock l, a is released (claim deleted) and b granted at once; b's pod dies and
// c is granted 3 s later; c is Lost and d granted 3.5 s later; d's pod succeeded and e is
// granted at once. Times are the controller's (acquireTime, releaseTime).
func delayGrants() []Grant {
	return []Grant{
		{Lock: "ns/l", Claim: "a", Token: 1, AcquireTime: at(0), End: EndRelease},
		{Lock: "ns/l", Claim: "b", Token: 2, AcquireTime: at(100), ReleaseTime: at(1000), Phase: "Released", Reason: "HolderTerminated", Message: "Released: pod b no longer exists"},
		{Lock: "ns/l", Claim: "c", Token: 3, AcquireTime: at(4000), ReleaseTime: at(6000), Phase: "Lost", Reason: "RenewFailed", Lost: true},
		{Lock: "ns/l", Claim: "d", Token: 4, AcquireTime: at(9500), ReleaseTime: at(11000), Phase: "Released", Reason: "HolderTerminated", Message: "Released: pod d succeeded"},
		{Lock: "ns/l", Claim: "e", Token: 5, AcquireTime: at(11000)},
		// Another lock: its silent death is followed by a grant on its own clock of events.
		{Lock: "ns/m", Claim: "f", Token: 1, AcquireTime: at(0), ReleaseTime: at(500), Phase: "Released", Reason: "HolderTerminated", Message: "Released: pod f failed"},
		{Lock: "ns/m", Claim: "g", Token: 2, AcquireTime: at(3500)},
		{Lock: "ns/m", Claim: "h", Created: at(100), Pending: true},
	}
}

func TestEndedWithoutRelease(t *testing.T) {
	for _, c := range []struct {
		g    Grant
		want bool
	}{
		{Grant{Lost: true, Phase: "Lost", Reason: "RenewFailed"}, true},
		{Grant{Phase: "Released", Reason: "HolderTerminated", Message: "Released: pod x failed"}, true},
		{Grant{Phase: "Released", Reason: "HolderTerminated", Message: "Released: pod x no longer exists"}, true},
		{Grant{Phase: "Released", Reason: "HolderTerminated", Message: "Released: pod x was replaced (UID 2, held for 1)"}, true},
		{Grant{Phase: "Released", Reason: "HolderTerminated", Message: "Released: pod x succeeded"}, false},
		{Grant{Phase: "Released", Reason: "ClaimDeleted"}, false},
		{Grant{End: EndRelease}, false}, // deleted while held: no status written
		{Grant{Phase: "Failed", Reason: "LockNotFound"}, false},
	} {
		if got := EndedWithoutRelease(c.g); got != c.want {
			t.Errorf("%s/%s %q lost %v: got %v, want %v", c.g.Phase, c.g.Reason, c.g.Message, c.g.Lost, got, c.want)
		}
	}
}

func TestCheckLockDelay(t *testing.T) {
	const delay = 3 * time.Second
	good := CheckLockDelay(delayGrants(), delay)
	if len(good.Violations) != 0 || good.Checked != 3 {
		t.Fatalf("good grants: checked %d (want 3: after b, c and f), violations %v", good.Checked, good.Violations)
	}
	// Without a delay the same history passes whatever the gaps.
	if v := CheckLockDelay(delayGrants(), 0); len(v.Violations) != 0 {
		t.Fatalf("no delay: %v", v.Violations)
	}

	afterDeath := delayGrants()
	afterDeath[2].AcquireTime = at(3999) // 2.999 s after b's pod was found gone
	afterLoss := delayGrants()
	afterLoss[3].AcquireTime = at(6000) // in the very pass that found c Lost
	otherLock := delayGrants()
	otherLock[6].AcquireTime = at(1000)
	for name, c := range map[string]struct {
		grants []Grant
		want   string
	}{
		"grant 2.999 s after a pod died":                  {afterDeath, "lock ns/l: c (token 3) granted at"},
		"grant in the pass of a loss":                     {afterLoss, "0s after c (token 3) ended without a release"},
		"grant soon after a silent death on another lock": {otherLock, "lock ns/m: g (token 2)"},
	} {
		v := CheckLockDelay(c.grants, delay)
		if len(v.Violations) != 1 || !strings.Contains(v.Violations[0], c.want) {
			t.Errorf("%s: got %v, want one violation containing %q", name, v.Violations, c.want)
			continue
		}
		t.Logf("%s: %s", name, v.Violations[0])
	}
	// A history with no end that asks for a delay proves nothing: Checked says so.
	released := []Grant{
		{Lock: "ns/l", Claim: "a", Token: 1, AcquireTime: at(0), End: EndRelease},
		{Lock: "ns/l", Claim: "b", Token: 2, AcquireTime: at(10)},
	}
	if v := CheckLockDelay(released, delay); v.Checked != 0 || len(v.Violations) != 0 {
		t.Fatalf("releases only: checked %d, violations %v", v.Checked, v.Violations)
	}
}

// evictGrants: c was Lost and its pod evicted (condition) 1 s later; x was Lost and its pod seen
// deleting 2 s later (the condition write did not land); the others were not lost.
func evictGrants() []Grant {
	gs := goodGrants()
	gs[2].Evicted = at(1400)
	return append(gs, Grant{Lock: "ns/m", Claim: "x", Acquired: at(20), Token: 6, Released: at(500), Lost: true, Phase: "Lost", PodGone: at(2500)})
}

func TestCheckEvicted(t *testing.T) {
	if v := CheckEvicted(evictGrants(), 15*time.Second); len(v) != 0 {
		t.Fatalf("good grants: %v", v)
	}
	never := evictGrants()
	never[2].Evicted = time.Time{}
	late := evictGrants()
	late[4].PodGone = at(500 + 15001)
	notLost := evictGrants()
	notLost[1].Evicted = at(300)
	for name, c := range map[string]struct {
		grants []Grant
		want   string
	}{
		"a lost holder never evicted":     {never, "claim c (token 12) was seen Lost at"},
		"a lost holder evicted too late":  {late, "evicted only 15.001s later (bound 15s)"},
		"a holder evicted without a loss": {notLost, "claim b was not lost"},
	} {
		v := CheckEvicted(c.grants, 15*time.Second)
		if len(v) != 1 || !strings.Contains(v[0], c.want) {
			t.Errorf("%s: got %v, want one violation containing %q", name, v, c.want)
			continue
		}
		t.Logf("%s: %s", name, v[0])
	}
}

func TestResultRequiresTheDelayAndAnEvictionExercised(t *testing.T) {
	base := Result{Valid: true, Linearizable: "Ok", LockDelayRequired: true, EvictionRequired: true, DelayedGrants: 2, Lost: 1}
	if !base.Passed() {
		t.Fatalf("a run that exercised both did not pass: %v", base.Unmet())
	}
	noDelay, noLoss := base, base
	noDelay.DelayedGrants = 0
	noLoss.Lost = 0
	for name, r := range map[string]Result{"no delayed grant": noDelay, "no loss": noLoss} {
		if r.Passed() {
			t.Errorf("%s: passed", name)
		} else {
			t.Logf("%s: %v", name, r.Unmet())
		}
	}
	failed := base
	failed.Violations = []Finding{{Checker: "lock-delay", Detail: "x"}, {Checker: "evicted", Detail: "y"}}
	if failed.Passed() || !slices.Equal(failed.Caught(), []string{"evicted", "lock-delay"}) {
		t.Fatalf("findings of the new checkers: passed %v, caught %v", failed.Passed(), failed.Caught())
	}
}

func TestLongestHoldAndItsRequirement(t *testing.T) {
	grants := []Grant{
		{Lock: "ns/l", Claim: "a", Acquired: at(0), Released: at(250_000)},
		{Lock: "ns/l", Claim: "b", Acquired: at(0), Released: at(400_000), Lost: true}, // lost: not kept alive
		{Lock: "ns/l", Claim: "c", Acquired: at(260_000)},                              // never released
		{Lock: "ns/m", Claim: "d", Acquired: at(10_000), Released: at(30_000)},
	}
	if got := LongestHold(grants); got != 250*time.Second {
		t.Fatalf("LongestHold = %s, want 250s", got)
	}
	long := Result{Valid: true, Linearizable: "Ok", LongHoldRequired: 200 * time.Second, LongestHold: 250 * time.Second}
	if !long.Passed() {
		t.Fatalf("a run with a 250 s hold did not meet 200 s: %v", long.Unmet())
	}
	short := long
	short.LongestHold = 199 * time.Second
	if short.Passed() || len(short.Unmet()) != 1 || !strings.Contains(short.Unmet()[0], "no hold lasted 3m20s") {
		t.Fatalf("a run whose longest hold was 199 s: passed %v, unmet %v", short.Passed(), short.Unmet())
	}
}

func TestResultFailsWhenAFaultDidNotHappen(t *testing.T) {
	r := Result{Valid: true, Linearizable: "Ok", FaultsSkipped: []string{"leader-deposed did not happen: no grant within the fault's time"}}
	if r.Passed() {
		t.Fatal("a run whose fault never fired passed")
	}
	if u := r.Unmet(); len(u) != 1 || !strings.Contains(u[0], "leader-deposed did not happen") {
		t.Fatalf("unmet = %v", u)
	}
}

func TestResultRequiresACommandCutOff(t *testing.T) {
	cut := Result{Valid: true, Linearizable: "Ok", CommandsRequired: true, CommandCutOffRequired: true, Commands: 4, CommandsCutOff: 1}
	if !cut.Passed() {
		t.Fatalf("a mute run that cut a command off did not pass: %v", cut.Unmet())
	}
	none := cut
	none.CommandsCutOff = 0
	if none.Passed() || !strings.Contains(strings.Join(none.Unmet(), "; "), "no command was running when its holder was cut off") {
		t.Fatalf("a mute run that cut nothing off: passed %v, unmet %v", none.Passed(), none.Unmet())
	}
}
