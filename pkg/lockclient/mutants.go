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

package lockclient

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/lockwarden/lockwarden/internal/mutant"
)

// In a build with the mutants tag, the client's seams (seams.go) take the deliberate bugs that
// LOCKWARDEN_MUTANT lists. docs/reliability.md says which checker catches each.
func init() {
	if mutant.Active(mutant.IgnoreLocalDeadline) {
		seams.startExpiry = func(clk clock.Clock, _ [bounds]time.Time, expired func(b bound, due time.Time)) *expiry {
			// No bound: the hold keeps no deadline and ends only when the client hears it ended.
			return startExpiry(clk, [bounds]time.Time{}, expired)
		}
	}
}
