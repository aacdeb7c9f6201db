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
)

func TestCheckReentries(t *testing.T) {
	outer := Grant{Claim: "a", Token: 7, Acquired: at(100), Released: at(900)}
	ended := Grant{Claim: "e", Token: 8, Acquired: at(100), Released: at(200)}
	grants := []Grant{outer, ended, {Claim: "never"}}
	re := func(of string, created, acquired int, token int64) Grant {
		g := Grant{Claim: of + "-re", Reenters: of, Created: at(created), Token: token}
		if acquired > 0 {
			g.Acquired = at(acquired)
		}
		return g
	}
	gaveUp := func(g Grant, ms int) Grant { g.GaveUp = at(ms); return g }
	for name, c := range map[string]struct {
		r      Grant
		want   string // "" for none
		joined int
	}{
		"joined at once with the outer token": {re("a", 200, 210, 7), "", 1},
		"gave up after its outer hold ended":  {gaveUp(re("e", 150, 0, 0), 700), "", 0},
		"with another token":                  {re("a", 200, 210, 9), "Held with token 9, its outer claim a with token 7", 0},
		"queued while its own pod held":       {gaveUp(re("a", 200, 0, 0), 700), "not Held after 500ms of waiting while its outer claim a", 0},
		"Held before its outer claim":         {re("a", 50, 60, 7), "before its outer claim a", 0},
		"Held after its outer claim ended":    {re("e", 150, 300, 8), "after its outer claim e ended", 0},
		"an outer claim never Held":           {re("never", 150, 300, 8), "never seen Held", 0},
	} {
		v, joined := CheckReentries([]Grant{c.r}, grants)
		if joined != c.joined {
			t.Errorf("%s: %d joined, want %d", name, joined, c.joined)
		}
		switch {
		case c.want == "" && len(v) != 0:
			t.Errorf("%s: got %v, want none", name, v)
		case c.want != "" && (len(v) != 1 || !strings.Contains(v[0], c.want)):
			t.Errorf("%s: got %v, want one violation containing %q", name, v, c.want)
		}
	}
	holds, reentries := splitReentries(append(grants, re("a", 200, 210, 7)))
	if len(holds) != 3 || len(reentries) != 1 {
		t.Errorf("split: %d holds, %d re-entries; want 3 and 1", len(holds), len(reentries))
	}
}
