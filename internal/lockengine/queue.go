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
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/fencing"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// This file is the waiting half of a pass: who waits and in what order (queueOf, the one
// definition of the queue, which a joint grant reads other locks through too), what becomes of
// each waiting claim before any grant (queueClaims), the grants to the head of the queue
// (serveQueue; the backend call is grant.go's), and the status of those that wait on. The order
// itself is api/v1alpha1's QueueOrder: priority, then arrival.

// freeWatchFallback is how often a lock whose head is contended, on a backend that watches the
// contended key, looks again anyway, in case the news of a release is lost (a watch dropped
// without a word).
const freeWatchFallback = 30 * time.Second

// queued is a claim that waits in the queue, with what the pass found about it.
type queued struct {
	claim *locksv1alpha1.LockClaim
	// tried: it was the head and the pass tried the backend for it (its status says how that went).
	tried bool
}

// aside is a claim that waits outside the queue for its holder to exist.
type aside struct {
	claim   *locksv1alpha1.LockClaim
	missing missingHolder
}

// waitingLine is the lock's waiting claims as queueOf sorts them, before any grant.
type waitingLine struct {
	// judged are the claims that wait, in queue order, each with its holder's verdict and the
	// live hold it may share.
	judged []judgedWaiter
	// queue are the claims that wait in the queue, in order, within the lock's maxQueue; refused
	// are those beyond it.
	queue, refused []*queued
}

// judgedWaiter is one waiting claim with what becomes of it: its holder's verdict (its wait ends,
// it waits aside, or neither), and the live hold it joins, if any (reentrancy).
type judgedWaiter struct {
	claim   *locksv1alpha1.LockClaim
	verdict waiterVerdict
	join    *joinable
}

// joinable is a live hold a waiting claim may share: its record entry and the Renewer's hold.
type joinable struct {
	rec  *locksv1alpha1.LockHolder
	hold renewal.Hold
}

// queueOf sorts the lock's waiting claims: those that wait in the queue, in order; those whose
// wait ends now; those that wait aside for their holder; those that join a live hold. It writes
// nothing, so a joint grant reads another lock's queue through it as that lock's own pass would.
func (r *Reconciler) queueOf(s *lockScope) waitingLine {
	var line waitingLine
	var queue []*queued
	for _, c := range s.claims {
		if isHeld(c) || isFinal(c.Status.Phase) || !c.DeletionTimestamp.IsZero() || s.givingBack(c) {
			continue
		}
		j := judgedWaiter{claim: c, verdict: s.judgeWaiting(c)}
		if j.verdict.end == nil && j.verdict.missing == nil {
			if j.join = r.joinable(s, c); j.join == nil {
				queue = append(queue, &queued{claim: c})
			}
		}
		line.judged = append(line.judged, j)
	}
	line.queue, line.refused = overQueue(queue, s.lock.Spec.MaxQueue)
	return line
}

// queueClaims applies what queueOf found: a holder's UID seen for the first time is recorded,
// waits that end are ended (the lock is going, the holder died, maxQueue is full), claims whose
// holder does not exist yet wait aside (not in the queue, so they block nobody), reentrant claims
// join the hold. The queue and the claims its pass may grant one by one (lineUp) are kept for
// the grant steps.
func (r *Reconciler) queueClaims(_ context.Context, s *lockScope) (stepResult, error) {
	line := r.queueOf(s)
	var asides []aside
	for _, j := range line.judged {
		c := j.claim
		if j.verdict.seen != "" {
			holderOf(c).noteUID(c, j.verdict.seen)
		}
		switch {
		case j.verdict.end != nil:
			endWait(c, j.verdict.end, s.now)
		case j.verdict.missing != nil:
			m := *j.verdict.missing
			m.created = c.CreationTimestamp.Time
			asides = append(asides, aside{claim: c, missing: m})
		case j.join != nil:
			r.join(s, c, j.join)
		}
	}
	for _, q := range line.refused {
		endWait(q.claim, queueFullEnding(s.lock.Name, *s.lock.Spec.MaxQueue), s.now)
	}
	s.queue = line.queue
	s.line, s.ready = s.lineUp(line.queue)
	return after(r.markAside(s, asides)), nil
}

