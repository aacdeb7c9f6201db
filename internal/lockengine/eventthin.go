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
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Events are API writes too: two Normal events a handoff (Released, Acquired) would make a
// graceful handoff of three writes one of five. On a hot lock the Normal events are thinned: each
// lock has a budget of hotEventBurst of them, refilled by one every hotEventGap, and the next one
// recorded after some were left out says how many. A lock handed over now and then keeps all of
// its events. Warnings (Lost, Failed, TimedOut, a claim that cannot proceed) are always recorded.

const (
	// hotEventBurst is how many Normal claim events a quiet lock may record at once (two
	// handoffs' worth).
	hotEventBurst = 4
	// hotEventGap is how often a lock's budget of Normal claim events grows by one.
	hotEventGap = 10 * time.Second
)

// eventThinning is, per lock, its budget of Normal claim events and how many were left out.
type eventThinning struct {
	mu    sync.Mutex
	locks map[types.NamespacedName]*eventBudget
}

// eventBudget is one lock's budget of Normal claim events, as of when it was last counted.
type eventBudget struct {
	tokens  float64
	asOf    time.Time
	skipped int
}

func newEventThinning() *eventThinning {
	return &eventThinning{locks: map[types.NamespacedName]*eventBudget{}}
}

// admit says whether a Normal event of lock at now is recorded, and the note to add to its
// message (how many were left out since the last one recorded).
func (e *eventThinning) admit(lock types.NamespacedName, now time.Time) (bool, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.locks[lock]
	if b == nil {
		b = &eventBudget{tokens: hotEventBurst, asOf: now}
		e.locks[lock] = b
	}
	next, record := thinEvent(*b, now)
	note := ""
	if record && b.skipped > 0 {
		note = fmt.Sprintf(" (%d earlier grant and release event(s) of this lock not recorded: a busy lock records about one every %s)", b.skipped, hotEventGap)
	}
	*b = next
	return record, note
}

// forget drops what is remembered of a lock that is gone.
func (e *eventThinning) forget(lock types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.locks, lock)
}

// thinEvent decides whether a lock's Normal event at now is recorded, from its budget b, and
// returns the budget after it: refilled by one every hotEventGap since b.asOf, up to
// hotEventBurst; one spent when recorded, one more counted as left out when not.
func thinEvent(b eventBudget, now time.Time) (eventBudget, bool) {
	if elapsed := now.Sub(b.asOf); elapsed > 0 {
		b.tokens = min(hotEventBurst, b.tokens+elapsed.Seconds()/hotEventGap.Seconds())
	}
	b.asOf = now
	if b.tokens < 1 {
		b.skipped++
		return b, false
	}
	b.tokens--
	b.skipped = 0
	return b, true
}
