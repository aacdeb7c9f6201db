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

func gatedPod(rev int, name string) PodRole { p := pod(rev, name, ""); p.Gated = true; return p }
func finished(p PodRole) PodRole            { p.Finished = true; return p }

func TestCheckGates(t *testing.T) {
	// The revisions at which claims were seen Lost, by case.
	lostAt := map[string]map[string]int64{
		"a holder whose claim was seen Lost no longer counts (fencing covers it)": {"c-a": 15},
		"a claim marked Lost only after the next gate was lifted still counts":    {"c-a": 35},
	}
	for name, c := range map[string]struct {
		pods     []PodRole
		places   int
		want     string // "" for no violation
		admitted int
	}{
		"one after another: exit, deletion, graceful deletion": {[]PodRole{
			gatedPod(1, "a"), gatedPod(2, "b"), gatedPod(3, "c"), gatedPod(4, "d"),
			pod(10, "a", "holder"), finished(pod(20, "a", "holder")),
			pod(21, "b", "holder"), gone(pod(30, "b", "holder")),
			pod(31, "c", "holder"), terminating(pod(40, "c", "standby")), gone(pod(50, "c", "standby")),
			pod(51, "d", "holder")}, 1, "", 4},
		"a pod never gated (standby) is no admission": {[]PodRole{
			pod(1, "s", "holder"), gatedPod(2, "a"), pod(3, "a", "holder")}, 1, "", 1},
		"two on a lock of two places": {[]PodRole{
			gatedPod(1, "a"), gatedPod(2, "b"), pod(3, "a", "holder"), pod(4, "b", "holder")}, 2, "", 2},
		"the next gate lifted before the holder's pod finished": {[]PodRole{
			gatedPod(1, "a"), gatedPod(2, "b"), pod(10, "a", "holder"), pod(20, "b", "holder"), finished(pod(21, "a", "holder"))}, 1,
			"2 pods admitted (gate lifted, not finished) at revision 20", 2},
		"a terminating pod still runs": {[]PodRole{
			gatedPod(1, "a"), gatedPod(2, "b"), pod(10, "a", "holder"), terminating(pod(20, "a", "standby")), pod(30, "b", "holder")}, 1,
			"a (claim c-a), b (claim c-b)", 2},
		"a holder whose claim was seen Lost no longer counts (fencing covers it)": {[]PodRole{
			gatedPod(1, "a"), gatedPod(2, "b"), pod(10, "a", "holder"), pod(20, "a", "standby"), pod(30, "b", "holder")}, 1, "", 2},
		"a claim marked Lost only after the next gate was lifted still counts": {[]PodRole{
			gatedPod(1, "a"), gatedPod(2, "c"), pod(10, "a", "holder"), pod(30, "c", "holder"), pod(40, "a", "standby")}, 1,
			"2 pods admitted (gate lifted, not finished) at revision 30", 2},
		"three on a lock of two places": {[]PodRole{
			gatedPod(1, "a"), gatedPod(2, "b"), gatedPod(3, "c"), pod(10, "a", ""), pod(20, "b", ""), pod(30, "c", "")}, 2,
			"more than its 2 place(s)", 3},
	} {
		v, admitted := CheckGates(c.pods, func(string) int { return c.places }, lostAt[name])
		if admitted != c.admitted {
			t.Errorf("%s: %d admitted, want %d", name, admitted, c.admitted)
		}
		switch {
		case c.want == "" && len(v) != 0:
			t.Errorf("%s: got %v, want none", name, v)
		case c.want != "" && (len(v) != 1 || !strings.Contains(v[0], c.want)):
			t.Errorf("%s: got %v, want one violation containing %q", name, v, c.want)
		}
	}
}

func TestCheckAdmissions(t *testing.T) {
	grants := []Grant{{Claim: "c-a", Token: 7, Acquired: at(10)}, {Claim: "c-b", Token: 8}}
	for name, c := range map[string]struct {
		a    Admission
		want string
	}{
		"the token its claim was Held with": {Admission{Pod: "a", Claim: "c-a", Token: 7, At: at(11)}, ""},
		"no token":                          {Admission{Pod: "a", Claim: "c-a", At: at(11)}, "without a fencing token"},
		"another hold's token":              {Admission{Pod: "a", Claim: "c-a", Token: 6, At: at(11)}, "Held with token 7"},
		"a claim never Held":                {Admission{Pod: "b", Claim: "c-b", Token: 7, At: at(11)}, "never seen Held"},
		"a claim never seen":                {Admission{Pod: "x", Claim: "c-x", Token: 7, At: at(11)}, "never seen Held"},
	} {
		v := CheckAdmissions([]Admission{c.a}, grants)
		switch {
		case c.want == "" && len(v) != 0:
			t.Errorf("%s: got %v, want none", name, v)
		case c.want != "" && (len(v) != 1 || !strings.Contains(v[0], c.want)):
			t.Errorf("%s: got %v, want one violation containing %q", name, v, c.want)
		}
	}
}
