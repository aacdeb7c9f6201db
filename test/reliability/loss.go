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
	"sort"
	"strings"
	"time"
)

// The claim phase and Acquired reason by which the controller ends a hold whose holder pod is
// gone, failed, replaced or succeeded (docs/how-locks-work.md). The checkers below restate them
// rather than import the API, so that a renamed constant cannot silently keep them in step.
const (
	phaseReleased          = "Released"
	reasonHolderTerminated = "HolderTerminated"
	// succeededSuffix ends the message of a hold whose pod ran to completion: "Released: pod
	// NAME succeeded". Such an end frees the lock at once.
	succeededSuffix = " succeeded"
)

// EndedWithoutRelease says whether a hold ended without its holder letting go, so that the
// lock's lockDelaySeconds applies to the next grant: it was Lost, or its pod died, was deleted or
// was replaced (Released with reason HolderTerminated), except a pod that Succeeded. A claim
// deleted while held (phase empty: it was released by its deletion) or released otherwise did let
// go.
func EndedWithoutRelease(g Grant) bool {
	if g.Lost {
		return true
	}
	return g.Phase == phaseReleased && g.Reason == reasonHolderTerminated && !strings.HasSuffix(g.Message, succeededSuffix)
}

// LockDelayCheck is what CheckLockDelay found.
type LockDelayCheck struct {
	// Violations, one line each: a grant that came before the delay after a hold that ended
	// without a release had run out.
	Violations []string
	// Checked counts the grants that followed such an end: 0 means the delay was never
	// exercised, and the run proved nothing about it.
	Checked int
}

// CheckLockDelay checks spec.lockDelaySeconds (delay) on every lock: after a hold that ended
// without a release (EndedWithoutRelease), the next grant of the lock must not come before the
// ended claim's status.releaseTime plus delay. Both times are the controller's own (the pass
// that ended the hold writes releaseTime, the pass that grants writes acquireTime), which in a
// one-replica scenario come from one clock, so the bound is exact: no grace. The next grant is
// the first whose acquireTime is not before that releaseTime: a grant in the very pass that ended
// the hold has the same time, and is the plainest violation.
func CheckLockDelay(grants []Grant, delay time.Duration) LockDelayCheck {
	var out LockDelayCheck
	byLock := map[string][]Grant{}
	for _, g := range grants {
		if !g.AcquireTime.IsZero() {
			byLock[g.Lock] = append(byLock[g.Lock], g)
		}
	}
	for _, lock := range sortedKeys(byLock) {
		gs := byLock[lock]
		sort.SliceStable(gs, func(i, j int) bool { return gs[i].AcquireTime.Before(gs[j].AcquireTime) })
		for _, h := range gs {
			if !EndedWithoutRelease(h) || h.ReleaseTime.IsZero() {
				continue
			}
			var next *Grant
			for i := range gs {
				if g := &gs[i]; g.Claim != h.Claim && !g.AcquireTime.Before(h.ReleaseTime) {
					next = g
					break
				}
			}
			if next == nil {
				continue // nothing granted after it
			}
			out.Checked++
			if gap := next.AcquireTime.Sub(h.ReleaseTime); gap < delay {
				out.Violations = append(out.Violations, fmt.Sprintf("lock %s: %s (token %d) granted at %s, %s after %s (token %d) ended without a release at %s (%s: %s); lockDelay is %s",
					lock, next.Claim, next.Token, next.AcquireTime.Format(time.StampMicro), gap, h.Claim, h.Token,
					h.ReleaseTime.Format(time.StampMicro), endWord(h), h.Message, delay))
			}
		}
	}
	return out
}

func endWord(g Grant) string {
	if g.Lost {
		return "Lost"
	}
	return g.Phase + "/" + g.Reason
}

// CheckEvicted checks lossPolicy Evict over the grants of locks that ask for it: every claim
// that ended Lost had its holder pod evicted within bound of being seen Lost (the claim's
// Evicted condition seen True, or the pod seen deleting or gone: the harness deletes no pod of a
// lost claim in these scenarios, so only the eviction can have), and no claim that was not lost
// shows Evicted (the controller evicted a pod that kept its lock). One line per violation.
func CheckEvicted(grants []Grant, bound time.Duration) []string {
	var out []string
	gs := append([]Grant(nil), grants...)
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].Lock+"/"+gs[i].Claim < gs[j].Lock+"/"+gs[j].Claim })
	for _, g := range gs {
		if !g.Lost {
			if !g.Evicted.IsZero() {
				out = append(out, fmt.Sprintf("lock %s: claim %s was not lost (phase %q) but shows Evicted=True since %s",
					g.Lock, g.Claim, g.Phase, g.Evicted.Format(time.StampMilli)))
			}
			continue
		}
		evicted := earliest(g.Evicted, g.PodGone)
		switch {
		case evicted.IsZero():
			out = append(out, fmt.Sprintf("lock %s: claim %s (token %d) was seen Lost at %s and its pod was never evicted",
				g.Lock, g.Claim, g.Token, g.Released.Format(time.StampMilli)))
		case evicted.Sub(g.Released) > bound:
			out = append(out, fmt.Sprintf("lock %s: claim %s (token %d) was seen Lost at %s and its pod evicted only %s later (bound %s)",
				g.Lock, g.Claim, g.Token, g.Released.Format(time.StampMilli), evicted.Sub(g.Released).Round(time.Millisecond), bound))
		}
	}
	return out
}

