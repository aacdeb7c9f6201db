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
)

// seams are the points where the reliability harness's deliberate bugs (internal/mutant) enter the
// client: a decision a Hold takes through this table instead of directly. A lockctl built with
// the mutants tag swaps in broken ones (mutants.go) for the bugs LOCKWARDEN_MUTANT names; every
// other build keeps these.
var seams = struct {
	// startExpiry arms a hold's local deadline: startExpiry.
	startExpiry func(clk clock.Clock, first [bounds]time.Time, expired func(b bound, due time.Time)) *expiry
}{
	startExpiry: startExpiry,
}
