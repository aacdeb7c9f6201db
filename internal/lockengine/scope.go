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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/heartbeat"
	"github.com/lockwarden/lockwarden/internal/identity"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// This file is the scope of a pass (what it read, decided and will write) and the questions the
// steps ask of it (whose identity, which record entry, which hold, how the queue looks to the
// grant rules). load.go fills it.

// lockScope is one pass of a lock: what it read, what it decided, and what it will write. The
// three parts are embedded, so that steps name their fields directly; each field says which part
// it belongs to and who sets it.
type lockScope struct {
	// name names the lock.
	name types.NamespacedName
	// now is the time of the pass, read once by readLock.
	now time.Time

	passRead
	passDecided
	passWrites
}

// passRead is what a pass read (load): from the cache, the backend resolver and the key ledger.
// Nothing in it changes after load.
type passRead struct {
	// readLock is the lock as read: the base of the status write and its precondition; nil when
	// the lock does not exist.
	readLock *locksv1alpha1.DistributedLock
	// read holds each claim as read, by UID, as this lock's pass sees it (several.go's claimView:
	// a several-lock claim's part on this lock, with the whole claim): the base of its first
	// status patch (later ones are based on what the pass wrote: claimWrites).
	read map[types.UID]claimView
	// vanished are, by UID, the claims of s.claims that the lock record names and the cache no
	// longer has (vanished.go): judged like deleted claims, never written.
	vanished map[types.UID]bool
	// world is what the pass read of the claims' holders (holder_*.go).
	world holderWorld
	// partLocks are the other locks of the held several-lock claims whose home is this lock, by
	// name (loadPartLocks); nil for one that does not exist.
	partLocks map[string]*locksv1alpha1.DistributedLock
	// use is the lock's backend and key, as the pass resolved them.
	use backendUse
}

// holderWorld is what a pass read of its claims' holders, from the cache.
type holderWorld struct {
	// pods are the holder pods of pod claims that exist, by name.
	pods map[string]*corev1.Pod
	// nodes are the Nodes of the pods of claims that hold, by name, read only when the lock sets
	// holderNodeLossSeconds; nil for a Node that does not exist.
	nodes map[string]*corev1.Node
	// heartbeats are the verdicts on the heartbeat Leases that claims name, by Lease name.
	heartbeats map[string]heartbeat.Verdict
	// objects are the holder workload objects that claims name, by objectHolder.key.
	objects map[string]heldObject
}

// backendUse is the lock's use of its backend, as the pass resolved it (readBackend) and the key
// ledger judged it (takeKey).
type backendUse struct {
	// session is the lock's backend session; nil when it cannot be used now.
	session backends.Backend
	// name names the lock's LockBackend.
	name string
	// store is the identity of the store the LockBackend reaches (registry.StoreOf): the key
	// ledger's key, shared by every LockBackend of the store.
	store string
	// unusable says why the backend cannot be used now; nil when it can.
	unusable *registry.UnusableError
	// conflict says which lock took this lock's backend key first; nil when this lock owns it.
	// The lock then grants nothing (holds it already has go on until they end).
	conflict *registry.UnusableError
	// keyTaken says the key passed to this lock in this pass: it grants in the next one.
	keyTaken bool
	// key is the lock's backend key and ttl its lease duration.
	key string
	ttl time.Duration
	// keyPolicy is how the backend names its locks' keys (the other locks' of a several-lock
	// claim too: they are all on this backend).
	keyPolicy locksv1alpha1.KeyPolicy
}

// passDecided is what the steps decided, in the order they run.
type passDecided struct {
	// settled are, by UID, the waiting claims whose record entry settleParts dealt with (a joint
	// grant that stopped half way left it), which endHolds leaves out; true: the entry is set
	// aside, kept as it is, unrenewed, unless another claim holds it; false: it is given back.
	settled map[types.UID]bool
	// holders are the claims that share the recorded hold once the pass has decided (endHolds,
	// then serveQueue's grants and joins).
	holders []*locksv1alpha1.LockClaim
	// queue are the claims that wait in the queue, in queue order (queueClaims); line are those
	// of them the pass may grant one by one, and ready the several-lock claim first in line with
	// the lock free for it, which only a joint grant takes (nil: none).
	queue, line []*queued
	ready       *queued
	// waiters are the claims still queued once the grants are made, in queue order (serveQueue).
	waiters []*locksv1alpha1.LockClaim
	// grants are the claims the pass granted the lock to, in queue order, with their backend
	// holds (tryGrant); writeLock records them, else Reconcile gives the holds back.
	grants []grant
	// writeLow says whether the lock's low-priority status (the waiting count) is written in
	// this pass, which starts a round of low-priority claim writes (decideLowPriority).
	writeLow bool
	// lowPending are the claims the lock's round of low-priority writes has still to write
	// (guarded by lowMu); nil when no round is under way.
	lowPending map[types.UID]bool
	// joint is the joint grant of a several-lock claim under way in this pass (joint.go); nil
	// when none.
	joint *joint
}

// passWrites is what the pass will write: the lock and its claims as read, changed in place by
// the steps (conditions, holders, tokens, phases); the write steps compare them with passRead's
// copies and write the differences.
type passWrites struct {
	// lock is the lock under reconcile; nil when it does not exist.
	lock *locksv1alpha1.DistributedLock
	// claims are every claim of the lock, in queue order.
	claims []*locksv1alpha1.LockClaim
	// wrote is what the pass wrote of its claims so far (write.go).
	wrote claimWrites
}

