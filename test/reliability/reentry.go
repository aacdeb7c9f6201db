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
	"time"
)

// Reentrancy (docs/design.md §2, spec.holder.identity): a second claim of one pod on a lock its first
// claim holds shares that hold and its token at once, and the lock stays held until the last of
// them goes. A re-entry's claim is judged apart from the others (it overlaps its outer hold by
// design, with the same token): by CheckReentries here, while every other checker judges the
// outer holds, so that a claim of another pod that joins a hold is two holders to them.

// splitReentries separates the re-entries' claims (Grant.Reenters set) from the others.
func splitReentries(grants []Grant) (holds, reentries []Grant) {
	for _, g := range grants {
		if g.Reenters != "" {
			reentries = append(reentries, g)
		} else {
			holds = append(holds, g)
		}
	}
	return holds, reentries
}

// CheckReentries checks every re-entry against the hold it re-entered (its Reenters claim among
// grants): seen Held with that hold's token, no earlier than the outer claim was seen Held and no
// later than it was seen ended; and, if the claimant gave up waiting for it (GaveUp), only after
// the outer hold had ended: a re-entry that waits in the queue behind the others while its own
// pod holds the lock is a deadlock in a program that re-enters. It returns the violations and how
// many re-entries were seen Held.
func CheckReentries(reentries, grants []Grant) (violations []string, joined int) {
	outer := map[string]Grant{}
	for _, g := range grants {
		outer[g.Claim] = g
	}
	for _, r := range reentries {
		o, ok := outer[r.Reenters]
		switch {
		case !ok || o.Acquired.IsZero():
			violations = append(violations, fmt.Sprintf("re-entry %s: its outer claim %s was never seen Held", r.Claim, r.Reenters))
		case r.Acquired.IsZero() && !r.GaveUp.IsZero() && (o.Released.IsZero() || o.Released.After(r.GaveUp)):
			violations = append(violations, fmt.Sprintf("re-entry %s: not Held after %s of waiting while its outer claim %s (token %d) held",
				r.Claim, r.GaveUp.Sub(r.Created).Round(time.Millisecond), o.Claim, o.Token))
		case r.Acquired.IsZero():
			// Its outer hold ended first (a fault, the pod's end): nothing to join.
		case r.Token != o.Token:
			violations = append(violations, fmt.Sprintf("re-entry %s: Held with token %d, its outer claim %s with token %d", r.Claim, r.Token, o.Claim, o.Token))
		case r.Acquired.Before(o.Acquired):
			violations = append(violations, fmt.Sprintf("re-entry %s: seen Held at %s, before its outer claim %s (%s)",
				r.Claim, r.Acquired.Format(time.StampMilli), o.Claim, o.Acquired.Format(time.StampMilli)))
		case !o.Released.IsZero() && r.Acquired.After(o.Released):
			violations = append(violations, fmt.Sprintf("re-entry %s: seen Held at %s, after its outer claim %s ended (%s)",
				r.Claim, r.Acquired.Format(time.StampMilli), o.Claim, o.Released.Format(time.StampMilli)))
		default:
			joined++
		}
	}
	return violations, joined
}
