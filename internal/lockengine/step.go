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

package lockengine

import (
	"context"
	"time"
)

// lockStep is one step of a pass. It changes the pass's copies of the lock and its claims (or
// writes them, for the write steps) and returns what it asks of the pass besides: when to look
// again, and an error for the work queue to retry with backoff once the pass has written what it
// decided. Reconcile merges the steps' results; no step reads another's.
type lockStep func(context.Context, *lockScope) (stepResult, error)

// stepResult is what a step asks of the pass besides its writes.
type stepResult struct {
	// after is how soon the lock's next pass must run if no event starts it first; 0: only on an
	// event.
	after time.Duration
	// retry, when set, is returned by the pass after its writes, so that the work queue retries
	// the lock with backoff (a backend that failed a grant).
	retry error
}

// after is a result that asks for the next pass within d (none for d <= 0).
func after(d time.Duration) stepResult { return stepResult{after: max(d, 0)} }

// merge is the result of two steps: the sooner next pass (Cluster API's LowestNonZeroResult),
// and the first retry error.
func (a stepResult) merge(b stepResult) stepResult {
	out := stepResult{after: soonest(a.after, b.after), retry: a.retry}
	if out.retry == nil {
		out.retry = b.retry
	}
	return out
}

// wakeIn is a merge with a bare wake-up.
func (a stepResult) wakeIn(d time.Duration) stepResult { return a.merge(after(d)) }