// grantable says whether the pass may grant at all: the lock is not going, its backend is usable
// and its key is its own (not taken just now: the next pass grants), and no lock delay runs.
func (s *lockScope) grantable() bool {
	return s.lock.DeletionTimestamp.IsZero() && s.use.session != nil && s.use.conflict == nil && !s.use.keyTaken && s.lockDelay() == 0
}

// serveQueue tries the backend for the head of the queue when the lock is free for it: as many
// claims as planGrants says may share it, within the tokens one write issues; then it marks the
// claims that go on waiting.
func (r *Reconciler) serveQueue(ctx context.Context, s *lockScope) (stepResult, error) {
	delay := s.lockDelay()
	res := after(delay)
	planned := 0
	if s.grantable() {
		// One write issues at most fencing.PerWrite tokens; the rest are granted by the next pass.
		planned = min(seams.planGrants(s.waiterSlots(s.line), s.holdSlots(), s.maxHolders()), fencing.PerWrite-len(s.grants))
	}
	for tried := 0; tried < planned; {
		q := s.line[tried]
		if s.grantedIdentity(s.identityOf(q.claim)) {
			// It shares a place granted in this pass, whose token is not issued yet: it joins
			// the hold in the next pass, and those behind it wait for that.
			res = res.wakeIn(time.Millisecond)
			break
		}
		q.tried = true
		tried++
		granted, out, err := r.tryGrant(ctx, s, q.claim)
		res = res.merge(out)
		if err != nil {
			return res, err
		}
		if !granted {
			break
		}
	}
	return res.wakeIn(r.markQueue(s, notGranted(s.queue, grantedClaims(s.grants)), delay > 0)), nil
}

// grantedClaims are the claims of grants.
func grantedClaims(grants []grant) []*locksv1alpha1.LockClaim {
	out := make([]*locksv1alpha1.LockClaim, len(grants))
	for i, g := range grants {
		out[i] = g.claim
	}
	return out
}

// notGranted is the queue without the claims granted (by UID).
func notGranted(queue []*queued, granted []*locksv1alpha1.LockClaim) []*queued {
	if len(granted) == 0 {
		return queue
	}
	mine := make(map[types.UID]bool, len(granted))
	for _, c := range granted {
		mine[c.UID] = true
	}
	rest := make([]*queued, 0, len(queue))
	for _, q := range queue {
		if !mine[q.claim.UID] {
			rest = append(rest, q)
		}
	}
	return rest
}

// holdToJoin is the recorded hold that waiting claim c may join: the one of c's identity, if its
// holder is c's too (docs/design.md §2, spec.holder.identity). An identity is readable in the
// lock's status, so it alone would let anyone who may create a claim copy it and be handed another
// pod's live hold and token; the holder (the same pod, with its UID; the same Lease or object;
// or both detached) is what a claim cannot borrow.
func holdToJoin(s *lockScope, c *locksv1alpha1.LockClaim) *locksv1alpha1.LockHolder {
	rec := s.recordOf(s.identityOf(c))
	if rec == nil || !sameHolder(rec.Holder, s.recordedHolderOf(c)) {
		return nil
	}
	return rec
}

// joinable is the live hold waiting claim c may share, with the identity and holder of a current
// hold (reentrancy); nil for none. An Exclusive claim cannot join a Shared place: that would make
// a reader a writer beside the other readers. A claim of several locks never joins (mayJoin).
func (r *Reconciler) joinable(s *lockScope, c *locksv1alpha1.LockClaim) *joinable {
	if !s.base(c.UID).mayJoin() {
		return nil
	}
	rec := seams.holdToJoin(s, c)
	if rec == nil || (recordShared(rec) && s.claimMode(c) == grantExclusive) {
		return nil
	}
	h, ok := r.Renewer.Lookup(s.holdKey(rec.Identity))
	if !ok || h.Lost {
		return nil
	}
	return &joinable{rec: rec, hold: h}
}

