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
	"math/bits"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/podliveness"
)

// This file holds the decisions of a lock's pass as pure functions of what the pass read: who
// holds, who must let go and why, who waits aside, when to look again; then, in sections, which
// claims are granted (Grants), what a claim's and a lock's status say and which event a
// transition emits (Status), and which held-back writes go now (Rounds). The steps read, call
// these and write; table tests cover them (decide_test.go, grants_test.go, claim_status_test.go,
// lowpriority_test.go).

// ending says that a claim's part in a hold, or its wait, is over, and how its status says so.
type ending struct {
	phase   locksv1alpha1.ClaimPhase
	reason  string
	message string
	// unreleased: a hold that ends so ends without its holder letting go (it died, or lost the
	// lock), so the lock's lockDelaySeconds applies.
	unreleased bool
}

// holderFacts is what a pass knows of one claim that shares the lock's recorded hold.
type holderFacts struct {
	// deleting: the claim has a deletionTimestamp.
	deleting bool
	// lockDeleting: the DistributedLock has a deletionTimestamp.
	lockDeleting bool
	// lockName names the lock, for messages.
	lockName string
	// holder is the liveness of the claim's holder (holder.holdVerdict): its pod, heartbeat Lease
	// or workload object; Alive for a detached claim.
	holder podliveness.Verdict
	// deletedWithHolder: the claim is being deleted by its holder's foreground deletion (the
	// claim is owned by the pod or object, which terminates with the foregroundDeletion
	// finalizer): Kubernetes deletes dependents first, while the pod's containers may still run.
	deletedWithHolder bool
}

// holderEnding says whether a claim that shares the recorded hold lets go of it in this pass, and
// why: its lock is going, its pod died, or the claim was deleted. nil: it keeps holding.
//
// How a hold ends follows the holder's fate, not the order in which the pass saw the events
// (docs/design.md §3, Release): a holder that died ended without a release (lockDelaySeconds and
// lossPolicy apply) even when garbage collection deleted its claim in the same instant; a claim
// that its pod's foreground deletion removes holds until the pod is gone, since a terminating
// pod's containers may still run; a claim deleted while its holder lives is a release.
func holderEnding(f holderFacts) *ending {
	switch {
	case f.lockDeleting:
		return &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonLockNotFound,
			message: fmt.Sprintf("DistributedLock %s is being deleted", f.lockName)}
	case !f.holder.Alive:
		return &ending{phase: locksv1alpha1.ClaimReleased, reason: locksv1alpha1.ReasonHolderTerminated,
			message: "Released: " + f.holder.Reason, unreleased: !f.holder.Completed}
	case f.deleting && f.deletedWithHolder:
		return nil
	case f.deleting:
		return &ending{phase: locksv1alpha1.ClaimReleased, reason: locksv1alpha1.ReasonClaimDeleted, message: "Released: the claim was deleted"}
	}
	return nil
}

// lostEnding is how a held claim ends whose hold the backend no longer has.
func lostEnding(message string) *ending {
	return &ending{phase: locksv1alpha1.ClaimLost, reason: locksv1alpha1.ReasonRenewFailed, message: message, unreleased: true}
}

// lockDelayEnd is when a lock whose hold ended without a release at now may be granted again,
// given its lockDelaySeconds and the delay already under way (nil: none); nil when there is no
// delay. A later end never shortens a delay under way.
func lockDelayEnd(delaySeconds int32, current *time.Time, now time.Time) *time.Time {
	if delaySeconds <= 0 {
		return current
	}
	end := now.Add(time.Duration(delaySeconds) * time.Second)
	if current != nil && current.After(end) {
		return current
	}
	return &end
}

// grantDelay is how long a lock must still wait before it grants, given status.lockDelayUntil;
// 0 when it may grant now.
func grantDelay(until *time.Time, now time.Time) time.Duration {
	if until == nil || !now.Before(*until) {
		return 0
	}
	return until.Sub(now)
}

// lockDelayMessage says why the head of the queue waits out a lock delay.
func lockDelayMessage(until time.Time, delaySeconds int32) string {
	return fmt.Sprintf("The last hold ended without a release; no grant before %s (lockDelaySeconds=%d)",
		until.UTC().Format(time.RFC3339), delaySeconds)
}

