//go:build mutants

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

package mutant

import (
	"os"
	"slices"
	"strings"
	"sync"
)

// EnvVar lists the active bugs, comma-separated.
const EnvVar = "LOCKWARDEN_MUTANT"

var active = sync.OnceValue(func() []Name {
	var out []Name
	for _, s := range strings.Split(os.Getenv(EnvVar), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, Name(s))
		}
	}
	return out
})

// Active says whether bug n is listed in LOCKWARDEN_MUTANT.
func Active(n Name) bool { return slices.Contains(active(), n) }

// Unknown returns the names in LOCKWARDEN_MUTANT that name no bug, so that a typo fails the
// manager's start instead of running a harmless build that every checker passes.
func Unknown() []Name {
	var out []Name
	for _, n := range active() {
		if !slices.Contains(All, n) {
			out = append(out, n)
		}
	}
	return out
}
