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

package reliability

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// KeyState is the backend's own view of one lock key from some moment on, as the observer read
// it through the backend's protocol (a direct connection no fault proxy touches).
type KeyState struct {
	// At is when the key was first seen in this state.
	At time.Time
	// Known is false while the backend could not be read (paused, killed, partitioned from the
	// harness): the state says nothing then.
	Known bool
	// Holder and Places say who holds the key, as in BackendView: Places every identity that
	// holds a place, sorted (nil when none does), Holder the exclusive holder when it is not
	// among Places, else the first place; both empty when the key is free.
	Holder string
	Places []string
	// Polled marks a state that reads found, as opposed to one a watch pushed. A watch event
	// holds until the next event; a read proves its state only at some instant while the read
	// ran. A read that began before a handoff and was slow (a Redlock read waits readTimeout for
	// a node that is down) shows the old holder well after the new one was seen Held, so a
	// polled state is taken to hold only from At to Confirmed, the start of the last read that
	// found it.
	Polled bool
	// Confirmed is set by Add for polled states.
	Confirmed time.Time
	// Revision is, for a state a watch of the built-in backend's records pushed, the record's
	// resourceVersion (an etcd revision, in the same order as the claims' writes); 0 otherwise.
	Revision int64
}

// KeyTimeline is a key's states in the order they were seen; a state lasts until the next.
// The observer adds a state only when it differs from the last.
type KeyTimeline struct {
	Lock, Key string
	States    []KeyState
	// End is when observation stopped: the last state lasts until then.
	End time.Time
	// Overlaps are moments at which the backend itself showed two identities holding the key at
	// once (a watch event that replaced one holder's value with another's while the first held
	// it); only stores the observer watches can show this.
	Overlaps []string
}

// view is the state as a BackendView.
func (s KeyState) view() BackendView {
	return BackendView{Known: s.Known, Held: s.Holder != "", Holder: s.Holder, Places: s.Places}
}

// Add records state s at s.At if it differs from the last one; a polled state that repeats the
// last one moves its Confirmed to s.At. A watched state after a polled one with the same holder
// is recorded, since it says more: the holder held from then on.
func (tl *KeyTimeline) Add(s KeyState) {
	if n := len(tl.States); n > 0 {
		last := &tl.States[n-1]
		if last.Known == s.Known && last.Holder == s.Holder && slices.Equal(last.Places, s.Places) && (s.Polled || !last.Polled) {
			if last.Polled {
				last.Confirmed = maxTime(last.Confirmed, s.At)
			}
			return
		}
	}
	if s.Polled {
		s.Confirmed = s.At
	}
	tl.States = append(tl.States, s)
}

// ViewGrace is the one mismatch the backend-view check allows: a claim may still show Held
// while the backend key is already held by its successor (a later grant of the same lock) only
// because the controller writes the backend first and the claim's end after it (docs/design.md §3:
// release, grant, lock record, claims). The claim's end must then be observed within this bound
// of the first moment the mismatch was seen; the bound covers the writes of one pass under the
// harness's slowest link (300 ms each way on the leader's API link). A key held by anyone else (a
// client outside the queue, an earlier holder) gets no grace.
const ViewGrace = 2 * time.Second

// ViewCheck is what CheckBackendView found.
type ViewCheck struct {
	// Violations, one line each: a claim Held while the backend held its key for another
	// identity for longer than ViewGrace (or without ever ending), and every overlap the
	// timelines recorded.
	Violations []string
	// Allowed counts mismatches within the grace, and Longest is the longest of them.
	Allowed int
	Longest time.Duration
}