// waiterFacts is what a pass knows of one claim that waits for the lock.
type waiterFacts struct {
	// lockDeleting: the DistributedLock has a deletionTimestamp.
	lockDeleting bool
	// lockName names the lock, for messages.
	lockName string
	// namespace is the claim's namespace, for messages.
	namespace string
	// podName is the holder pod's name; empty for a detached claim.
	podName string
	// pod is the holder pod from the cache, nil when absent.
	pod *corev1.Pod
	// podUID is the UID recorded in the claim's status, empty when none yet.
	podUID types.UID
}

// waiterVerdict is what becomes of a waiting claim before the queue is served.
type waiterVerdict struct {
	// end is set when the claim stops waiting for good.
	end *ending
	// missing, when set, says that its holder (a pod, a heartbeat Lease or a workload object)
	// does not exist yet: it cannot be granted now, and waits aside.
	missing *missingHolder
	// seen is the holder's UID, seen for the first time: the queue step records it in the
	// claim's status (holder.noteUID).
	seen types.UID
}

// judgeWaiter decides whether a waiting claim goes on waiting: not when its lock is going or its
// pod died before it was granted. (A wait that is over ends after the queue was served, so that
// waitTimeoutSeconds: 0 still tries once.)
func judgeWaiter(f waiterFacts) waiterVerdict {
	if f.lockDeleting {
		return waiterVerdict{end: &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonLockNotFound,
			message: fmt.Sprintf("DistributedLock %s is being deleted", f.lockName)}}
	}
	if f.podName == "" {
		return waiterVerdict{}
	}
	if f.pod == nil && f.podUID == "" {
		// The pod may not have been created yet: wait for it (the Pod watch wakes the lock).
		return waiterVerdict{missing: &missingHolder{reason: locksv1alpha1.ReasonPodNotFound,
			what: fmt.Sprintf("Pod %s does not exist in namespace %s", f.podName, f.namespace)}}
	}
	if v := podliveness.Check(f.pod, f.podName, f.podUID); !v.Alive {
		return waiterVerdict{end: &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonHolderTerminated,
			message: "The holder will never get the lock: " + v.Reason}}
	}
	return waiterVerdict{}
}

// holderMissingLimit is how long a claim may name a holder that does not exist (a pod or a
// heartbeat Lease never seen) before it fails. Such a claim waits aside and blocks nobody, so the
// limit is not about the queue: it turns a typo or a holder that will never come into a Failed
// claim while someone is still looking, instead of a claim that waits for ever. Two minutes is far
// more than the moments between a claim and a holder created together (a client creates the
// claim, then its Lease; a StatefulSet's pod follows its claim within seconds), and well within
// the time a person watching a rollout waits before looking.
const holderMissingLimit = 2 * time.Minute

// missingHolder is what a pass knows of a waiting claim whose holder does not exist yet.
type missingHolder struct {
	// reason is the condition reason that names what is missing (PodNotFound, HeartbeatNotFound).
	reason string
	// what says what is missing, as a sentence that starts a message ("Pod web-0 does not exist
	// in namespace team").
	what string
	// created is the claim's creationTimestamp, from which the limit counts.
	created time.Time
}

// judgeMissingHolder decides for a claim that waits aside for its holder: it fails once
// holderMissingLimit has passed since the claim was created; until then it waits, with a message
// that says it blocks nobody and when it gives up, and the pass looks again at that moment.
func judgeMissingHolder(m missingHolder, now time.Time) (end *ending, message string, wait time.Duration) {
	deadline := m.created.Add(holderMissingLimit)
	if !now.Before(deadline) {
		return &ending{phase: locksv1alpha1.ClaimFailed, reason: m.reason,
			message: fmt.Sprintf("%s; gave up after %s (create the holder before or with its claim)", m.what, holderMissingLimit)}, "", 0
	}
	return nil, fmt.Sprintf("%s; the claim waits aside for it, behind no one and blocking no one, and fails at %s if it is still missing",
		m.what, deadline.UTC().Format(time.RFC3339)), deadline.Sub(now)
}