// join makes waiting claim c share hold j and its token.
func (r *Reconciler) join(s *lockScope, c *locksv1alpha1.LockClaim, j *joinable) {
	r.Renewer.Track(s.use.name, s.use.session, j.hold.Lease, client.ObjectKeyFromObject(c))
	markHeld(c, j.rec.Identity, j.hold.Lease, j.rec.FencingToken, s.now)
	s.holders = append(s.holders, c)
}

// waitOver says whether the waitTimeoutSeconds of c has run out, and otherwise how long until it
// does (0: it waits for ever).
func (s *lockScope) waitOver(c *locksv1alpha1.LockClaim) (bool, time.Duration) {
	deadline, ok := waitDeadline(c)
	switch {
	case !ok:
		return false, 0
	case !s.now.Before(deadline):
		return true, 0
	}
	return false, deadline.Sub(s.now)
}

// endTimedOut ends the wait of c, whose waitTimeoutSeconds ran out.
func endTimedOut(s *lockScope, c *locksv1alpha1.LockClaim) {
	endWait(c, timedOutEnding(*c.Spec.WaitTimeoutSeconds), s.now)
}

// markQueue sets the status of the claims that go on waiting, ends those whose wait is over, and
// says when the next deadline is.
func (r *Reconciler) markQueue(s *lockScope, queue []*queued, delayed bool) time.Duration {
	holders := s.lock.Status.Holders
	var position int32
	var next time.Duration
	for _, q := range queue {
		c := q.claim
		// A pass that only took the lock's key tried no claim: the next one, a tenth of a second
		// later, does. Ending a wait now would time out a waitTimeoutSeconds 0 claim on a free
		// lock without having tried it.
		if !s.use.keyTaken {
			over, left := s.waitOver(c)
			if over {
				endTimedOut(s, c)
				continue
			}
			next = soonest(next, left)
		}
		position++
		// A claim the pass tried the backend for says how that went. A pass that just took the
		// lock's key grants nothing only for that: the next pass, about a tenth of a second
		// later, grants and places the waiters behind; a place written now would be out of
		// date by then, and would cost a write per waiter of a new lock.
		if !q.tried && !s.use.keyTaken && s.base(c.UID).writesWait(s.name.Name) {
			w := waitingStatus(waiterPlace{position: position, holders: holders, unusable: s.use.unusable, conflict: s.use.conflict,
				delayed: delayed, delayUntil: s.lock.Status.LockDelayUntil, delaySeconds: s.lock.Spec.LockDelaySeconds})
			markWaiting(c, shownPosition(s.before(c.UID).Status.QueuePosition, w.position), w.ready, w.reason, w.message)
		}
		s.waiters = append(s.waiters, c)
	}
	return next
}

// markAside sets the status of the claims that wait aside for a holder that does not exist yet,
// and ends those whose wait is over: their own waitTimeoutSeconds, or holderMissingLimit. They
// have no place in the queue (position 0), and the lock's waiting count leaves them out.
func (r *Reconciler) markAside(s *lockScope, asides []aside) time.Duration {
	var next time.Duration
	for _, a := range asides {
		c := a.claim
		over, left := s.waitOver(c)
		if over {
			endTimedOut(s, c)
			continue
		}
		end, message, wait := judgeMissingHolder(a.missing, s.now)
		if end != nil {
			endWait(c, end, s.now)
			continue
		}
		next = soonest(next, soonest(left, wait))
		markWaiting(c, 0, false, a.missing.reason, message)
	}
	return next
}

// waitDeadline is when claim c stops waiting (waitTimeoutSeconds after its creation); false when
// it waits for ever.
func waitDeadline(c *locksv1alpha1.LockClaim) (time.Time, bool) {
	if c.Spec.WaitTimeoutSeconds == nil {
		return time.Time{}, false
	}
	return c.CreationTimestamp.Add(time.Duration(*c.Spec.WaitTimeoutSeconds) * time.Second), true
}
