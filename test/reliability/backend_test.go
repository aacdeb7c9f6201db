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

const (
	testMargin = time.Second
	testGrace  = 2 * time.Second
)

// sample is claim a (token 10, identity pod-a) Held at ms, expiring 5 s after t0, with the
// backend showing view.
func sample(ms int, view BackendView) HeldSample {
	return HeldSample{At: at(ms), Lock: "ns/l", Claim: "a", Token: 10, Identity: "pod-a", ExpireTime: at(5000), Backend: view}
}

var (
	heldByA = BackendView{Known: true, Held: true, Holder: "pod-a"}
	heldByB = BackendView{Known: true, Held: true, Holder: "pod-b"}
	free    = BackendView{Known: true}
	unknown = BackendView{}
	// reservedForA is a Redlock key whose release of pod-a's place reached some nodes only:
	// pod-a no longer holds it there, but nobody else can have it.
	reservedForA = BackendView{Known: true, Held: true, Holder: "pod-b", Places: []string{"pod-b"}, Reserved: []string{"pod-a"}}
	reservedForB = BackendView{Known: true, Reserved: []string{"pod-b"}}
)

func TestCheckBackendSamples(t *testing.T) {
	for name, c := range map[string]struct {
		samples []HeldSample
		bad     bool
	}{
		"always held":                       {[]HeldSample{sample(0, heldByA), sample(1000, heldByA), sample(2000, heldByA)}, false},
		"brief gap while releasing":         {[]HeldSample{sample(0, heldByA), sample(100, free), sample(300, free), sample(400, heldByA)}, false},
		"free only near expiry":             {[]HeldSample{sample(3000, heldByA), sample(4100, free), sample(4500, free), sample(4900, free)}, false},
		"backend unreadable":                {[]HeldSample{sample(0, unknown), sample(3000, unknown)}, false},
		"gap broken by a match":             {[]HeldSample{sample(0, free), sample(1500, heldByA), sample(2500, free)}, false},
		"free for longer than grace":        {[]HeldSample{sample(0, heldByA), sample(500, free), sample(1500, free), sample(2600, free)}, true},
		"held by another longer than grace": {[]HeldSample{sample(0, heldByB), sample(1000, unknown), sample(2000, heldByB)}, true},
		"place reserved, release retried":   {[]HeldSample{sample(0, heldByA), sample(500, reservedForA), sample(1500, reservedForA), sample(2600, reservedForA)}, false},
		"another's place reserved":          {[]HeldSample{sample(0, reservedForB), sample(1500, reservedForB), sample(2600, reservedForB)}, true},
	} {
		v := CheckBackendSamples(c.samples, testMargin, testGrace)
		if got := len(v) > 0; got != c.bad {
			t.Errorf("%s: violations %v, want a violation: %v", name, v, c.bad)
		} else if got {
			t.Logf("%s: %s", name, v[0])
		}
	}
}

func TestCheckControllerExclusion(t *testing.T) {
	a := ClaimState{Lock: "ns/l", Claim: "a", Held: true, Token: 10, Identity: "pod-a", ExpireTime: at(5000)}
	b := ClaimState{Lock: "ns/l", Claim: "b", Held: true, Token: 11, Identity: "pod-b", ExpireTime: at(6000)}
	expiring := a
	expiring.ExpireTime = at(1500)
	shared := b
	shared.Identity = "pod-a"
	otherLock := b
	otherLock.Lock = "ns/m"
	waiting := b
	waiting.Held = false
	for name, c := range map[string]struct {
		claims []ClaimState
		bad    bool
	}{
		"one holder":              {[]ClaimState{a, waiting}, false},
		"two locks":               {[]ClaimState{a, otherLock}, false},
		"one identity, shared":    {[]ClaimState{a, shared}, false},
		"old holder expiring":     {[]ClaimState{expiring, b}, false},
		"two holders, both valid": {[]ClaimState{a, b}, true},
	} {
		v := CheckControllerExclusion([]Snapshot{{At: at(1000), Claims: c.claims}, {At: at(1200), Claims: c.claims}}, testMargin, onePlace)
		if got := len(v) > 0; got != c.bad {
			t.Errorf("%s: violations %v, want a violation: %v", name, v, c.bad)
		} else if got {
			if len(v) != 1 {
				t.Errorf("%s: one pair reported %d times", name, len(v))
			}
			t.Logf("%s: %s", name, v[0])
		}
	}
}

