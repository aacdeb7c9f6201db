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

	"k8s.io/apimachinery/pkg/types"
)

// This file holds back the status changes no client waits for and writes them in rounds: the
// lock's waiting count alone falls due waitingCountDelay after its first change; the waiters'
// changes (positions that moved into another band, a Contended wait's wording) positionsDelay
// after the first change a round folds, and are written lowPriorityBatch at a time, one batch per
// pass, so that a handoff never waits behind more than one batch.

// lowRound is one lock's held-back low-priority changes.
type lowRound struct {
	// since is when the waiters' changes of the next round were first held back (zero: none
	// yet); countSince, when the lock's waiting count was.
	since, countSince time.Time
	// pending are the claims the round under way has still to write.
	pending map[types.UID]bool
}

// lowPriorityBatch bounds the low-priority claim writes of one pass: a lock with a hundred waiters
// that all moved up would otherwise hold its worker for a hundred writes, with a handoff waiting.
const lowPriorityBatch = 8

// lowPriorityNext is how soon a pass that left a round unfinished is followed by the next.
const lowPriorityNext = 20 * time.Millisecond

// decideLowPriority decides whether the pass writes low-priority changes: the lock's waiting
// count once its change is due, and a batch of the waiters' round while one is under way.
func (r *Reconciler) decideLowPriority(_ context.Context, s *lockScope) (stepResult, error) {
	var changed []types.UID
	for _, c := range s.claims {
		if before := s.before(c.UID); !sameClaimStatus(&before.Status, &c.Status) && lowPriority(&before.Status, &c.Status) {
			changed = append(changed, c.UID)
		}
	}
	countChanged := int32(len(s.waiters)) != s.readLock.Status.Waiting
	round := r.memory.low.of(s.name, len(changed) > 0 || countChanged)
	if round == nil {
		return stepResult{}, nil
	}
	var countWake, roundWake time.Duration
	s.writeLow, countWake = foldDue(&round.countSince, countChanged, s.now, waitingCountDelay)
	res := after(countWake)
	if len(round.pending) > 0 {
		s.lowPending = round.pending
	} else if due, wake := foldDue(&round.since, len(changed) > 0, s.now, positionsDelay); due {
		round.pending = map[types.UID]bool{}
		for _, uid := range changed {
			round.pending[uid] = true
		}
		s.lowPending = round.pending
	} else {
		roundWake = wake
	}
	if round.since.IsZero() && round.countSince.IsZero() && len(round.pending) == 0 {
		r.memory.low.forget(s.name)
	}
	return res.wakeIn(roundWake), nil
}

// foldDue follows one kind of held-back change whose fold started at *since (zero: none held
// back): it says whether the fold is due now (and restarts it), starts it when dirty, drops it
// when nothing is left to write, and says how soon it falls due, for the pass to look again then.
func foldDue(since *time.Time, dirty bool, now time.Time, delay time.Duration) (bool, time.Duration) {
	if !dirty {
		*since = time.Time{}
		return false, 0
	}
	write, wait := lowPriorityDue(*since, now, delay)
	switch {
	case write:
		*since = time.Time{}
	case since.IsZero():
		*since = now
	}
	return write, wait
}
