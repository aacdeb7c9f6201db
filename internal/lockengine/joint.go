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
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// This file is everything a pass does with a claim of several locks as a whole (several.go holds
// the pure rules): settling the entries a stopped grant left (settleParts), the joint grant
// (serveJoint, writeJoint, endJoint), and the refresh of every part at once from its home lock's
// pass (refreshParts, with the other locks' records read by loadPartLocks).
//
// The joint grant: a several-lock claim is granted all its locks by one pass, its home lock's
// (docs/how-locks-work.md, "Several locks at once"). That pass holds its own lock's pass lock;
// it takes each other lock's only by trying (a pass of that lock which runs is not waited for:
// it ends, and wakes the home lock if the claim is first in line there), so two joint grants never
// wait for each other. With every pass lock held it reads each lock afresh, grants only if the
// claim is first in line with the lock free for it on every one, takes the backend keys in name
// order, writes the records in name order (the home lock's by the pass's own writeLock, the
// others' by writeJoint), and then the claim, Held, with every token. One writer per lock still
// holds, and every write is a compare-and-swap on what was read.

// jointBusyRetry is how soon a home lock whose joint grant found another of the claim's locks
// in a pass of its own looks again.
const jointBusyRetry = 50 * time.Millisecond

// joint is a joint grant under way in a pass of the claim's home lock.
type joint struct {
	// claim is the claim's part on the home lock.
	claim *locksv1alpha1.LockClaim
	// scopes are the claim's other locks, in name order, read with their pass locks held; parts
	// are the claim's part on each.
	scopes []*lockScope
	parts  []*locksv1alpha1.LockClaim
	// unlocks end the other locks' passes this one holds.
	unlocks []func()
	// granted: every backend key was taken; writeJoint records them.
	granted bool
}

// givingBack says whether several-lock claim c waits while holds a stopped grant left are given
// back: it is not in the queue meanwhile (a grant would find those holds in its way).
func (s *lockScope) givingBack(c *locksv1alpha1.LockClaim) bool {
	return several(c) && (recordIndex(s.lock.Status.Holders, c) >= 0 || (partialMarked(c) && len(c.Status.Locks) > 0))
}

// lineSlots describes the queue to lineUp.
func (s *lockScope) lineSlots(queue []*queued) []lineSlot {
	ws := s.waiterSlots(queue)
	slots := make([]lineSlot, len(queue))
	for i, q := range queue {
		slots[i] = lineSlot{waiterSlot: ws[i], several: several(q.claim)}
		if slots[i].several {
			slots[i].overtakable = overtakable(q.claim, s.use.ttl, s.now)
		}
	}
	return slots
}

// lineUp splits the queue into the claims the pass may grant one by one (line) and the
// several-lock claim first in line with the lock free for it (ready; nil for none), which only a
// joint grant takes (several.go's lineUp).
func (s *lockScope) lineUp(queue []*queued) (line []*queued, ready *queued) {
	at, first := lineUp(s.lineSlots(queue), s.holdSlots(), s.maxHolders())
	line = make([]*queued, len(at))
	for i, k := range at {
		line[i] = queue[k]
	}
	if first >= 0 {
		ready = queue[first]
	}
	return line, ready
}

// settleParts deals, before endHolds, with the record entries that a joint grant which stopped
// half way left for a claim that still waits (several.go, partFateOf): an entry not yet listed in
// the claim's status is listed there first (markPartial) and kept as it is, unrenewed, until that
// write lands; an entry the claim lists is given back (givenBack). Either way endHolds leaves the
// claim out (s.settled), and keeps an entry set aside unless another claim holds it.
// (partKept needs nothing here; partEnded cannot occur: a claim that ended names no entry.)
func (r *Reconciler) settleParts(_ context.Context, s *lockScope) (stepResult, error) {
	var res stepResult
	recs := s.lock.Status.Holders
	for _, c := range s.claims {
		whole := s.read[c.UID].whole
		i := recordIndex(recs, c)
		if whole == nil || i < 0 || isHeld(c) {
			continue
		}
		if s.settled == nil {
			s.settled = map[types.UID]bool{}
		}
		switch partFateOf(whole, s.name.Name, recs[i].FencingToken) {
		case partMarked:
			markPartial(c, s.name.Name, recs[i].FencingToken)
			s.settled[c.UID] = true
			res = res.wakeIn(staleRetry)
		case partGivenBack:
			givenBack(c, s.name.Name)
			s.settled[c.UID] = false
		}
	}
	return res, nil
}

// serveJoint serves the several-lock claim first in line with the lock free for it (queueClaims
// found it), before serveQueue grants the claims behind it.
func (r *Reconciler) serveJoint(ctx context.Context, s *lockScope) (stepResult, error) {
	if s.ready == nil || !s.grantable() {
		return stepResult{}, nil
	}
	return r.serveSeveral(ctx, s, s.ready)
}

