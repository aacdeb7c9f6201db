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
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Several locks at once (spec.lockNames; docs/how-locks-work.md, "Several locks at once"). Each
// lock's pass sees a several-lock claim through its part on that lock (partOn): the claim's
// phase and conditions, with this lock's token and expiry, so that every step written for one
// lock serves it unchanged; the pass's write puts the part back (withPart). Decisions here are
// pure; the joint grant that takes all the locks at once is in joint.go, the refresh of every
// part at once in holds.go (refreshParts).

// several says whether claim c holds several locks together.
func several(c *locksv1alpha1.LockClaim) bool { return len(c.Spec.LockNames) > 0 }

// claimLocks are the names of the locks claim c asks for, in name order: the order in which a
// grant takes and records them.
func claimLocks(c *locksv1alpha1.LockClaim) []string { return c.Spec.Locks() }

// homeLock is the lock whose pass grants a several-lock claim and writes its waiting status: the
// first of its locks in name order. A one-lock claim's home is its lock.
func homeLock(c *locksv1alpha1.LockClaim) string { return claimLocks(c)[0] }

// partOf is the entry of lock in a several-lock claim's status.locks; nil when there is none.
func partOf(st *locksv1alpha1.LockClaimStatus, lock string) *locksv1alpha1.ClaimLock {
	for i := range st.Locks {
		if st.Locks[i].LockName == lock {
			return &st.Locks[i]
		}
	}
	return nil
}

// partOn is several-lock claim c as the pass of lock sees it: while c is Held, with that lock's
// token and expiry in place of the claim's (its top-level token is none: it has one per lock);
// otherwise as it is. A one-lock claim is returned as it is. The result shares nothing with c.
func partOn(c *locksv1alpha1.LockClaim, lock string) *locksv1alpha1.LockClaim {
	p := c.DeepCopy()
	if !several(c) || !isHeld(c) {
		return p
	}
	p.Status.FencingToken, p.Status.ExpireTime = 0, nil
	if part := partOf(&c.Status, lock); part != nil {
		p.Status.FencingToken = part.FencingToken
		p.Status.ExpireTime = part.ExpireTime.DeepCopy()
	}
	return p
}

// claimView is a claim as the pass of one lock sees it: part, the view the steps work on (the
// claim itself, or a several-lock claim's part on that lock, partOn), and whole, the several-lock
// claim it is written back into (nil for a one-lock claim).
type claimView struct {
	part, whole *locksv1alpha1.LockClaim
}

// viewOn is claim c as the pass of lock sees it. A one-lock claim is viewed as it is, uncopied (a
// claim read from the cache stays the cache's: the pass changes only its own copies, s.claims).
func viewOn(c *locksv1alpha1.LockClaim, lock string) claimView {
	if !several(c) {
		return claimView{part: c}
	}
	return claimView{part: partOn(c, lock), whole: c}
}

// mayJoin says whether the claim may share a live hold of its identity (reentrancy): a one-lock
// claim may; a claim of several locks never does, since it is granted all of them together
// (joint.go).
func (v claimView) mayJoin() bool { return v.whole == nil }

// writesWait says whether the pass of lock writes the claim's waiting status (its place, why it
// waits): a one-lock claim's lock does; of a several-lock claim's locks, only its home lock, the
// one writer of the claim while it waits.
func (v claimView) writesWait(lock string) bool { return v.whole == nil || homeLock(v.whole) == lock }

// toWrite is the patch's base and the claim to write, after the pass of lock changed the view's
// part to after: for a several-lock claim, the whole claim with the part put back (withPart).
func (v claimView) toWrite(after *locksv1alpha1.LockClaim, lock string) (base, out *locksv1alpha1.LockClaim) {
	if v.whole == nil {
		return v.part, after
	}
	return v.whole, withPart(v.whole, v.part, after, lock)
}

// withPart is the claim to write after the pass of lock changed several-lock claim c's part from
// before to after (both partOn views of whole, the claim as read): after, with this lock's token
// and expiry put back into its status.locks entry while it holds, and the claim's own token and
// expiry restored: it has no token of its own, and its expireTime is the earliest of its locks'
// (it holds them all only until then). A one-lock claim's after is written as it is.
func withPart(whole, before, after *locksv1alpha1.LockClaim, lock string) *locksv1alpha1.LockClaim {
	if !several(whole) || (!isHeld(before) && !isHeld(after)) {
		return after
	}
	w := after.DeepCopy()
	if isHeld(after) {
		if part := partOf(&w.Status, lock); part != nil {
			part.FencingToken = after.Status.FencingToken
			part.ExpireTime = after.Status.ExpireTime.DeepCopy()
		}
	}
	w.Status.FencingToken = 0
	w.Status.ExpireTime = whole.Status.ExpireTime.DeepCopy()
	if isHeld(w) {
		w.Status.ExpireTime = earliestExpiry(w.Status.Locks)
	}
	return w
}

// earliestExpiry is the earliest expireTime of the parts; nil when none has one.
func earliestExpiry(parts []locksv1alpha1.ClaimLock) *metav1.MicroTime {
	var earliest *metav1.MicroTime
	for i := range parts {
		if t := parts[i].ExpireTime; t != nil && (earliest == nil || t.Before(earliest)) {
			earliest = t.DeepCopy()
		}
	}
	return earliest
}

// partFate is what the pass of a lock does with its record's entry for a several-lock claim.
type partFate int