func TestCheckOrphans(t *testing.T) {
	heldBy := map[string][]string{"lockwarden/ns/l": {"pod-a"}}
	if v := CheckOrphans([]BackendKey{{Key: "lockwarden/ns/l", Holder: "pod-a"}}, heldBy); len(v) != 0 {
		t.Fatalf("a key held for a Held claim reported orphaned: %v", v)
	}
	for name, keys := range map[string][]BackendKey{
		"no claim":         {{Key: "lockwarden/ns/m", Holder: "pod-x"}},
		"another identity": {{Key: "lockwarden/ns/l", Holder: "pod-b"}},
		// A key held in places is one hold per place (heldKeys): each must be a Held claim's.
		"a place of no claim": heldKeys("lockwarden/ns/l", sharedView("pod-a", "pod-c")),
	} {
		if v := CheckOrphans(keys, heldBy); len(v) != 1 {
			t.Errorf("%s: %v, want one orphan", name, v)
		} else {
			t.Logf("%s: %s", name, v[0])
		}
	}
}

func TestCheckTokensAbove(t *testing.T) {
	gs := goodGrants() // tokens 10, 11, 12 on ns/l, acquired at 10, 120, 220 ms
	if v := CheckTokensAbove(gs, "ns/l", at(100), 10); len(v) != 0 {
		t.Fatalf("grants above the floor reported: %v", v)
	}
	if v := CheckTokensAbove(gs, "ns/l", at(500), 100); len(v) != 0 {
		t.Fatalf("grants before the re-creation reported: %v", v)
	}
	v := CheckTokensAbove(gs, "ns/l", at(100), 11)
	if len(v) != 1 {
		t.Fatalf("token 11 after a re-creation whose predecessor issued 11: %v, want one violation", v)
	}
	t.Log(v[0])
}

func TestResultRequirements(t *testing.T) {
	base := Result{Valid: true, Linearizable: "Ok"}
	noFencing := base
	noFencing.FencingRequired = true
	lost := base
	lost.NoLossRequired, lost.Lost = true, 1
	orphan := base
	orphan.Orphans = []string{"k"}
	noPlace := base
	noPlace.PlacesRequired = true
	for name, r := range map[string]Result{"fencing required, none rejected": noFencing, "loss forbidden, one lost": lost, "orphan": orphan,
		"places, none seen on the backend": noPlace} {
		if r.Passed() {
			t.Errorf("%s: passed", name)
		}
	}
	fenced := noFencing
	fenced.Rejected = 3
	if !fenced.Passed() {
		t.Fatalf("a run that rejected stale writes failed: %v", fenced.Unmet())
	}
	placed := noPlace
	placed.PlaceSamples = 1
	if !placed.Passed() {
		t.Fatalf("a run whose backend was seen holding a place failed: %v", placed.Unmet())
	}
}

// onePlace: every lock is a mutex.
func onePlace(string) int { return 1 }

func TestCheckControllerExclusionWithPlaces(t *testing.T) {
	held := func(claim, identity string, exclusive bool) ClaimState {
		return ClaimState{Lock: "ns/l", Claim: claim, Held: true, Identity: identity, ExpireTime: at(5000), Exclusive: exclusive}
	}
	for name, c := range map[string]struct {
		claims []ClaimState
		want   string
	}{
		"three readers on three places": {[]ClaimState{held("a", "A", false), held("b", "B", false), held("c", "C", false)}, ""},
		"four readers on three places":  {[]ClaimState{held("a", "A", false), held("b", "B", false), held("c", "C", false), held("d", "D", false)}, "4 holders Held, more than its 3 place(s)"},
		"two claims of one reader":      {[]ClaimState{held("a", "A", false), held("a2", "A", false), held("b", "B", false), held("c", "C", false)}, ""},
		"a writer beside a reader":      {[]ClaimState{held("a", "A", false), held("w", "W", true)}, "both Held"},
		"a writer alone, with its twin": {[]ClaimState{held("w", "W", true), held("w2", "W", true)}, ""},
	} {
		v := CheckControllerExclusion([]Snapshot{{At: at(1000), Claims: c.claims}}, testMargin, func(string) int { return 3 })
		switch {
		case c.want == "" && len(v) > 0:
			t.Errorf("%s: violations %v, want none", name, v)
		case c.want != "" && (len(v) != 1 || !strings.Contains(v[0], c.want)):
			t.Errorf("%s: violations %v, want one with %q", name, v, c.want)
		}
	}
}