// serveSeveral serves several-lock claim q, first in line on this lock with the lock free for it:
// the home lock's pass tries the joint grant; any other lock's wakes the home lock, whose pass
// does.
func (r *Reconciler) serveSeveral(ctx context.Context, s *lockScope, q *queued) (stepResult, error) {
	c := q.claim
	home := homeLock(c)
	if home != s.name.Name {
		r.wake(types.NamespacedName{Namespace: s.name.Namespace, Name: home})
		return stepResult{}, nil
	}
	q.tried = true
	return r.jointGrant(ctx, s, c)
}

// jointGrant takes all of c's locks for it, or none. c is its part on s, the home lock's pass.
func (r *Reconciler) jointGrant(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) (stepResult, error) {
	j := &joint{claim: c}
	s.joint = j
	for _, name := range seams.jointOthers(c) {
		o, res, err := r.lockOther(ctx, s, j, c, types.NamespacedName{Namespace: s.name.Namespace, Name: name})
		if o == nil || err != nil {
			return res, err
		}
		j.scopes = append(j.scopes, o)
		j.parts = append(j.parts, o.claimByUID(c.UID))
	}
	// Every lock is free for c: the keys, in name order, this lock's first.
	if ok, res, err := r.tryGrant(ctx, s, c); !ok || err != nil {
		return res, err
	}
	for i, o := range j.scopes {
		ok, res, err := r.tryGrant(ctx, o, j.parts[i])
		if err != nil || !ok {
			// Give back what was taken; c says why it waits (the refusal tryGrant wrote on its part).
			copyWait(c, j.parts[i], o.name.Name)
			return res, errors.Join(err, r.giveBack(ctx, s), r.giveBackJoint(ctx, j))
		}
	}
	j.granted = true
	return stepResult{}, nil
}

// lockOther takes the pass lock of lock nn, another of c's locks, only by trying, and reads it
// afresh; it returns its scope when the lock is free for c, else nil with when to look again (a
// moment's wait, which the claim's status does not show) or c's status saying why it waits.
func (r *Reconciler) lockOther(ctx context.Context, s *lockScope, j *joint, c *locksv1alpha1.LockClaim, nn types.NamespacedName) (*lockScope, stepResult, error) {
	unlock, ok := r.memory.passes.tryLock(nn)
	if !ok {
		return nil, after(jointBusyRetry), nil
	}
	j.unlocks = append(j.unlocks, unlock)
	o, err := r.load(ctx, nn)
	if err != nil || o == nil {
		return nil, after(staleRetry), err // nil: the cache lags this process's own write
	}
	var queue []*queued
	if o.lock != nil {
		queue = r.queueOf(o).queue
	}
	switch why, ready := jointReady(s, o, c, queue); {
	case ready:
		return o, stepResult{}, nil
	case why.reason == "":
		return nil, after(staleRetry), nil // a moment's wait: the status stays
	case why.reason == locksv1alpha1.ReasonWaitingForLocks:
		waitForLocks(c, why.message)
	default:
		markWaiting(c, c.Status.QueuePosition, why.ready, why.reason, why.message)
	}
	return nil, stepResult{}, nil
}

// notReady is why a joint grant cannot take one of the claim's locks now: the reason and message
// of the claim's conditions, and whether it is Ready (it only waits its turn); no reason for a
// moment's wait (the lock's view catches up, it took its key just now), which the status does not
// show.
type notReady struct {
	reason, message string
	ready           bool
}

// jointReady says whether lock o (read with its pass lock held, its queue as queueOf sorts it) is
// free for several-lock claim c, whose home lock's pass is s: on the same backend, usable, and c
// first in line there.
func jointReady(s, o *lockScope, c *locksv1alpha1.LockClaim, queue []*queued) (notReady, bool) {
	name := o.name.Name
	switch {
	case o.lock == nil:
		return notReady{reason: locksv1alpha1.ReasonLockNotFound,
			message: fmt.Sprintf("DistributedLock %s, one of spec.lockNames, does not exist in namespace %s", name, o.name.Namespace)}, false
	case o.use.name != s.use.name:
		return notReady{reason: locksv1alpha1.ReasonMixedBackends, message: fmt.Sprintf(
			"The locks of spec.lockNames must all be on one LockBackend: %s is on %s, %s on %s", s.name.Name, s.use.name, name, o.use.name)}, false
	case !o.lock.DeletionTimestamp.IsZero():
		return notReady{reason: locksv1alpha1.ReasonLockNotFound, message: fmt.Sprintf("DistributedLock %s, one of spec.lockNames, is being deleted", name)}, false
	case o.use.session == nil:
		return notReady{reason: locksv1alpha1.ReasonBackendUnavailable,
			message: fmt.Sprintf("DistributedLock %s cannot grant now: its backend is not usable (its BackendReady condition says why)", name)}, false
	case o.use.conflict != nil:
		return notReady{reason: locksv1alpha1.ReasonKeyConflict, message: fmt.Sprintf("DistributedLock %s: %s", name, o.use.conflict.Message)}, false
	case o.use.keyTaken:
		return notReady{}, false
	case o.lockDelay() > 0:
		return notReady{reason: locksv1alpha1.ReasonLockDelay, ready: true,
			message: fmt.Sprintf("DistributedLock %s waits out its lockDelaySeconds after a hold that ended without a release", name)}, false
	}
	part := o.claimByUID(c.UID)
	if part == nil || o.givingBack(part) {
		return notReady{}, false
	}
	_, ready := o.lineUp(queue)
	if ready == nil || ready.claim.UID != c.UID {
		return notReady{reason: locksv1alpha1.ReasonWaitingForLocks, ready: true,
			message: fmt.Sprintf("DistributedLock %s is held, or other claims are ahead of this one there", name)}, false
	}
	return notReady{}, true
}

