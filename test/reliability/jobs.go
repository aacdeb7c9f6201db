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
	"math"
	"sort"
	"time"
)

// Jobs as holders (docs/design.md §3 Workloads): a Job created suspended with the lock annotation gets
// a claim held by the Job, and the controller resumes it, with its fencing token, once the claim
// holds. The checkers below judge the Jobs' history: a watch of the run's Jobs (when each was
// seen resumed, and the write that finished or deleted it, each with its revision) beside the
// claims' history (Grant). The Jobs and the claims are objects of the harness's one API server, so
// their revisions order writes across the two watches, whatever order their events arrived in.

// The ways a Job's run ends. A Job whose pod was killed mid-run goes on with a replacement pod and
// then completes (JobRun.PodKilled says so).
const (
	// EndJobComplete: the Job ran to completion (conditions SuccessCriteriaMet and Complete): its
	// hold ends at once, as a release does, whatever the lock's lockDelaySeconds.
	EndJobComplete EndKind = "job-complete"
	// EndJobFailed: the Job failed (conditions FailureTarget and Failed): its hold ends without a
	// release, so the lock's lockDelaySeconds holds the next grant back.
	EndJobFailed EndKind = "job-failed"
	// EndJobDeleted: the Job was deleted (background propagation) before it finished: its hold
	// ends without a release, also when garbage collection deletes its claim right after.
	EndJobDeleted EndKind = "job-deleted"
)

// JobRun is one Job of a jobs run, as a watch of the run's Jobs showed it and as the harness ran
// it.
type JobRun struct {
	// Lock is namespace/name of the lock its annotation names; Job its name; Claim the name of
	// the claim the controller makes for it.
	Lock, Job, Claim string
	// Resumed is when the watch first showed the Job running (spec.suspend false), and
	// ResumedRevision the revision of that write; Token is the fencing token its annotation
	// carried then and TemplateToken the one on its pod template (0: none).
	Resumed              time.Time
	ResumedRevision      int64
	Token, TemplateToken int64
	// End is how the harness ended the Job, and EndAt when, just before the write; PodKilled is
	// when it killed a pod of the Job mid-run (zero: it did not).
	End              EndKind
	EndAt, PodKilled time.Time
	// EndRevision is the revision of the write first seen finishing the Job (Complete or Failed
	// True) or deleting it; 0 when none was seen.
	EndRevision int64
}

// Span is a stretch of time, e.g. a fault from its injection to its heal.
type Span struct{ From, To time.Time }

// overlaps says whether the span meets [from, to].
func (s Span) overlaps(from, to time.Time) bool { return !s.To.Before(from) && !to.Before(s.From) }

// grantsByClaim indexes grants by claim name.
func grantsByClaim(grants []Grant) map[string]Grant {
	out := make(map[string]Grant, len(grants))
	for _, g := range grants {
		out[g.Claim] = g
	}
	return out
}

// resumedRuns groups the runs seen resumed by lock, each group in the order of their resumes.
func resumedRuns(runs []JobRun) map[string][]JobRun {
	out := map[string][]JobRun{}
	for _, r := range runs {
		if r.ResumedRevision > 0 {
			out[r.Lock] = append(out[r.Lock], r)
		}
	}
	for _, rs := range out {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].ResumedRevision < rs[j].ResumedRevision })
	}
	return out
}

// runEnd is the revision at which a resumed Job stops counting as the lock's holder: the write
// that finished or deleted it, or its claim seen ended (a hold the controller ended, Lost say,
// before the Job's end: the Job runs on as a stale writer, which fencing is there to stop, and the
// next Job may be resumed); MaxInt64 while neither was seen.
func runEnd(r JobRun, g Grant) int64 {
	end := int64(math.MaxInt64)
	if r.EndRevision > 0 {
		end = r.EndRevision
	}
	if g.ReleasedRevision > 0 {
		end = min(end, g.ReleasedRevision)
	}
	return end
}

// CheckJobRuns checks mutual exclusion at the level of what runs: no Job of a lock is resumed
// while another Job of that lock runs, i.e. was resumed and has neither finished, nor been
// deleted, nor had its claim seen ended (runEnd). Resumes and ends are ordered by revision. One
// line per pair.
func CheckJobRuns(runs []JobRun, grants []Grant) []string {
	var out []string
	claims := grantsByClaim(grants)
	byLock := resumedRuns(runs)
	for _, lock := range sortedKeys(byLock) {
		rs := byLock[lock]
		for i, b := range rs {
			for _, a := range rs[:i] {
				if end := runEnd(a, claims[a.Claim]); b.ResumedRevision < end {
					out = append(out, fmt.Sprintf("lock %s: Job %s (token %d) resumed at revision %d (%s) while Job %s (token %d, resumed at revision %d) still ran: %s",
						lock, b.Job, b.Token, b.ResumedRevision, b.Resumed.Format(time.StampMicro), a.Job, a.Token, a.ResumedRevision, endText(end)))
				}
			}
		}
	}
	return out
}