// CheckBackendView checks every Held interval of the grants (from first seen Held to first
// seen ended; until the end of observation if it never ended) against the timeline of the
// lock's key: while a claim is Held, the backend must not hold the key against it for another
// identity beyond grace (BackendView.excluders: an exclusive holder excludes every other hold,
// and a place excludes an exclusive hold of another identity). A free key is not judged here
// (the sampler's phantom check does, with the grace a data-losing store needs), nor is a shared
// claim's missing place while others hold theirs; an unreadable backend says nothing.
func CheckBackendView(timelines []KeyTimeline, grants []Grant, grace time.Duration) ViewCheck {
	var out ViewCheck
	byLock := map[string][]Grant{}
	// tokenOf is, per lock, the highest token granted to each identity: the grace is for a
	// successor (a later grant of the same lock) only, never for a holder outside the queue.
	tokenOf := map[string]map[string]int64{}
	for _, g := range grants {
		if !g.Acquired.IsZero() && g.Identity != "" {
			byLock[g.Lock] = append(byLock[g.Lock], g)
			if tokenOf[g.Lock] == nil {
				tokenOf[g.Lock] = map[string]int64{}
			}
			tokenOf[g.Lock][g.Identity] = max(tokenOf[g.Lock][g.Identity], g.Token)
		}
	}
	for _, tl := range timelines {
		out.Violations = append(out.Violations, tl.Overlaps...)
		for _, g := range byLock[tl.Lock] {
			end := g.Released
			if end.IsZero() {
				end = tl.End
			}
			start := maxTime(g.Acquired, arrivalOfStateAt(tl, g.HeldRevision))
			// Walk the states that overlap [Acquired, end), merging consecutive foreign ones into
			// one mismatch [since, until].
			var since, until time.Time // since is zero when there is no mismatch
			var foreign []string       // every identity that held the key against g in it
			report := func(ended bool) {
				if since.IsZero() {
					return
				}
				d := until.Sub(since)
				successor := !slices.ContainsFunc(foreign, func(id string) bool { return tokenOf[tl.Lock][id] <= g.Token })
				if ended && successor && d < grace {
					out.Allowed++
					out.Longest = max(out.Longest, d)
				} else {
					how := fmt.Sprintf("for %s", d.Round(time.Millisecond))
					if !ended {
						how += " and it did not end with the claim"
					}
					out.Violations = append(out.Violations, fmt.Sprintf("lock %s: claim %s (token %d, identity %s, %s) was Held while the backend held key %s for %s, from %s %s",
						tl.Lock, g.Claim, g.Token, g.Identity, modeWord(g), tl.Key, strings.Join(foreign, ", "), since.Format(time.StampMilli), how))
				}
				since, foreign = time.Time{}, nil
			}
			for i, s := range tl.States {
				stop := tl.End
				if i+1 < len(tl.States) {
					stop = tl.States[i+1].At
				}
				from, to := maxTime(s.At, start), minTime(stop, end)
				against := s.view().excluders(g.Identity, g.Exclusive)
				isForeign := len(against) > 0
				if isForeign && s.Polled {
					// Proven only at the reads: from the first to the last that found it. One
					// read that began inside the Held interval is enough.
					to = minTime(s.Confirmed, end)
					if from.After(to) || !from.Before(end) {
						continue
					}
				} else if !from.Before(to) {
					continue
				}
				switch {
				case !s.Known:
					// Unknown: neither starts nor ends a mismatch.
				case isForeign:
					if since.IsZero() {
						since = from
					}
					for _, id := range against {
						if !slices.Contains(foreign, id) {
							foreign = append(foreign, id)
						}
					}
					until = to
				default:
					report(false)
				}
			}
			report(!g.Released.IsZero())
		}
	}
	return out
}

