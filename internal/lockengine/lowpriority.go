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

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds back the status changes no client waits for (queue positions, the waiting
// count) and writes them in rounds: a round falls due lowPriorityDelay after the first change it
// folds, and writes its claims lowPriorityBatch at a time, one batch per pass, so that a handoff
// never waits behind more than one batch.

// lowRound is one lock's held-back low-priority changes.
type lowRound struct {
	// since is when the changes of the next round were first held back (zero: none yet).
	since time.Time
	// pending are the claims the round under way has still to write.
	pending map[types.UID]bool
}

// lowPriorityBatch bounds the low-priority claim writes of one pass: a lock with a hundred waiters
// that all moved up would otherwise hold its worker for a hundred writes, with a handoff waiting.
const lowPriorityBatch = 8

// lowPriorityNext is how soon a pass that left a round unfinished is followed by the next.
const lowPriorityNext = 20 * time.Millisecond

// decideLowPriority decides whether the pass writes low-priority changes: the lock's waiting
// count when a round starts, and a batch of the round's claims while one is under way.
func (r *Reconciler) decideLowPriority(_ context.Context, s *lockScope) error {
	var changed []types.UID
	for _, c := range s.claims {
		if before := s.read[c.UID]; !equality.Semantic.DeepEqual(before.Status, c.Status) && lowPriority(&before.Status, &c.Status) {
			changed = append(changed, c.UID)
		}
	}
	low := len(changed) > 0 || int32(len(s.waiters)) != s.readLock.Status.Waiting
	r.lowMu.Lock()
	defer r.lowMu.Unlock()
	round := r.lowRounds[s.name]
	switch {
	case round != nil && len(round.pending) > 0:
		s.lowPending = round.pending
		return nil
	case !low:
		delete(r.lowRounds, s.name)
		return nil
	case round == nil:
		round = &lowRound{}
		r.lowRounds[s.name] = round
	}
	write, wait := lowPriorityDue(round.since, s.now)
	switch {
	case write:
		round.since = time.Time{}
		round.pending = map[types.UID]bool{}
		for _, uid := range changed {
			round.pending[uid] = true
		}
		s.writeLow, s.lowPending = true, round.pending
	case round.since.IsZero():
		round.since = s.now
	}
	s.wait = soonest(s.wait, wait)
	return nil
}