func endText(end int64) string {
	if end == math.MaxInt64 {
		return "neither its end nor its claim's end was ever seen"
	}
	return fmt.Sprintf("it ended, or its claim did, only at revision %d", end)
}

// CheckJobResumes checks that the controller resumes a Job only for its claim's hold: the claim
// was seen Held at a revision before the resume, and the Job and its pod template carry the
// claim's token. One line per finding.
func CheckJobResumes(runs []JobRun, grants []Grant) []string {
	var out []string
	claims := grantsByClaim(grants)
	byLock := resumedRuns(runs)
	for _, lock := range sortedKeys(byLock) {
		for _, r := range byLock[lock] {
			g, ok := claims[r.Claim]
			switch {
			case !ok || g.Acquired.IsZero():
				out = append(out, fmt.Sprintf("lock %s: Job %s resumed at revision %d (token %d) but its claim %s was never seen Held",
					lock, r.Job, r.ResumedRevision, r.Token, r.Claim))
				continue
			case g.HeldRevision > 0 && r.ResumedRevision < g.HeldRevision:
				out = append(out, fmt.Sprintf("lock %s: Job %s resumed at revision %d, before its claim %s was Held (revision %d)",
					lock, r.Job, r.ResumedRevision, r.Claim, g.HeldRevision))
			}
			if r.Token != g.Token {
				out = append(out, fmt.Sprintf("lock %s: Job %s resumed with token %d, but its claim %s holds with token %d", lock, r.Job, r.Token, r.Claim, g.Token))
			}
			if r.TemplateToken != r.Token {
				out = append(out, fmt.Sprintf("lock %s: Job %s resumed with token %d on the Job and %d on its pod template", lock, r.Job, r.Token, r.TemplateToken))
			}
		}
	}
	return out
}

// JobHolds is what CheckJobHolds found.
type JobHolds struct {
	// Violations, one line each: a claim seen ended while its Job still ran, other than Lost.
	Violations []string
	// PodKills counts the Jobs that had a pod killed mid-run, and HeldThrough those whose claim
	// was not seen ended (not even Lost) before the Job's end.
	PodKills, HeldThrough int
}

// CheckJobHolds checks that a Job's hold lasts as long as the Job runs: the claim of a resumed
// Job is not seen ended before the write that finished or deleted the Job (by revision), unless
// it was Lost (a fault took the lock from the controller). A pod of the Job that dies (killed
// mid-run, replaced) is no end of the Job. It also counts the Jobs that had a pod killed, and
// those whose hold lasted through it.
func CheckJobHolds(runs []JobRun, grants []Grant) JobHolds {
	var out JobHolds
	claims := grantsByClaim(grants)
	byLock := resumedRuns(runs)
	for _, lock := range sortedKeys(byLock) {
		for _, r := range byLock[lock] {
			g, ok := claims[r.Claim]
			if !ok || g.Acquired.IsZero() {
				continue // CheckJobResumes reports it
			}
			endedFirst := g.ReleasedRevision > 0 && (r.EndRevision == 0 || g.ReleasedRevision < r.EndRevision)
			if !r.PodKilled.IsZero() {
				out.PodKills++
				if !endedFirst {
					out.HeldThrough++
				}
			}
			if endedFirst && !g.Lost {
				what := "deleted"
				if g.Phase != "" {
					what = g.Phase + "/" + g.Reason + ": " + g.Message
				}
				killed := ""
				if !r.PodKilled.IsZero() {
					killed = fmt.Sprintf(" (a pod of the Job was killed at %s)", r.PodKilled.Format(time.StampMicro))
				}
				out.Violations = append(out.Violations, fmt.Sprintf("lock %s: claim %s of Job %s seen ended (%s) at revision %d (%s) while its Job still ran%s; the Job ended at %s",
					lock, r.Claim, r.Job, what, g.ReleasedRevision, g.Released.Format(time.StampMicro), killed, revisionText(r.EndRevision)))
			}
		}
	}
	return out
}

func revisionText(rev int64) string {
	if rev == 0 {
		return "no revision seen"
	}
	return fmt.Sprintf("revision %d", rev)
}

// heldAtEnd says whether the Job's claim was still held, as far as the history shows, when the
// harness ended the Job: seen Held, not Lost, and not seen ended before EndAt.
func heldAtEnd(r JobRun, g Grant) bool {
	return !r.EndAt.IsZero() && !g.Acquired.IsZero() && !g.Lost && (g.Released.IsZero() || !g.Released.Before(r.EndAt))
}

// nextGrant is the first grant of lock, other than claim's, seen Held after t; nil when none.
func nextGrant(grants []Grant, lock, claim string, t time.Time) *Grant {
	var next *Grant
	for i := range grants {
		g := &grants[i]
		if g.Lock != lock || g.Claim == claim || g.Acquired.IsZero() || !g.Acquired.After(t) {
			continue
		}
		if next == nil || g.Acquired.Before(next.Acquired) {
			next = g
		}
	}
	return next
}

