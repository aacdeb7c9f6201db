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
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lockwarden/lockwarden/internal/heartbeat"
)

// lockMemory is everything the engine keeps between passes, in one place: each store says what
// it remembers and why, and forget drops all a lock left behind once the lock is gone. The rest
// of a pass is recomputed from the API and the backends every time (STYLE: be reentrant).
type lockMemory struct {
	// passes serializes the passes of each lock across the lock queue and the refresh lane; a lock
	// is dropped with its last pass.
	passes *passLocks
	// written is the resourceVersion of this process's last write of each lock and claim, by
	// UID, which guards passes against a cache that lags it.
	written *ownWrites
	// free is the hub of pending free-key watches: the locks to wake when a contended key is let
	// go; a watch is dropped when it fires.
	free *freeWatches
	// refresh is the refresh lane, which keeps held claims' status.expireTime ahead of now; a
	// lock leaves it when its refresh pass finds nothing to refresh.
	refresh *refreshLane
	// heartbeats remembers when each heartbeat Lease was seen to change (detached claims'
	// liveness, holder_lease.go).
	heartbeats *heartbeat.Tracker
	// events thins the Normal claim events of hot locks (eventthin.go).
	events *eventThinning
	// low holds each lock's held-back low-priority status changes (lowpriority.go).
	low *lowRounds
	// lane carries new holders' Held writes out of their passes; a write leaves it when done
	// (heldlane.go).
	lane *heldLane
}

// newLockMemory makes the stores; wake queues a pass of a lock, and refresh is the refresh lane.
func newLockMemory(wake func(types.NamespacedName), refresh *refreshLane) *lockMemory {
	return &lockMemory{
		passes:     newPassLocks(),
		written:    newOwnWrites(),
		free:       newFreeWatches(wake),
		refresh:    refresh,
		heartbeats: heartbeat.NewTracker(),
		events:     newEventThinning(),
		low:        &lowRounds{rounds: map[types.NamespacedName]*lowRound{}},
		lane:       newHeldLane(),
	}
}

// forget drops what the memory keeps of lock, whose object (uid; empty when not known) is gone or
// going: its event budget, its held-back status changes and the record of this process's last
// write of it. (Pass locks, free-key watches, refresh timers and Held writes end on their own.)
func (m *lockMemory) forget(lock types.NamespacedName, uid types.UID) {
	m.events.forget(lock)
	m.low.forget(lock)
	if uid != "" {
		m.written.forget(uid)
	}
}

// lowRounds holds, per lock, its held-back low-priority status changes. The map is shared by the
// workers; each round is touched only by its own lock's pass (passLocks keeps those apart).
type lowRounds struct {
	mu     sync.Mutex
	rounds map[types.NamespacedName]*lowRound
}

// of returns lock's round, a new empty one when create is set and it has none; nil otherwise.
func (l *lowRounds) of(lock types.NamespacedName, create bool) *lowRound {
	l.mu.Lock()
	defer l.mu.Unlock()
	round := l.rounds[lock]
	if round == nil && create {
		round = &lowRound{}
		l.rounds[lock] = round
	}
	return round
}

// forget drops lock's round.
func (l *lowRounds) forget(lock types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.rounds, lock)
}