// grant is one claim granted in a pass and the backend hold taken for it.
type grant struct {
	claim *locksv1alpha1.LockClaim
	lease backends.Lease
	// record is the index of the entry the grant added to the lock record's holders; writeLock
	// sets its token.
	record int
}

// maxHolders is the lock's number of places.
func (s *lockScope) maxHolders() int32 {
	return max(s.lock.Spec.MaxHolders, 1)
}

// identityOf is the identity claim c holds or asks the backend for: spec.holder.identity, else
// its holder pod's or object's UID, else its own UID.
func (s *lockScope) identityOf(c *locksv1alpha1.LockClaim) string {
	if isHeld(c) && c.Status.HolderIdentity != "" {
		return c.Status.HolderIdentity
	}
	if h := c.Spec.Holder; h != nil && h.Identity != "" {
		return h.Identity
	}
	if uid := holderOf(c).uid(s, c); uid != "" {
		return string(uid)
	}
	return string(c.UID)
}

// grantedIdentity says whether the pass granted a place to identity already.
func (s *lockScope) grantedIdentity(id string) bool {
	for _, g := range s.grants {
		if s.lock.Status.Holders[g.record].Identity == id {
			return true
		}
	}
	return false
}

// claimMode is how claim c would hold the lock.
func (s *lockScope) claimMode(c *locksv1alpha1.LockClaim) grantMode {
	return effectiveMode(c.Spec.Mode == locksv1alpha1.LockModeExclusive, s.maxHolders())
}

// waiterSlots describes the queue to planGrants.
func (s *lockScope) waiterSlots(queue []*queued) []waiterSlot {
	slots := make([]waiterSlot, len(queue))
	for i, q := range queue {
		slots[i] = waiterSlot{mode: s.claimMode(q.claim), identity: s.identityOf(q.claim)}
	}
	return slots
}

// holdSlots describes the lock's current holds to planGrants.
func (s *lockScope) holdSlots() []holdSlot {
	slots := make([]holdSlot, len(s.lock.Status.Holders))
	for i, rec := range s.lock.Status.Holders {
		mode := grantExclusive
		if recordShared(&rec) {
			mode = grantShared
		}
		slots[i] = holdSlot{mode: mode, identity: rec.Identity}
	}
	return slots
}

// lockDelay is how long the lock still waits out a lock delay (0: none): the pass grants nothing
// until then, and looks again at its end.
func (s *lockScope) lockDelay() time.Duration {
	var until *time.Time
	if t := s.lock.Status.LockDelayUntil; t != nil {
		until = &t.Time
	}
	return seams.grantDelay(until, s.now)
}

// sharesRecord says whether claim c is part of the lock's recorded hold: the claim it names, or a
// held claim of the same identity with the same token (reentrancy).
func sharesRecord(rec *locksv1alpha1.LockHolder, c *locksv1alpha1.LockClaim) bool {
	if rec == nil || isFinal(c.Status.Phase) {
		return false
	}
	if isHeld(c) {
		return c.Status.HolderIdentity == rec.Identity && c.Status.FencingToken == rec.FencingToken
	}
	// Granted, but the grant has not reached its status yet: the very claim the entry names, not
	// one created again under its name.
	return c.Name == rec.Claim && (rec.ClaimUID == "" || rec.ClaimUID == c.UID)
}

// holdKey names the hold of identity (a claim's holder identity) on the lock's key.
func (s *lockScope) holdKey(identity string) renewal.HoldKey {
	return renewal.HoldKey{Backend: s.use.name, Key: s.use.key, Identity: s.backendIdentity(identity)}
}

// backendIdentity is the value on the backend of identity's hold of this lock: the one the lock
// record names when identity holds it, else the value a grant writes (package identity). A
// record without one was granted before values were derived: the backend then holds identity
// itself.
func (s *lockScope) backendIdentity(id string) string {
	if rec := s.recordOf(id); rec != nil {
		return recordBackendIdentity(rec)
	}
	return identity.OnBackend(s.lock.UID, id)
}

// recordOf returns the lock record's entry of identity's hold; nil when it holds nothing.
func (s *lockScope) recordOf(id string) *locksv1alpha1.LockHolder {
	for i := range s.lock.Status.Holders {
		if rec := &s.lock.Status.Holders[i]; rec.Identity == id {
			return rec
		}
	}
	return nil
}

// recordBackendIdentity is the value on the backend of the hold rec records.
func recordBackendIdentity(rec *locksv1alpha1.LockHolder) string {
	if rec.BackendIdentity != "" {
		return rec.BackendIdentity
	}
	return rec.Identity
}

// recordIndex is the index of the lock record's entry that claim c is part of; -1 for none.
func recordIndex(recs []locksv1alpha1.LockHolder, c *locksv1alpha1.LockClaim) int {
	for i := range recs {
		if sharesRecord(&recs[i], c) {
			return i
		}
	}
	return -1
}

// recordShared says whether a record entry is one place of a shared lock (entries written before
// locks had places are exclusive).
func recordShared(rec *locksv1alpha1.LockHolder) bool {
	return rec.Mode == locksv1alpha1.LockModeShared
}

// startLockDelay holds back the next grant for the lock's lockDelaySeconds from now: the hold
// just ended without a release, and its holder may still be running.
func (s *lockScope) startLockDelay() {
	var current *time.Time
	if t := s.lock.Status.LockDelayUntil; t != nil {
		current = &t.Time
	}
	if end := lockDelayEnd(s.lock.Spec.LockDelaySeconds, current, s.now); end != nil {
		s.lock.Status.LockDelayUntil = micro(*end)
	}
}