// JobDelay is what CheckJobLockDelay found.
type JobDelay struct {
	Violations []string
	// Checked counts the grants that followed a failed or deleted Job; Shortest is the shortest
	// gap among them.
	Checked  int
	Shortest time.Duration
}

// CheckJobLockDelay checks lockDelaySeconds (delay) after Jobs that failed or were deleted, from
// the recorded history alone: the next grant of the lock is seen Held no earlier than delay after
// the harness's write that failed or deleted the Job. The controller can only notice that write
// after it was made, and its delay counts from then, so the bound holds without a grace (the
// harness and the managers read one machine's clock, which no fault of these runs steps). A Job
// whose claim was Lost, or seen ended before that write, is not judged: its delay began at the
// controller's own moment (CheckJobHolds judges an early end).
func CheckJobLockDelay(runs []JobRun, grants []Grant, delay time.Duration) JobDelay {
	var out JobDelay
	claims := grantsByClaim(grants)
	byLock := resumedRuns(runs)
	for _, lock := range sortedKeys(byLock) {
		for _, r := range byLock[lock] {
			if (r.End != EndJobFailed && r.End != EndJobDeleted) || !heldAtEnd(r, claims[r.Claim]) {
				continue
			}
			next := nextGrant(grants, r.Lock, r.Claim, r.EndAt)
			if next == nil {
				continue
			}
			gap := next.Acquired.Sub(r.EndAt)
			if out.Checked == 0 || gap < out.Shortest {
				out.Shortest = gap
			}
			out.Checked++
			if gap < delay {
				out.Violations = append(out.Violations, fmt.Sprintf("lock %s: %s (token %d) seen Held at %s, %s after Job %s (token %d) %s at %s; lockDelay is %s",
					lock, next.Claim, next.Token, next.Acquired.Format(time.StampMicro), gap.Round(time.Millisecond), r.Job, r.Token,
					endVerb(r.End), r.EndAt.Format(time.StampMicro), delay))
			}
		}
	}
	return out
}

func endVerb(k EndKind) string {
	switch k {
	case EndJobFailed:
		return "failed"
	case EndJobDeleted:
		return "was deleted"
	}
	return "completed"
}

// JobHandoffs is what CheckJobHandoffs found.
type JobHandoffs struct {
	Violations []string
	// Checked counts the completions judged; Longest is the longest handoff among them.
	Checked int
	Longest time.Duration
}

// CheckJobHandoffs checks that a completed Job's hold ends as a release does: when a claim of the
// lock was waiting as the harness completed the Job, the next grant is seen Held less than delay
// (the lock's lockDelaySeconds) later. A completion is judged only while no fault disturbed the
// managers (no span of disturbed meets the delay after it), since a fault may hold any handoff
// back; and not when the Job's claim was Lost or seen ended before the completion. A waiter never
// granted is the stuck check's.
func CheckJobHandoffs(runs []JobRun, grants []Grant, delay time.Duration, disturbed []Span) JobHandoffs {
	var out JobHandoffs
	claims := grantsByClaim(grants)
	byLock := resumedRuns(runs)
	for _, lock := range sortedKeys(byLock) {
		for _, r := range byLock[lock] {
			if r.End != EndJobComplete || !heldAtEnd(r, claims[r.Claim]) || anyOverlaps(disturbed, r.EndAt, r.EndAt.Add(delay)) ||
				!waitingAt(grants, r.Lock, r.Claim, r.EndAt) {
				continue
			}
			next := nextGrant(grants, r.Lock, r.Claim, r.EndAt)
			if next == nil {
				continue
			}
			gap := next.Acquired.Sub(r.EndAt)
			out.Checked++
			out.Longest = max(out.Longest, gap)
			if gap >= delay {
				out.Violations = append(out.Violations, fmt.Sprintf("lock %s: %s (token %d) seen Held only %s after Job %s (token %d) completed at %s, while it waited; a completion is a release, with no lockDelay (%s)",
					lock, next.Claim, next.Token, gap.Round(time.Millisecond), r.Job, r.Token, r.EndAt.Format(time.StampMicro), delay))
			}
		}
	}
	return out
}

// waitingAt says whether a claim of lock other than claim waited at t: created before t, and not
// seen Held nor ended by then.
func waitingAt(grants []Grant, lock, claim string, t time.Time) bool {
	for _, g := range grants {
		if g.Lock != lock || g.Claim == claim || g.Created.IsZero() || !g.Created.Before(t) {
			continue
		}
		if (g.Acquired.IsZero() || g.Acquired.After(t)) && (g.Released.IsZero() || g.Released.After(t)) {
			return true
		}
	}
	return false
}

func anyOverlaps(spans []Span, from, to time.Time) bool {
	for _, s := range spans {
		if s.overlaps(from, to) {
			return true
		}
	}
	return false
}