// claimByUID is the claim of the scope with uid; nil when it has none.
func (s *lockScope) claimByUID(uid types.UID) *locksv1alpha1.LockClaim {
	for _, c := range s.claims {
		if c.UID == uid {
			return c
		}
	}
	return nil
}

// waitForLocks marks several-lock claim c (its home part) waiting for its other locks.
func waitForLocks(c *locksv1alpha1.LockClaim, why string) {
	markWaiting(c, c.Status.QueuePosition, true, locksv1alpha1.ReasonWaitingForLocks,
		"First in line on DistributedLock "+homeLock(c)+"; it holds none of its locks until it can take them all: "+why)
}

// copyWait makes home part c say why the joint grant stopped at lock: the wait tryGrant marked on
// that lock's part.
func copyWait(c, part *locksv1alpha1.LockClaim, lock string) {
	for _, cond := range part.Status.Conditions {
		if cond.Type == locksv1alpha1.ConditionAcquired {
			markWaiting(c, c.Status.QueuePosition, cond.Reason != locksv1alpha1.ReasonBackendUnavailable, cond.Reason,
				"DistributedLock "+lock+": "+cond.Message)
			return
		}
	}
}

// writeJoint records a joint grant on the claim's other locks, in name order, once the home
// lock's record (writeLock) named it; then the claim's part on the home lock lists every lock's
// token, for writeClaims. A write that fails stops the pass: the records written name a claim
// that is not Held, which their passes give back (partFateOf), and endJoint gives back the keys
// no record names.
func (r *Reconciler) writeJoint(ctx context.Context, s *lockScope) (stepResult, error) {
	j := s.joint
	if j == nil || !j.granted {
		return stepResult{}, nil
	}
	if !isHeld(j.claim) {
		return stepResult{}, nil // the home record's write did not land
	}
	for _, o := range j.scopes {
		for _, q := range notGranted(r.queueOf(o).queue, j.parts) {
			o.waiters = append(o.waiters, q.claim)
		}
		if _, err := r.writeLock(ctx, o); err != nil {
			return stepResult{}, err
		}
	}
	locks := []locksv1alpha1.ClaimLock{{LockName: s.name.Name, FencingToken: j.claim.Status.FencingToken, ExpireTime: j.claim.Status.ExpireTime.DeepCopy()}}
	for i, o := range j.scopes {
		p := j.parts[i]
		locks = append(locks, locksv1alpha1.ClaimLock{LockName: o.name.Name, FencingToken: p.Status.FencingToken, ExpireTime: p.Status.ExpireTime.DeepCopy()})
	}
	j.claim.Status.Locks = locks
	return stepResult{}, nil
}

// giveBackJoint releases the keys the joint grant took on the other locks that no record names.
func (r *Reconciler) giveBackJoint(ctx context.Context, j *joint) error {
	var errs []error
	for _, o := range j.scopes {
		errs = append(errs, r.giveBack(ctx, o))
	}
	return errors.Join(errs...)
}

// endJoint ends a pass's joint grant: the keys no record names go back, the other locks' passes
// are let go and woken (their queues moved, and the granted parts' refreshes are theirs).
func (r *Reconciler) endJoint(ctx context.Context, s *lockScope) error {
	j := s.joint
	if j == nil {
		return nil
	}
	s.joint = nil
	err := r.giveBackJoint(ctx, j)
	for _, unlock := range j.unlocks {
		unlock()
	}
	for _, o := range j.scopes {
		r.wake(o.name)
	}
	return err
}

// heldPart is one lock that a held claim holds, as its refresh sees it: the hold's key in the
// Renewer, the expiry the claim shows for it, and how to write a later one into the claim.
type heldPart struct {
	key     renewal.HoldKey
	expire  *time.Time
	renewed func(h renewal.Hold)
}