// holdExpiry is the latest expiry a hold is known to have had: its record entry's, or a later one
// that a claim sharing it was told; nil when none was ever written.
func holdExpiry(rec *locksv1alpha1.LockHolder, claims []*locksv1alpha1.LockClaim) *time.Time {
	var latest *time.Time
	if rec.ExpireTime != nil {
		latest = &rec.ExpireTime.Time
	}
	for _, c := range claims {
		if t := c.Status.ExpireTime; t != nil && (latest == nil || t.After(*latest)) {
			latest = &t.Time
		}
	}
	return latest
}

// expiry is what a pass that cannot ask the backend (it is unusable) knows of a hold's end.
type expiry int

const (
	// expiryUnknown: no expiry was ever written for the hold.
	expiryUnknown expiry = iota
	// expiryPassed: the hold's latest known expiry has passed: nothing of it can be left.
	expiryPassed
	// expiryAhead: the hold may still be in force on the backend.
	expiryAhead
)

// judgeExpiry says what the latest known expiry of a hold tells at now. Its callers read an
// unknown expiry in opposite ways, each toward safety: a release (releaseRecord) cannot skip the
// backend for a hold that may still be in force, so it waits for the backend; a resumption
// (resume) must never report Held without evidence, so it ends the hold.
func judgeExpiry(expire *time.Time, now time.Time) expiry {
	switch {
	case expire == nil:
		return expiryUnknown
	case !now.Before(*expire):
		return expiryPassed
	}
	return expiryAhead
}

// contention is what the head of the queue is told when a client other than its lock's holders
// holds its backend key, and when the pass looks again: at the key's expiry when the backend
// said when that is (at least 100 ms on); else, when the backend will report the key free
// (watched), only as a fallback should that news be lost; else after maxRetryDelay. Whoever holds
// the key is never named: its value may be another namespace's holder or anything a client
// outside lockwarden wrote.
func contention(locked *backends.LockedError, watched bool, now time.Time) (message string, retry time.Duration) {
	// The other client's expiry decides when to look again, but is not the namespace's to read.
	message, retry = "The key is held on the backend by another client", maxRetryDelay
	if watched {
		retry = freeWatchFallback
	}
	if locked != nil && !locked.ExpireTime.IsZero() {
		retry = max(locked.ExpireTime.Sub(now), 100*time.Millisecond)
	}
	return message, retry
}

// holderRecord is the lock record's entry for a grant at now to claim c, whose holder is holder
// (recordedHolder), of holder identity id, in mode, with the backend hold lease.
func holderRecord(c *locksv1alpha1.LockClaim, holder *locksv1alpha1.RecordedHolder, id string, lease backends.Lease, mode grantMode, now time.Time) locksv1alpha1.LockHolder {
	rec := locksv1alpha1.LockHolder{
		Claim:           c.Name,
		ClaimUID:        c.UID,
		Holder:          holder,
		Mode:            locksv1alpha1.LockModeExclusive,
		Identity:        id,
		BackendIdentity: lease.Identity,
		AcquireTime:     *micro(now),
		ExpireTime:      micro(lease.ExpireTime),
	}
	if mode == grantShared {
		rec.Mode = locksv1alpha1.LockModeShared
	}
	return rec
}

// waiterPlace is what a pass knows of a claim that goes on waiting in the queue.
type waiterPlace struct {
	// position is its place in the queue, 1 for the head.
	position int32
	// holders are the lock record's holders.
	holders []locksv1alpha1.LockHolder
	// unusable says why the lock's backend cannot be used now; conflict, which lock took its key
	// first (nil: none).
	unusable, conflict *registry.UnusableError
	// delayed: the lock waits out a lock delay until delayUntil (lockDelaySeconds: delaySeconds).
	delayed      bool
	delayUntil   *metav1.MicroTime
	delaySeconds int32
}

// waiting is the status of a claim that waits: its queue position (0: none, the lock cannot grant
// now), whether it is ready (nothing to fix), the Acquired reason and the message.
type waiting struct {
	position int32
	ready    bool
	reason   string
	message  string
}

