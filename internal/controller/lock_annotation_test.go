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

package controller

import (
	"strings"
	"testing"
)

func TestParseLockAnnotation(t *testing.T) {
	cases := map[string]struct {
		value, label, problem string
	}{
		"one lock":                         {"db", "db", ""},
		"one lock with dots":               {"db.prod", "db.prod", ""},
		"one name that is not a lock name": {"Not_A_Lock", "", "is not a DistributedLock name: a lowercase RFC 1123 subdomain"},
		"empty":                            {"", "", "is not a DistributedLock name: "},
		"two locks, in name order":         {"staging,prod", "prod,staging", ""},
		"spaces around the commas":         {"b , a", "a,b", ""},
		"a bad name in a list":             {"a,B", "", `lists "B", which is not a DistributedLock name (name one lock, or 2 to 8 separated by commas): `},
		"an empty name in a list":          {"a,", "", `lists "", which is not a DistributedLock name`},
		"a lock twice":                     {"a,b,a", "", `names "a" twice`},
		"eight":                            {"a,b,c,d,e,f,g,h", "a,b,c,d,e,f,g,h", ""},
		"nine":                             {"a,b,c,d,e,f,g,h,i", "", "names 9 locks: at most 8 are held together"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			label, problem := parseLockAnnotation(c.value)
			if label != c.label {
				t.Fatalf("label %q, want %q", label, c.label)
			}
			if (c.problem == "") != (problem == "") || !strings.HasPrefix(problem, c.problem) {
				t.Fatalf("problem %q, want one that begins %q", problem, c.problem)
			}
		})
	}
}
