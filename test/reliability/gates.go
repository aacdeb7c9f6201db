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

// Gated pods (docs/design.md §3, Waiting for a lock): a pod created with lockwarden's scheduling gate
// is not scheduled until the controller lifts the gate, which it does once the pod's claim holds
// the lock, writing the hold's fencing token on the pod in the same patch. What the user of the
// gate relies on is that a pod runs only while it holds: two checkers judge it, one from the API
// server's order of the pods' changes, one from what each pod read when it started.

// CheckGates checks, after every event of the pod watch in the watch's order (the API server's
// revisions), that no lock has more admitted pods than places (placesOf(lock); 1 is a mutex). A
// pod is admitted from the event that shows it without the gate, having been seen with it, until
// the event that shows it finished (Succeeded or Failed) or gone; a terminating pod still runs,
// and counts. The controller lifts the next gate only after the hold before it ended, which for a
// pod-owned claim is its pod's end: a mutex whose gates overlap at any revision let two pods run.
// A pod whose claim was seen Lost (lostAt: the claim's revision then) no longer counts from that
// revision on: under lossPolicy Notify a pod that lost its lock keeps running, which is what the
// fencing token is for (the zombie and register checkers judge its writes), and the next claim
// is granted once the lost hold has expired. A claim marked Lost only after the next pod's gate
// was lifted still counts at that revision. Each stretch with too many is reported once, at its
// first event. It also returns how many pods were admitted.
func CheckGates(pods []PodRole, placesOf func(lock string) int, lostAt map[string]int64) (violations []string, admitted int) {
	wasGated := map[string]bool{} // pods seen with the gate
	running := map[string]PodRole{}
	counted := map[string]bool{}
	over := map[string]bool{}
	for _, e := range pods {
		if e.Gated {
			wasGated[e.Pod] = true
		}
		switch {
		case e.Gone || e.Finished:
			delete(running, e.Pod)
		case wasGated[e.Pod] && !e.Gated:
			running[e.Pod] = e
			if !counted[e.Pod] {
				counted[e.Pod] = true
				admitted++
			}
		}
		if e.Lock == "" {
			continue
		}
		var in []string
		for _, p := range running {
			if lost, ok := lostAt[p.Claim]; ok && lost > 0 && e.Revision >= lost {
				continue
			}
			if p.Lock == e.Lock {
				in = append(in, fmt.Sprintf("%s (claim %s)", p.Pod, p.Claim))
			}
		}
		slices.Sort(in)
		places := max(placesOf(e.Lock), 1)
		switch {
		case len(in) > places && !over[e.Lock]:
			violations = append(violations, fmt.Sprintf("lock %s: %d pods admitted (gate lifted, not finished) at revision %d (%s), more than its %d place(s): %s",
				e.Lock, len(in), e.Revision, e.At.Format(time.StampMicro), places, strings.Join(in, ", ")))
			over[e.Lock] = true
		case len(in) <= places:
			over[e.Lock] = false
		}
	}
	return violations, admitted
}

// Admission is what a gated pod read when it was scheduled, as its process would read it from
// the downward API: the fencing token annotation the controller wrote with the gate's removal.
type Admission struct {
	Pod, Claim string
	// Token is the pod's fencing-token annotation when it was first seen bound to a node; 0
	// when it had none.
	Token int64
	At    time.Time
}

// CheckAdmissions checks that every gated pod that was scheduled had its claim seen Held, with
// the token the pod read: a gate lifted, or a token written, for a claim that never held (or for
// another hold's token) lets a pod run unfenced or fenced with the wrong token.
func CheckAdmissions(admissions []Admission, grants []Grant) []string {
	byClaim := map[string]Grant{}
	for _, g := range grants {
		byClaim[g.Claim] = g
	}
	var out []string
	for _, a := range admissions {
		g, ok := byClaim[a.Claim]
		switch {
		case a.Token == 0:
			out = append(out, fmt.Sprintf("pod %s was scheduled at %s without a fencing token annotation", a.Pod, a.At.Format(time.StampMilli)))
		case !ok || g.Acquired.IsZero():
			out = append(out, fmt.Sprintf("pod %s was scheduled at %s with token %d, but its claim %s was never seen Held", a.Pod, a.At.Format(time.StampMilli), a.Token, a.Claim))
		case g.Token != a.Token:
			out = append(out, fmt.Sprintf("pod %s was scheduled at %s with token %d, but its claim %s was Held with token %d", a.Pod, a.At.Format(time.StampMilli), a.Token, a.Claim, g.Token))
		}
	}
	return out
}