// waitingStatus says what a claim that goes on waiting in the queue shows: a backend it cannot
// use or a key another lock owns first, since those are what to fix; then a lock delay, at the
// head of a lock nobody holds; else its place in the queue.
func waitingStatus(p waiterPlace) waiting {
	switch {
	case p.unusable != nil:
		return waiting{reason: unusableReason(p.unusable), message: p.unusable.Message}
	case p.conflict != nil:
		return waiting{reason: p.conflict.Reason, message: p.conflict.Message}
	case p.delayed && p.position == 1 && len(p.holders) == 0 && p.delayUntil != nil:
		return waiting{position: p.position, ready: true, reason: locksv1alpha1.ReasonLockDelay,
			message: lockDelayMessage(p.delayUntil.Time, p.delaySeconds)}
	}
	return waiting{position: p.position, ready: true, reason: locksv1alpha1.ReasonQueued, message: queuedMessage(p.holders)}
}

// writeClass is how the claim writes of a pass are ordered (writeClaims).
type writeClass int

const (
	// writeNothing: the status did not change.
	writeNothing writeClass = iota
	// writeEnded: a hold ended; written first, so that no watcher sees two holders at once.
	writeEnded
	// writeGranted: a new holder; written next, since the handoff waits for it.
	writeGranted
	// writeGone: a deleted claim that holds nothing; its status is not written (its deletion
	// says it), its finalizer comes off.
	writeGone
	// writeLow: a change no client waits for (a waiter's place or wording); written in rounds.
	writeLow
	// writeRest: any other change; written after the new holders.
	writeRest
)

// classifyWrite says how the pass writes a claim that it read as before and leaves as after.
func classifyWrite(before, after *locksv1alpha1.LockClaim) writeClass {
	switch {
	case !after.DeletionTimestamp.IsZero() && !isHeld(after):
		return writeGone
	case sameClaimStatus(&before.Status, &after.Status):
		return writeNothing
	case isHeld(before) && !isHeld(after):
		return writeEnded
	case !isHeld(before) && isHeld(after):
		return writeGranted
	case lowPriority(&before.Status, &after.Status):
		return writeLow
	}
	return writeRest
}

// endWait ends the wait of a claim that holds nothing (holds end in endClaim, which also stops
// their renewal).
func endWait(c *locksv1alpha1.LockClaim, end *ending, now time.Time) {
	markEnded(c, end.phase, end.reason, end.message, now)
}

// overQueue splits queue (in queue order) into the claims that wait and those that maxQueue
// (nil: no limit) refuses: the new claims (never given a status) for which the queue has no room
// once the claims already waiting are counted. A claim already waiting keeps its place whatever
// the limit, so that lowering it refuses only newcomers; a newcomer may sort ahead of one (claims
// created in the same second are ordered by name), so the room is what those leave, not a place.
func overQueue(queue []*queued, maxQueue *int32) (waiting, refused []*queued) {
	if maxQueue == nil {
		return queue, nil
	}
	room := int(*maxQueue)
	for _, q := range queue {
		if q.claim.Status.Phase != "" {
			room--
		}
	}
	waiting = queue[:0:0]
	for _, q := range queue {
		if q.claim.Status.Phase == "" {
			if room <= 0 {
				refused = append(refused, q)
				continue
			}
			room--
		}
		waiting = append(waiting, q)
	}
	return waiting, refused
}

// queueFullEnding is how a claim ends that lock's maxQueue refused.
func queueFullEnding(lock string, maxQueue int32) *ending {
	return &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonQueueFull,
		message: fmt.Sprintf("Lock %s's queue is full (maxQueue %d); create the claim again once it is shorter", lock, maxQueue)}
}

// timedOutEnding is how a claim ends whose wait is over.
func timedOutEnding(waitTimeoutSeconds int32) *ending {
	return &ending{phase: locksv1alpha1.ClaimTimedOut, reason: locksv1alpha1.ReasonWaitTimedOut,
		message: fmt.Sprintf("Gave up after waitTimeoutSeconds=%d", waitTimeoutSeconds)}
}

