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

func TestCheckPlaces(t *testing.T) {
	// hold builds a grant of lock ns/l held from..to (ms; to 0: still held).
	hold := func(claim string, from, to int, exclusive bool) Grant {
		g := Grant{Lock: "ns/l", Claim: claim, Acquired: at(from), Token: int64(from), Exclusive: exclusive}
		if to > 0 {
			g.Released = at(to)
		}
		return g
	}
	cases := []struct {
		name   string
		places int
		grants []Grant
		want   string // a substring of the first violation; "" for none
	}{
		{"three readers on three places", 3, []Grant{hold("a", 10, 100, false), hold("b", 20, 90, false), hold("c", 30, 0, false)}, ""},
		{"a fourth reader on three places", 3, []Grant{hold("a", 10, 100, false), hold("b", 20, 90, false), hold("c", 30, 0, false), hold("d", 40, 50, false)},
			"4 claims observed Held"},
		{"a reader after one left", 3, []Grant{hold("a", 10, 35, false), hold("b", 20, 90, false), hold("c", 30, 0, false), hold("d", 40, 50, false)}, ""},
		{"a writer after every reader left", 3, []Grant{hold("a", 10, 50, false), hold("b", 20, 60, false), hold("w", 60, 90, true), hold("c", 90, 0, false)}, ""},
		{"a writer beside a reader", 3, []Grant{hold("a", 10, 50, false), hold("w", 40, 90, true)}, "w (token 40, Exclusive) observed Held"},
		{"a reader beside a writer", 3, []Grant{hold("w", 10, 50, true), hold("a", 40, 90, false)}, "beside w"},
		{"a mutex's overlap", 1, []Grant{hold("a", 10, 50, false), hold("b", 40, 90, false)}, "more than its 1 place"},
		{"a mutex's handoff", 1, []Grant{hold("a", 10, 50, false), hold("b", 50, 90, false)}, ""},
		{"never released, then another", 1, []Grant{hold("a", 10, 0, false), hold("b", 50, 90, false)}, "2 claims observed Held"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckPlaces(tc.grants, func(string) int { return tc.places })
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("violations %v, want none", got)
			case tc.want != "" && (len(got) == 0 || !strings.Contains(got[0], tc.want)):
				t.Errorf("violations %v, want one with %q", got, tc.want)
			}
		})
	}
}