// heldParts are the holds that the pass refreshes of held claim c, and the earliest expiry it
// shows (nil: none yet, so a refresh is due). A one-lock claim has one. A several-lock claim's
// home lock's pass refreshes every part at once, each from the Renewer's latest confirmation of
// that lock's hold, so that the claim, whose expireTime is the earliest of its parts', is written
// once per refresh rather than once per lock (each a write of the same claim, racing the others');
// the other locks' records were read with the pass (loadPartLocks), for their keys and the
// backend identities they name. The pass of any other of its locks refreshes none of it.
func (s *lockScope) heldParts(c *locksv1alpha1.LockClaim) (parts []heldPart, earliest *time.Time) {
	if !several(c) {
		var expire *time.Time
		if t := c.Status.ExpireTime; t != nil {
			expire = &t.Time
		}
		return []heldPart{{key: s.holdKey(c.Status.HolderIdentity), expire: expire,
			renewed: func(h renewal.Hold) { markRenewed(c, h.RenewTime, h.Lease.ExpireTime) }}}, expire
	}
	if homeLock(c) != s.name.Name {
		return nil, nil
	}
	if t := earliestExpiry(c.Status.Locks); t != nil {
		earliest = &t.Time
	}
	for i := range c.Status.Locks {
		part := &c.Status.Locks[i]
		key, ok := s.partHoldKey(c, *part)
		if !ok {
			continue
		}
		var expire *time.Time
		if part.ExpireTime != nil {
			expire = &part.ExpireTime.Time
		}
		parts = append(parts, heldPart{key: key, expire: expire, renewed: func(h renewal.Hold) {
			part.ExpireTime = micro(h.Lease.ExpireTime)
			if part.LockName == s.name.Name {
				markRenewed(c, h.RenewTime, h.Lease.ExpireTime) // the part on this lock, as withPart reads it
			}
		}})
	}
	return parts, earliest
}

// partHoldKey names the hold of held several-lock claim c on part's lock: this pass's lock, or
// another of the claim's locks as loadPartLocks read it; ok is false when that lock's record has
// no entry of the claim's identity with the part's token.
func (s *lockScope) partHoldKey(c *locksv1alpha1.LockClaim, part locksv1alpha1.ClaimLock) (renewal.HoldKey, bool) {
	if part.LockName == s.name.Name {
		return s.holdKey(c.Status.HolderIdentity), true
	}
	l := s.partLocks[part.LockName]
	if l == nil {
		return renewal.HoldKey{}, false
	}
	for _, rec := range l.Status.CurrentHolders() {
		if rec.Identity == c.Status.HolderIdentity && rec.FencingToken == part.FencingToken {
			return renewal.HoldKey{Backend: s.use.name, Key: l.BackendKey(s.use.keyPolicy), Identity: recordBackendIdentity(&rec)}, true
		}
	}
	return renewal.HoldKey{}, false
}

// loadPartLocks reads from the cache, for the held several-lock claims among claims whose home is
// this lock, the records of their other locks: the home lock's pass refreshes every part at once
// (refreshParts) and names each part's hold by that lock's key and the backend identity its
// record keeps. A lock that does not exist is recorded as nil.
func (r *Reconciler) loadPartLocks(ctx context.Context, s *lockScope, claims []*locksv1alpha1.LockClaim) error {
	for _, c := range claims {
		if !several(c) || !isHeld(c) || homeLock(c) != s.name.Name {
			continue
		}
		for _, name := range claimLocks(c)[1:] {
			if _, ok := s.partLocks[name]; ok {
				continue
			}
			l := &locksv1alpha1.DistributedLock{}
			switch err := r.Get(ctx, types.NamespacedName{Namespace: s.name.Namespace, Name: name}, l); {
			case apierrors.IsNotFound(err):
				l = nil
			case err != nil:
				return err
			}
			if s.partLocks == nil {
				s.partLocks = map[string]*locksv1alpha1.DistributedLock{}
			}
			s.partLocks[name] = l
		}
	}
	return nil
}

// orphanedPart says, for the pass of lock name that does not exist, how claim c hears of it: a
// several-lock claim that is not being deleted hears it from its home lock's pass (the joint grant
// names the missing lock), its one writer while it waits, unless this is its home (skip); and the
// message names the lock as one of spec.lockNames.
func orphanedPart(c *locksv1alpha1.LockClaim, name types.NamespacedName, msg string) (string, bool) {
	if !several(c) {
		return msg, false
	}
	if homeLock(c) != name.Name && c.DeletionTimestamp.IsZero() {
		return "", true
	}
	return fmt.Sprintf("DistributedLock %s, one of spec.lockNames, does not exist in namespace %s", name.Name, name.Namespace), false
}