// lowPriority says whether a claim's status change is one no client waits for: a queued claim
// whose place or wording changed, for the same reason. (A new claim's first status, and a switch
// between Queued and Contended, are written at once.)
func lowPriority(before, after *locksv1alpha1.LockClaimStatus) bool {
	queued := func(st *locksv1alpha1.LockClaimStatus) bool {
		if st.Phase != locksv1alpha1.ClaimPending {
			return false
		}
		reason := acquiredReason(st)
		return reason == locksv1alpha1.ReasonQueued || reason == locksv1alpha1.ReasonContended
	}
	return queued(after) && queued(before) && acquiredReason(before) == acquiredReason(after)
}

// acquiredReason is the reason of a claim status's Acquired condition.
func acquiredReason(st *locksv1alpha1.LockClaimStatus) string {
	for _, c := range st.Conditions {
		if c.Type == locksv1alpha1.ConditionAcquired {
			return c.Reason
		}
	}
	return ""
}

// unusableReason is the reason a waiting claim shows for a backend it cannot use: mistakes to
// fix keep their own reason, so that clients (lockctl) can fail fast on them; everything else is
// an outage to wait out.
func unusableReason(u *registry.UnusableError) string {
	switch u.Reason {
	case locksv1alpha1.ReasonBackendNotFound, locksv1alpha1.ReasonNamespaceNotAllowed, locksv1alpha1.ReasonKeyConflict:
		return u.Reason
	}
	return locksv1alpha1.ReasonBackendUnavailable
}

// inQueueOrder orders the claims of one lock: by priority, then by arrival (queueOrder).
func inQueueOrder(claims []*locksv1alpha1.LockClaim) []*locksv1alpha1.LockClaim {
	out := slices.Clone(claims)
	slices.SortStableFunc(out, queueOrder)
	return out
}

// queuedMessage says that a claim waits in the queue. It names neither the holder nor the place:
// both change at every handoff, and a message that said them would cost every waiter a write per
// handoff. The lock's status and columns show the holders; status.queuePosition the place.
func queuedMessage(holders []locksv1alpha1.LockHolder) string {
	if len(holders) == 0 {
		return "Waiting in the queue for the claims ahead to be served; status.queuePosition is the place, in bands"
	}
	return "Waiting in the queue while the lock is held (the DistributedLock's status.holders names the holders); status.queuePosition is the place, in bands"
}

// refreshMargin is how long before a held claim's status.expireTime passes the claim is rewritten
// from the Renewer's latest confirmation: an eighth of the lease. The Renewer confirms a hold every
// sixth of a lease (renewal.Interval), so an expireTime written from a renewal at R falls due at
// R + 7/8 lease, a twenty-fourth of a lease after the renewal at R + 5/6 lease: that renewal has
// landed, and the write moves expireTime five sixths of a lease on (1.2 writes per held claim per
// lease; a write due exactly at a renewal would race it, and each lost race moves expireTime a
// sixth less). The eighth left before expiry is the time the write has to land. Exactly one write
// per lease cannot keep expireTime in the future: see docs/how-locks-work.md.
func refreshMargin(ttl time.Duration) time.Duration { return ttl / 8 }

// refreshDue says whether a held claim's status.expireTime must be moved forward now: once it is
// within refreshMargin of passing, or was never written.
func refreshDue(expire *time.Time, ttl time.Duration, now time.Time) bool {
	return expire == nil || expire.Sub(now) <= refreshMargin(ttl)
}

// refreshWait is how long until the lock's pass must look again at a held claim whose
// status.expireTime is expire (after this pass's refresh, if it wrote one): until the refresh falls
// due; or, for one due that this pass could not move (the renewal before it is late, or failing),
// a twenty-fourth of the lease (at least 100 ms), about three more looks before expiry. A failing
// renewal ends the hold through the Renewer, not here.
func refreshWait(expire time.Time, ttl time.Duration, now time.Time) time.Duration {
	if wait := expire.Add(-refreshMargin(ttl)).Sub(now); wait > 0 {
		return wait
	}
	return max(ttl/24, 100*time.Millisecond)
}