// arrivalOfStateAt is when the record watch delivered the key's state as of revision (the
// latest watched state written before it), or zero when revision or the states' revisions are
// unknown. The claim watch and the record watch are two streams, and the API server does not
// order deliveries across them: a claim's Held, written after the record that grants it, can
// arrive a few milliseconds before that record (the harness saw 1 ms on a busy machine), which
// by arrival times alone would look like the claim Held while the record still named its
// predecessor. Both writes carry revisions of the one etcd, so a claim is judged against the
// record only from when the observer learned the record as it was at the claim's write. A
// record that really changes after the claim's Held has a later revision and is still judged
// from the claim's arrival.
func arrivalOfStateAt(tl KeyTimeline, revision int64) time.Time {
	var at time.Time
	if revision <= 0 {
		return at
	}
	for _, s := range tl.States {
		if s.Revision > 0 && s.Revision < revision {
			at = maxTime(at, s.At)
		}
	}
	return at
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// CheckFinalIsFinal checks that no claim was seen Held again after it was seen in a final phase
// (Released, Lost, Failed, TimedOut): an end is for ever, whatever a late writer (a deposed
// leader, a stale cache) sends. One line per claim.
func CheckFinalIsFinal(grants []Grant) []string {
	var out []string
	for _, g := range grants {
		if !g.HeldAgain.IsZero() {
			out = append(out, fmt.Sprintf("lock %s: claim %s was seen %s at %s and Held again at %s (token %d)",
				g.Lock, g.Claim, g.Phase, g.Released.Format(time.StampMilli), g.HeldAgain.Format(time.StampMilli), g.HeldAgainToken))
		}
	}
	return out
}

// StaleWrites sorts the writes made after the writer's hold ended (its claim was seen ended, or
// a grant with a higher token was seen) by what the fenced register did with them.
type StaleWrites struct {
	// Rejected: the register had already accepted a higher token, and refused the write.
	Rejected int
	// InWindow: the register accepted it because no newer holder had written yet. This is the
	// window that fencing cannot close: a resource can only refuse a token once it has seen a
	// higher one. docs/reliability.md says so; it is counted, not a violation.
	InWindow int
	// AfterNewer: accepted although the register had accepted a higher token before. Must be 0.
	AfterNewer int
	// HolderRejected: writes of a claim still Held, with no higher grant seen, that the register
	// refused (a newer token reached the resource while the old hold was current). Must be 0.
	HolderRejected int
}

// ClassifyWrites classifies the register's log of one lock against the grants.
func ClassifyWrites(lock string, grants []Grant, log []Write) StaleWrites {
	var out StaleWrites
	byClaim := map[string]Grant{}
	var acquired []Grant
	for _, g := range grants {
		if g.Lock != lock {
			continue
		}
		byClaim[g.Claim] = g
		if !g.Acquired.IsZero() {
			acquired = append(acquired, g)
		}
	}
	var highest int64
	for _, w := range log {
		g := byClaim[w.Writer]
		stale := !g.Released.IsZero() && !w.Call.Before(g.Released)
		for _, o := range acquired {
			if o.Token > w.Token && o.Acquired.Before(w.Call) {
				stale = true
				break
			}
		}
		switch {
		case w.Accepted && w.Token < highest:
			out.AfterNewer++
		case stale && w.Accepted:
			out.InWindow++
		case stale:
			out.Rejected++
		case !w.Accepted:
			out.HolderRejected++
		}
		if w.Accepted {
			highest = max(highest, w.Token)
		}
	}
	return out
}

// LapseGap is how long a hold's key must have been seen gone from the backend before its coming
// back for the same hold counts as a lapsed hold resumed: longer than any stale read (a polled
// read that began before a change and returned after it), far shorter than a failover.
const LapseGap = time.Second

// LapseDisown is how soon after a lapsed hold's key came back the claim must be seen ended for
// the comeback not to count as a resumed hold: a renewal held up by a partition may land on a
// record nobody took meanwhile (ZooKeeper's set by version), and the controller, answered only
// after the hold expired, ends the claim Lost in the pass that follows and lets the key go. A
// claim that ends otherwise in that time (released, its claim deleted) does not go on either. A
// pass and its claim write take milliseconds; 2 s leaves room for a loaded machine, as the
// backend view's grace does. A resumed hold goes on for as long as its holder.
const LapseDisown = 2 * time.Second

// CheckNoResumedLapse checks that a hold the backend let go stays gone: while a claim is Held
// (first seen Held to first seen ended, or to when its holder stopped for good), once the backend has held its key for the claim's
// identity, the key may go to no one else, or be free, for gap or longer and then be held for
// that identity again. A correct controller finds such a hold lapsed when it next looks (a
// renewal answered "lost", or a resume after a restart or a leader change that finds the key
// gone) and ends the claim Lost; taking the key again for it lets a holder go on with its old
// token across a stretch in which anyone may have held the lock (the class of etcd #11456). Once
// the holder has stopped for good, nobody is left to go on: a renewal sent before a partition
// and applied after it, onto a record nobody touched meanwhile (ZooKeeper's set by version), may
// bring back the hold the controller is releasing, and harms no one. Nor is it a resume when the
// claim is seen ended within LapseDisown of the comeback: Lost, the controller disowned what a
// late renewal wrote; released or deleted, the hold ended before it could go on. One line per
// hold.
func CheckNoResumedLapse(timelines []KeyTimeline, grants []Grant, gap time.Duration) []string {
	byLock := map[string][]Grant{}
	for _, g := range grants {
		if !g.Acquired.IsZero() && g.Identity != "" {
			byLock[g.Lock] = append(byLock[g.Lock], g)
		}
	}
	var out []string
	for _, tl := range timelines {
		for _, g := range byLock[tl.Lock] {
			end := g.Released
			if end.IsZero() {
				end = tl.End
			}
			if stopped := holderStoppedAt(g); !stopped.IsZero() {
				end = minTime(end, stopped)
			}
			held := func(s KeyState) bool { return s.Holder == g.Identity || slices.Contains(s.Places, g.Identity) }
			var seenHeld bool
			var goneSince time.Time // zero while the key is held for g (or unknown)
			for i, s := range tl.States {
				stop := tl.End
				if i+1 < len(tl.States) {
					stop = tl.States[i+1].At
				}
				if !stop.After(g.Acquired) || !s.At.Before(end) || !s.Known {
					continue
				}
				switch {
				case held(s) && seenHeld && !goneSince.IsZero() && s.At.Sub(goneSince) >= gap &&
					!(!g.Released.IsZero() && g.Released.Sub(s.At) <= LapseDisown):
					out = append(out, fmt.Sprintf("lock %s: claim %s (token %d, identity %s) stayed Held while key %s was gone from the backend for it from %s and held for it again at %s: a lapsed hold resumed",
						tl.Lock, g.Claim, g.Token, g.Identity, tl.Key, goneSince.Format(time.StampMilli), s.At.Format(time.StampMilli)))
					goneSince = time.Time{}
				case held(s):
					seenHeld, goneSince = true, time.Time{}
				case seenHeld && goneSince.IsZero():
					goneSince = maxTime(s.At, g.Acquired)
				}
			}
		}
	}
	return out
}

// holderStoppedAt is when g's claimant stopped for good: it released, exited, died or its pod
// was removed; zero when it went on after its hold's end (a hang, a cut-off node's zombie) or
// has not ended.
func holderStoppedAt(g Grant) time.Time {
	switch g.End {
	case EndRelease, EndPodDelete, EndSilentDeath, EndSucceeded, EndGracefulDelete:
		return g.EndAt
	}
	return time.Time{}
}
