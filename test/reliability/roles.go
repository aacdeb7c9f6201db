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

// The role label of Standby pods (docs/design.md §3): the controller keeps locks.lockwarden.io/role at
// holder on the pods whose claim holds the lock and standby on the others, and a Service that
// selects role: holder sends traffic to the holders alone. Two checkers judge it from watches of
// the pods and of the lock records.

// roleHolder is the value of the role label on a pod that holds its lock.
const roleHolder = "holder"

// PodRole is one pod as one event of a watch of the run's pods showed it. A watch delivers every
// change in the order the API server made it, so the pods' states after an event are the
// namespace's pods at that event's revision.
type PodRole struct {
	// At is when the event arrived; Revision its resourceVersion (an etcd revision of the
	// harness's own API server, which orders it against the lock records' events; 0 unknown).
	At       time.Time
	Revision int64
	// Pod is the pod's name; Lock the namespace/name of the lock its annotation names; Claim
	// the name of the claim the controller makes for it (PodClaimName of its name, UID and lock).
	Pod, Lock, Claim string
	// Role is its role label, "" when it has none.
	Role string
	// Terminating says the pod has a deletionTimestamp; Gone that the event is its deletion.
	Terminating, Gone bool
	// Gated says the pod carries lockwarden's scheduling gate; Finished that its phase is
	// Succeeded or Failed.
	Gated, Finished bool
}

// holder says whether the pod, as this event shows it, is labelled holder and may take traffic:
// a finished pod keeps its label, but a Service sends nothing to it.
func (p PodRole) holder() bool { return !p.Gone && !p.Finished && p.Role == roleHolder }

// LockRecord is one DistributedLock as one event of a watch of the run's locks showed it: the
// claims its record (status.holders) names as holding it.
type LockRecord struct {
	At       time.Time
	Revision int64
	// Lock is the lock's namespace/name; Holders the claims its record names.
	Lock    string
	Holders []string
	// Gone says the event is the lock's deletion.
	Gone bool
}

// CheckHolderLabels checks, after every event of the pod watch, in the watch's order, that no
// lock has more pods labelled holder than it has places (placesOf(lock); 1 is a mutex): what a
// Service that selects role: holder would have sent traffic to at that revision. Terminating
// pods count while they carry the label. Each stretch with too many is reported once, at its
// first event.
func CheckHolderLabels(pods []PodRole, placesOf func(lock string) int) []string {
	var out []string
	cur := map[string]PodRole{} // by pod name
	over := map[string]bool{}   // locks over their places at the previous event
	for _, e := range pods {
		if e.Gone {
			delete(cur, e.Pod)
		} else {
			cur[e.Pod] = e
		}
		if e.Lock == "" {
			continue
		}
		holders := holdersOf(cur, e.Lock)
		places := max(placesOf(e.Lock), 1)
		switch {
		case len(holders) > places && !over[e.Lock]:
			out = append(out, fmt.Sprintf("lock %s: %d pods labelled holder at revision %d (%s), more than its %d place(s): %s",
				e.Lock, len(holders), e.Revision, e.At.Format(time.StampMicro), places, strings.Join(holders, ", ")))
			over[e.Lock] = true
		case len(holders) <= places:
			over[e.Lock] = false
		}
	}
	return out
}

// holdersOf lists, sorted, the pods of lock labelled holder, with their claims.
func holdersOf(cur map[string]PodRole, lock string) []string {
	var out []string
	for _, p := range cur {
		if p.Lock == lock && p.holder() {
			out = append(out, fmt.Sprintf("%s (claim %s)", p.Pod, p.Claim))
		}
	}
	slices.Sort(out)
	return out
}