// waitingCountDelay is how long a change of the lock's waiting count alone (a claim queued or gone
// while nothing else changed) is held back and folded with the next ones: the count is written
// anyway with every lock record write, a handoff's included.
const waitingCountDelay = 5 * time.Second

// positionsDelay is how long the waiters' low-priority changes (a queue position that moved into
// another band, the wording of a Contended wait) are held back and folded together: at most one
// round of them a minute per lock, so that a handoff costs no write to the claims that wait, and
// a busy lock's waiters are not each rewritten at every handoff (docs/how-locks-work.md).
const positionsDelay = time.Minute

// lowPriorityDue decides, for a lock whose pass has low-priority changes held back for delay,
// whether to write them now. dirtySince is when such changes were first held back (zero: not
// yet). It returns whether to write, and when to look again if not.
func lowPriorityDue(dirtySince, now time.Time, delay time.Duration) (write bool, wait time.Duration) {
	if dirtySince.IsZero() {
		return false, delay
	}
	if due := dirtySince.Add(delay); now.Before(due) {
		return false, due.Sub(now)
	}
	return true, 0
}

// positionBand is the band of queue positions that a position belongs to: 1, 2–3, 4–7, 8–15, and
// so on (0, no place, is a band of its own).
func positionBand(p int32) int { return bits.Len32(uint32(max(p, 0))) }

// shownPosition is the queue position a waiting claim's status shows, given the one last written
// and its place now: the written one while its place stays in the same band, else its place now.
// A handoff moves every waiter up one place; rewritten exactly, each waiter would cost a write per
// handoff (99 on a lock with 100 claims). In bands, a handoff moves about log₂ of the waiters
// into a new band, and those writes wait for the next round (positionsDelay).
func shownPosition(written, now int32) int32 {
	if written > 0 && now > 0 && positionBand(written) == positionBand(now) {
		return written
	}
	return now
}