// earliest is the earlier of two times, ignoring zero ones.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	}
	return minTime(a, b)
}

// CheckEvictionTargets checks the managers' evictions as the API server's audit log recorded
// them (lossPolicy Evict, claimants whose pod is named as their claim): every eviction a replica
// made that the API server accepted was of the pod of a claim seen Lost, and every claim seen Lost
// had its pod evicted so, within bound of being seen Lost. One line per violation: a pod evicted
// whose claim kept its lock (or that holds none), a lost claim's pod never evicted or too late.
func CheckEvictionTargets(grants []Grant, writes []AuditWrite, bound time.Duration) []string {
	lost := map[string]Grant{} // by namespace/claim, which is namespace/pod
	for _, g := range grants {
		if g.Lost {
			ns, _, _ := strings.Cut(g.Lock, "/")
			lost[ns+"/"+g.Claim] = g
		}
	}
	evicted := map[string]time.Time{} // the first accepted eviction of each pod
	var out []string
	for _, w := range writes {
		if w.Replica == "" || w.Verb != "create" || w.Resource != "pods/eviction" || w.Code < 200 || w.Code >= 300 {
			continue
		}
		pod := w.Namespace + "/" + w.Name
		if _, ok := lost[pod]; !ok {
			out = append(out, fmt.Sprintf("%s evicted pod %s, whose claim was not seen Lost", w.Replica, pod))
		}
		if _, ok := evicted[pod]; !ok {
			evicted[pod] = w.At
		}
	}
	for _, pod := range sortedKeys(lost) {
		g := lost[pod]
		at, ok := evicted[pod]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("lock %s: claim %s (token %d) was seen Lost at %s and the audit log shows no eviction of its pod",
				g.Lock, g.Claim, g.Token, stamp(g.Released)))
		case at.Sub(g.Released) > bound:
			out = append(out, fmt.Sprintf("lock %s: claim %s (token %d) was seen Lost at %s and its pod evicted only %s later (bound %s)",
				g.Lock, g.Claim, g.Token, stamp(g.Released), at.Sub(g.Released).Round(time.Millisecond), bound))
		}
	}
	return out
}

// CheckLockDelayAudited checks spec.lockDelaySeconds (delay) with the API server's clock alone,
// from its audit log, for the holds the harness ended by ending their pod: deleted
// (EndPodDelete) or marked Failed (EndSilentDeath), each ended without a release by the
// controller's account (Released, HolderTerminated). The end is when the API server received
// the harness's request (its delete of the pod, or its status write of phase Failed), before
// the controller could have seen it; the next grant of the lock is the first status write of a
// manager that set a claim of the lock Held and was received after that end. It must have been
// received no earlier than delay after the end. Unlike CheckLockDelay, no time here comes from
// the controller: a controller that measured the delay from a wrong instant, or by a clock of its
// own that ran ahead, fails it. One line per violation; Checked counts the grants judged.
func CheckLockDelayAudited(grants []Grant, writes []AuditWrite, delay time.Duration) LockDelayCheck {
	var out LockDelayCheck
	type event struct {
		claim string
		at    time.Time
	}
	granted := map[string][]event{} // by lock (namespace/name): each claim's first grant write
	lockOf := map[string]string{}   // namespace/claim → lock
	for _, g := range grants {
		ns, _, _ := strings.Cut(g.Lock, "/")
		lockOf[ns+"/"+g.Claim] = g.Lock
	}
	seen := map[string]bool{}
	ended := map[string]time.Time{} // namespace/pod → the harness's ending request
	for _, w := range writes {
		if w.Code < 200 || w.Code >= 300 {
			continue
		}
		key := w.Namespace + "/" + w.Name
		switch {
		case w.Replica != "" && w.Resource == "lockclaims/status" && w.Phase == "Held" && !seen[key]:
			seen[key] = true
			if lock, ok := lockOf[key]; ok {
				granted[lock] = append(granted[lock], event{w.Name, w.At})
			}
		case w.Replica == "" && (w.Resource == "pods" && w.Verb == "delete" || w.Resource == "pods/status" && w.Phase == "Failed"):
			if _, ok := ended[key]; !ok {
				ended[key] = w.At
			}
		}
	}
	for _, h := range grants {
		if h.End != EndPodDelete && h.End != EndSilentDeath || h.Lost || !EndedWithoutRelease(h) {
			continue
		}
		ns, _, _ := strings.Cut(h.Lock, "/")
		end, ok := ended[ns+"/"+h.Claim]
		if !ok {
			continue
		}
		var next *event
		for i, g := range granted[h.Lock] {
			if g.claim != h.Claim && g.at.After(end) && (next == nil || g.at.Before(next.at)) {
				next = &granted[h.Lock][i]
			}
		}
		if next == nil {
			continue
		}
		out.Checked++
		if gap := next.at.Sub(end); gap < delay {
			out.Violations = append(out.Violations, fmt.Sprintf("lock %s: %s granted at %s by the API server's clock, %s after the harness ended the pod of %s (token %d, %s) at %s; lockDelay is %s",
				h.Lock, next.claim, next.at.Format(time.StampMicro), gap.Round(time.Microsecond), h.Claim, h.Token, h.End, end.Format(time.StampMicro), delay))
		}
	}
	slices.Sort(out.Violations)
	return out
}