// CheckHolderRecord checks the liveness half of the role label: a pod labelled holder is, within
// grace, one whose claim the lock's record names as a holder, and not terminating. It merges the
// pod and record events in revision order (time order where a revision is unknown) and times
// each stretch in which a pod labelled holder is neither, from the event that began it to the
// one that ended it (or to end, when it was still under way when the watches stopped); a stretch
// longer than grace is a violation. The label is moved by the write after the one it follows
// (the claim's end, the pod's deletionTimestamp), so a short stretch is how it works; a long one
// is a pod that the Service keeps sending traffic to although it no longer holds, or is going.
// It also returns the longest stretch, within the grace or not, to show how much of the grace a
// run used.
func CheckHolderRecord(pods []PodRole, records []LockRecord, grace time.Duration, end time.Time) (violations []string, longest time.Duration) {
	type event struct {
		at  time.Time
		rev int64
		pod *PodRole
		rec *LockRecord
	}
	events := make([]event, 0, len(pods)+len(records))
	for i := range pods {
		events = append(events, event{at: pods[i].At, rev: pods[i].Revision, pod: &pods[i]})
	}
	for i := range records {
		events = append(events, event{at: records[i].At, rev: records[i].Revision, rec: &records[i]})
	}
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].rev != 0 && events[j].rev != 0 && events[i].rev != events[j].rev {
			return events[i].rev < events[j].rev
		}
		return events[i].at.Before(events[j].at)
	})

	type stretch struct {
		since time.Time
		rev   int64
		why   string
	}
	var out []string
	cur := map[string]PodRole{}   // pods by name
	held := map[string][]string{} // each lock's record: the claims it names
	wrong := map[string]stretch{} // pods labelled holder that should not be, since when
	report := func(p PodRole, s stretch, until time.Time, ongoing bool) {
		d := until.Sub(s.since)
		longest = max(longest, d)
		if d <= grace {
			return
		}
		tail := fmt.Sprintf("for %s", d.Round(time.Millisecond))
		if ongoing {
			tail = fmt.Sprintf("still at the end, %s later", d.Round(time.Millisecond))
		}
		out = append(out, fmt.Sprintf("lock %s: pod %s labelled holder while %s, from revision %d (%s) %s (grace %s)",
			p.Lock, p.Pod, s.why, s.rev, s.since.Format(time.StampMicro), tail, grace))
	}
	var now time.Time // the latest arrival so far: two streams' arrivals need not follow revisions
	judge := func(name string, rev int64) {
		p, ok := cur[name]
		why := ""
		if ok && p.holder() {
			switch {
			case p.Terminating:
				why = "terminating"
			case !slices.Contains(held[p.Lock], p.Claim):
				why = fmt.Sprintf("its claim %s is not among the holders its lock's record names (%s)", p.Claim, strings.Join(held[p.Lock], ", "))
			}
		}
		s, was := wrong[name]
		switch {
		case why != "" && !was:
			wrong[name] = stretch{since: now, rev: rev, why: why}
		case why == "" && was:
			report(cur[name], s, now, false)
			delete(wrong, name)
		}
	}
	for _, e := range events {
		if e.at.After(now) {
			now = e.at
		}
		if p := e.pod; p != nil {
			last, known := cur[p.Pod]
			if p.Gone {
				delete(cur, p.Pod)
			} else {
				cur[p.Pod] = *p
			}
			if s, was := wrong[p.Pod]; was && known && !p.holder() {
				report(last, s, now, false)
				delete(wrong, p.Pod)
			}
			judge(p.Pod, p.Revision)
			continue
		}
		r := e.rec
		if r.Gone {
			delete(held, r.Lock)
		} else {
			held[r.Lock] = r.Holders
		}
		for _, name := range sortedKeys(cur) {
			if cur[name].Lock == r.Lock {
				judge(name, r.Revision)
			}
		}
	}
	for _, name := range sortedKeys(wrong) {
		report(cur[name], wrong[name], end, true)
	}
	return out, longest
}

// HolderLabelled counts the pods that were seen labelled holder at least once: a run in which
// none was proves nothing about the role label.
func HolderLabelled(pods []PodRole) int {
	seen := map[string]bool{}
	for _, p := range pods {
		if p.holder() {
			seen[p.Pod] = true
		}
	}
	return len(seen)
}