// soonest keeps the shorter of two waits, zero meaning none.
func soonest(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// Grants. Which waiting claims a pass may try to grant, as a pure function of the
// queue, the current holds and the lock's number of places (grants_test.go). The rules
// (docs/design.md §3 "Grant"):
//   - strict queue order across modes: a claim is tried only if every claim ahead of it is granted in
//     the same pass;
//   - an Exclusive claim is granted only into an empty lock, and holds it alone;
//   - the run of Shared claims at the head of the queue is granted together while places are
//     free; an Exclusive claim in the queue blocks every claim behind it, so that a stream of
//     readers cannot starve a writer;
//   - on a lock of one place every hold is exclusive, whatever the claims asked for;
//   - a lock whose places were lowered below its holders grants nothing until enough have left.
//
// A claim whose holder does not exist yet (a pod or heartbeat Lease never seen) is not in the
// queue at all: it waits aside, so that it never blocks the claims behind it (serveQueue).

// grantMode is how a claim holds, or would hold, a lock.
type grantMode int

const (
	// grantShared takes one of the lock's places beside other Shared holders.
	grantShared grantMode = iota
	// grantExclusive holds the lock alone.
	grantExclusive
)

// effectiveMode is how a claim that asks for mode exclusive (or not) holds a lock of maxHolders
// places: a lock of one place has no room for sharing.
func effectiveMode(exclusive bool, maxHolders int32) grantMode {
	if exclusive || maxHolders <= 1 {
		return grantExclusive
	}
	return grantShared
}

// waiterSlot is what planGrants needs of one waiting claim.
type waiterSlot struct {
	mode grantMode
	// identity is the holder identity the claim would hold with: claims of one identity share
	// one place.
	identity string
}

// holdSlot is what planGrants needs of one current hold.
type holdSlot struct {
	mode     grantMode
	identity string
}

// planGrants returns how many claims from the head of queue the pass tries to grant, in order:
// it stops at the first that the rules above refuse, and so does the pass at the first its
// backend refuses.
func planGrants(queue []waiterSlot, holds []holdSlot, maxHolders int32) int {
	places := int(max(maxHolders, 1))
	taken := map[string]bool{}
	for _, h := range holds {
		if h.mode == grantExclusive {
			return 0
		}
		taken[h.identity] = true
	}
	n := 0
	for _, w := range queue {
		if w.mode == grantExclusive {
			if n == 0 && len(taken) == 0 {
				n = 1
			}
			break
		}
		if !taken[w.identity] && len(taken) >= places {
			break
		}
		taken[w.identity] = true
		n++
	}
	return n
}

// Status. What a claim's and a lock's status say, and which event a claim's transition emits:
// setters and conditions that never call the API (the write steps send what they leave).

// isFinal says whether a claim's phase can no longer change.
func isFinal(p locksv1alpha1.ClaimPhase) bool {
	switch p {
	case locksv1alpha1.ClaimReleased, locksv1alpha1.ClaimLost, locksv1alpha1.ClaimTimedOut, locksv1alpha1.ClaimFailed:
		return true
	}
	return false
}

// isHeld says whether a claim holds its lock (a claim being deleted holds it until its pass has
// released it).
func isHeld(c *locksv1alpha1.LockClaim) bool { return c.Status.Phase == locksv1alpha1.ClaimHeld }

// queueOrder orders a lock's claims: by priority, then by arrival (locksv1alpha1.QueueOrder).
func queueOrder(a, b *locksv1alpha1.LockClaim) int { return locksv1alpha1.QueueOrder(a, b) }

// stampArrival records a claim's arrival in the status a pass is about to write, if this is the
// claim's first status write: the resourceVersion of the claim as read (before), on which the
// write is preconditioned. A claim whose status an earlier version wrote gets none (queueOrder).
func stampArrival(before, c *locksv1alpha1.LockClaim) {
	if c.Status.Arrival != 0 || before.Status.Arrival != 0 || before.Status.Phase != "" {
		return
	}
	if rv, ok := locksv1alpha1.ResourceVersionNumber(before.ResourceVersion); ok {
		c.Status.Arrival = rv
	}
}

// placedByVersion says whether c's place in its queue is still read from its resourceVersion:
// no status write has stamped its arrival (stampArrival), so any write of it moves it back.
func placedByVersion(c *locksv1alpha1.LockClaim) bool {
	return c.Status.Arrival == 0 && c.Status.Phase == ""
}

// setClaimConditions sets Acquired and Ready. Acquired is True exactly while held.
func setClaimConditions(c *locksv1alpha1.LockClaim, acquired, ready bool, reason, message string) {
	status := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
		Type: locksv1alpha1.ConditionAcquired, Status: status(acquired), Reason: reason, Message: message,
		ObservedGeneration: c.Generation,
	})
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
		Type: locksv1alpha1.ConditionReady, Status: status(ready), Reason: reason, Message: message,
		ObservedGeneration: c.Generation,
	})
	c.Status.ObservedGeneration = c.Generation
}

// markWaiting records a claim that waits for its lock: queued behind others, contended by a
// client outside lockwarden, or (ready=false) blocked by a missing lock, pod or backend.
func markWaiting(c *locksv1alpha1.LockClaim, position int32, ready bool, reason, message string) {
	c.Status.Phase = locksv1alpha1.ClaimPending
	c.Status.QueuePosition = position
	setClaimConditions(c, false, ready, reason, message)
}

// markHeld records a grant to the holder identity id (the lease's identity is the value on the
// backend, derived from it).
func markHeld(c *locksv1alpha1.LockClaim, id string, lease backends.Lease, token int64, now time.Time) {
	c.Status.Phase = locksv1alpha1.ClaimHeld
	c.Status.HolderIdentity = id
	c.Status.FencingToken = token
	c.Status.AcquireTime = micro(now)
	c.Status.RenewTime = micro(now)
	c.Status.ExpireTime = micro(lease.ExpireTime)
	c.Status.LeaseDurationSeconds = int32(lease.TTL / time.Second)
	c.Status.QueuePosition = 0
	c.Status.ReleaseTime = nil
	setClaimConditions(c, true, true, locksv1alpha1.ReasonAcquired,
		fmt.Sprintf("Held with fencing token %d", token))
}

// markRenewed moves a held claim's renew and expire times forward.
func markRenewed(c *locksv1alpha1.LockClaim, renewTime, expireTime time.Time) {
	c.Status.RenewTime = micro(renewTime)
	c.Status.ExpireTime = micro(expireTime)
}