const (
	// partKept: the claim holds all its locks; the entry is renewed as any hold.
	partKept partFate = iota
	// partEnded: the claim ended (its hold of another lock was lost, it was released): the entry
	// is released and dropped without a word to the claim, whose status already says how it ended.
	partEnded
	// partMarked: a grant that stopped half way left the entry while the claim waits. The pass
	// first writes the claim, listing the entry in status.locks with reason PartialGrant; only a
	// later pass, which reads that write, releases the entry (partGivenBack). The write is what
	// makes the release safe: the stopped grant's last write, the claim's Held, is preconditioned
	// on the claim as that grant read it, so once any write has moved the claim on, a deposed
	// leader that wakes up can no longer report the claim Held.
	partMarked
	// partGivenBack: the claim lists this entry (lock and token) as one to give back: the entry
	// is released and dropped, and the claim goes on waiting for all its locks.
	partGivenBack
)

// partFateOf decides the fate of lock's record entry for several-lock claim c (as read, not a
// part), whose entry carries token.
func partFateOf(c *locksv1alpha1.LockClaim, lock string, token int64) partFate {
	switch {
	case isHeld(c):
		return partKept
	case isFinal(c.Status.Phase):
		return partEnded
	}
	if part := partOf(&c.Status, lock); part != nil && part.FencingToken == token && partialMarked(c) {
		return partGivenBack
	}
	return partMarked
}

// partialMarked says whether a waiting several-lock claim's status lists holds a stopped grant
// left behind (status.locks while not Held).
func partialMarked(c *locksv1alpha1.LockClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionAcquired)
	return cond != nil && cond.Reason == locksv1alpha1.ReasonPartialGrant
}

// overtakable says whether the claims behind several-lock claim c in the queue of a lock whose
// lease is ttl may still be granted before it, at now: for a lease from the moment it began to
// wait (its Acquired condition's lastTransitionTime, set when it was queued, or its creation
// before that). Past that bound the lock grants nothing behind it, so the holds ahead of it end
// and it is granted: it cannot be overtaken for longer than a lease plus the holds already
// granted when the bound ran out.
func overtakable(c *locksv1alpha1.LockClaim, ttl time.Duration, now time.Time) bool {
	return now.Before(waitingSince(c).Add(ttl))
}

// waitingSince is when claim c began to wait for its locks.
func waitingSince(c *locksv1alpha1.LockClaim) time.Time {
	if cond := meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionAcquired); cond != nil && !isHeld(c) {
		return cond.LastTransitionTime.Time
	}
	return c.CreationTimestamp.Time
}

// lineSlot is what lineUp needs of one waiting claim of a lock's queue.
type lineSlot struct {
	waiterSlot
	// several: the claim holds several locks together; only the joint grant takes them.
	several bool
	// overtakable: the claims behind it may still be granted before it (overtakable).
	overtakable bool
}

// lineUp splits a lock's queue, in order, into the claims its pass may grant one by one (line:
// indexes into queue, the input of planGrants) and the first several-lock claim that is first in
// line with the lock free for it (ready: its index, -1 for none), which only a joint grant takes.
// A several-lock claim is first in line when no claim ahead of it waits to be granted here and
// the rules of planGrants would grant it alone. Claims behind a several-lock claim stay in line
// while it is overtakable; past its bound the line ends at it.
func lineUp(queue []lineSlot, holds []holdSlot, maxHolders int32) (line []int, ready int) {
	ready = -1
	for i, q := range queue {
		if !q.several {
			line = append(line, i)
			continue
		}
		if ready < 0 && len(line) == 0 && planGrants([]waiterSlot{q.waiterSlot}, holds, maxHolders) == 1 {
			ready = i
		}
		if !q.overtakable {
			break
		}
	}
	return line, ready
}

// markPartial records in waiting several-lock claim c (its part on lock) that lock's record
// holds an entry for it, with token, that a grant which stopped half way left: the claim's write
// is what allows the entry's release (partFateOf, partMarked).
func markPartial(c *locksv1alpha1.LockClaim, lock string, token int64) {
	entry := locksv1alpha1.ClaimLock{LockName: lock, FencingToken: token}
	if !partialMarked(c) {
		c.Status.Locks = nil // a list from an earlier grant
	}
	if part := partOf(&c.Status, lock); part != nil {
		*part = entry
	} else {
		c.Status.Locks = append(c.Status.Locks, entry)
	}
	markWaiting(c, c.Status.QueuePosition, true, locksv1alpha1.ReasonPartialGrant,
		"A grant of all this claim's locks stopped half way; the controller gives back the holds it left ("+
			partialNames(c.Status.Locks)+") and the claim waits for all its locks again")
}

// givenBack drops lock from the holds waiting several-lock claim c lists as left by a stopped
// grant, once the pass releases it; with none left the claim is queued as before.
func givenBack(c *locksv1alpha1.LockClaim, lock string) {
	c.Status.Locks = slices.DeleteFunc(c.Status.Locks, func(p locksv1alpha1.ClaimLock) bool { return p.LockName == lock })
	if len(c.Status.Locks) > 0 {
		markPartial(c, c.Status.Locks[0].LockName, c.Status.Locks[0].FencingToken)
		return
	}
	c.Status.Locks = nil
	markWaiting(c, c.Status.QueuePosition, true, locksv1alpha1.ReasonQueued,
		"Waiting for all its locks again: the holds a stopped grant left were given back")
}

// partialNames lists the locks of parts, for messages.
func partialNames(parts []locksv1alpha1.ClaimLock) string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.LockName
	}
	return strings.Join(names, ", ")
}