// markEnded records the end of a claim in a final phase.
func markEnded(c *locksv1alpha1.LockClaim, phase locksv1alpha1.ClaimPhase, reason, message string, now time.Time) {
	if isHeld(c) {
		c.Status.ReleaseTime = micro(now)
	}
	c.Status.Phase = phase
	c.Status.QueuePosition = 0
	setClaimConditions(c, false, false, reason, message)
}

func micro(t time.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t)
	return &m
}

// setLockConditions sets BackendReady from the backend check (nil problem = usable) and Ready:
// claims on it can be granted, which takes a usable backend and a key no other lock took first
// (nil conflict).
func setLockConditions(lock *locksv1alpha1.DistributedLock, problem, conflict *registry.UnusableError, backendName string) {
	cond := metav1.Condition{
		Type:               locksv1alpha1.ConditionBackendReady,
		Status:             metav1.ConditionTrue,
		Reason:             locksv1alpha1.ReasonBackendReachable,
		Message:            "Backend " + backendName + " is ready",
		ObservedGeneration: lock.Generation,
	}
	if problem != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, problem.Reason, problem.Message
	}
	meta.SetStatusCondition(&lock.Status.Conditions, cond)
	cond.Type = locksv1alpha1.ConditionReady
	if problem == nil && conflict != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, conflict.Reason, conflict.Message
	}
	meta.SetStatusCondition(&lock.Status.Conditions, cond)
	lock.Status.ObservedGeneration = lock.Generation
}

// transitionEvent says which event, if any, a claim's change of phase deserves: one per
// transition, none for waiting in a queue (which is not news) and none for a refresh. Its reason
// is the Acquired condition's reason.
func transitionEvent(st *locksv1alpha1.LockClaimStatus) (eventType, reason, message string, ok bool) {
	for _, cond := range st.Conditions {
		if cond.Type == locksv1alpha1.ConditionAcquired {
			reason, message = cond.Reason, cond.Message
		}
	}
	switch st.Phase {
	case locksv1alpha1.ClaimLost, locksv1alpha1.ClaimFailed, locksv1alpha1.ClaimTimedOut:
		return corev1.EventTypeWarning, reason, message, true
	case locksv1alpha1.ClaimPending:
		if reason == locksv1alpha1.ReasonQueued || reason == locksv1alpha1.ReasonContended {
			return "", "", "", false
		}
		// The claim cannot proceed: lock, pod or backend missing.
		return corev1.EventTypeWarning, reason, message, true
	}
	return corev1.EventTypeNormal, reason, message, true
}

// Rounds of low-priority writes (lowpriority.go): which claims a pass writes now.

// pickLowBatch returns up to n claims of low that are pending, in the order of queue (claims not
// in the queue last).
func pickLowBatch(queue, low []*locksv1alpha1.LockClaim, pending map[types.UID]bool, n int) []*locksv1alpha1.LockClaim {
	isLow := map[types.UID]*locksv1alpha1.LockClaim{}
	for _, c := range low {
		if pending[c.UID] {
			isLow[c.UID] = c
		}
	}
	var out []*locksv1alpha1.LockClaim
	for _, c := range queue {
		if len(out) == n {
			return out
		}
		if isLow[c.UID] != nil {
			out = append(out, c)
			delete(isLow, c.UID)
		}
	}
	for _, c := range low {
		if len(out) == n {
			break
		}
		if isLow[c.UID] != nil {
			out = append(out, c)
		}
	}
	return out
}

// trimRound removes from pending the claims written and those that have no low-priority change
// left (granted, ended, gone), and returns how many remain.
func trimRound(pending map[types.UID]bool, low, written []*locksv1alpha1.LockClaim) int {
	stillLow := map[types.UID]bool{}
	for _, c := range low {
		stillLow[c.UID] = true
	}
	for _, c := range written {
		delete(stillLow, c.UID)
	}
	for uid := range pending {
		if !stillLow[uid] {
			delete(pending, uid)
		}
	}
	return len(pending)
}
