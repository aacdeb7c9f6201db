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

// BackendView is what the harness read on the backend itself (Redis GET, the etcd key, the
// Lease), through a connection of its own that no fault proxy touches.
type BackendView struct {
	// Known is false when the backend could not be read (paused, killed): the sample says nothing.
	Known bool
	// Held says the key is held (present, and for a Lease not expired), exclusively or in
	// places. Places lists, sorted, every identity that holds a place of the key (nil when
	// none does). Holder is the identity that holds the key exclusively when one does (it is
	// then not among Places), else the first of Places. placesView builds views by this rule.
	Held   bool
	Holder string
	Places []string
	// Reserved lists, sorted, the identities whose place the key no longer holds for them but
	// cannot give to anyone else either: on Redlock, a place left on fewer nodes than its quorum
	// (a release that reached some nodes only) but on too many for places+1 holders to fit
	// (redlockView). Such an identity is not counted among the holders, and a claim Held for it
	// is not a phantom: the store still keeps its place from others.
	Reserved []string
}

// placesView is the view of a key that exclusive holds alone ("" when nobody does) and whose
// places are held by places (in any order; an identity listed twice holds one place).
func placesView(exclusive string, places []string) BackendView {
	v := BackendView{Known: true}
	if len(places) > 0 {
		v.Places = slices.Compact(slices.Sorted(slices.Values(places)))
	}
	switch {
	case exclusive != "":
		v.Held, v.Holder = true, exclusive
	case len(v.Places) > 0:
		v.Held, v.Holder = true, v.Places[0]
	}
	return v
}

// exclusiveHolder is the identity that holds the key exclusively by v; "" when none does.
func (v BackendView) exclusiveHolder() string {
	if !v.Held || slices.Contains(v.Places, v.Holder) {
		return ""
	}
	return v.Holder
}

// withIdentities is v with each holder's value replaced by f(value), in the same roles.
func (v BackendView) withIdentities(f func(string) string) BackendView {
	if !v.Known {
		return v
	}
	exclusive := v.exclusiveHolder()
	if exclusive != "" {
		exclusive = f(exclusive)
	}
	places := make([]string, len(v.Places))
	for i, p := range v.Places {
		places[i] = f(p)
	}
	out := placesView(exclusive, places)
	for _, r := range v.Reserved {
		out.Reserved = append(out.Reserved, f(r))
	}
	if out.Reserved != nil {
		slices.Sort(out.Reserved)
	}
	return out
}

// excluders lists the identities that, by v, hold the key against a hold of identity that is
// exclusive or not: the exclusive holder unless it is identity, and, against an exclusive hold,
// every place of another identity. Places of others do not exclude a shared hold whose own place
// is missing: as far as the view tells, that hold's place is free, which the backend samples
// judge (a place missing counts as a free key there).
func (v BackendView) excluders(identity string, exclusive bool) []string {
	if !v.Known || !v.Held {
		return nil
	}
	var out []string
	if h := v.exclusiveHolder(); h != "" && h != identity {
		out = append(out, h)
	}
	if exclusive {
		for _, p := range v.Places {
			if p != identity {
				out = append(out, p)
			}
		}
	}
	return out
}

// heldKeys is key as the orphan check lists it: one entry per identity that holds it, the
// exclusive holder and each place.
func heldKeys(key string, v BackendView) []BackendKey {
	var out []BackendKey
	if h := v.exclusiveHolder(); h != "" {
		out = append(out, BackendKey{Key: key, Holder: h})
	}
	for _, p := range v.Places {
		out = append(out, BackendKey{Key: key, Holder: p})
	}
	return out
}

// HeldSample is one observation of a claim that the API showed Held, beside what the backend
// held for its key right after.
type HeldSample struct {
	// At is when the backend was read.
	At time.Time
	// Lock is namespace/name; Claim the claim's name; Token, Identity and ExpireTime its status
	// (fencingToken, holderIdentity, expireTime) in the same read.
	Lock, Claim string
	Token       int64
	Identity    string
	ExpireTime  time.Time
	Backend     BackendView
}

// matches says the backend holds the key for the claim's identity.
func (s HeldSample) matches() bool {
	return s.Backend.Held && (s.Backend.Holder == s.Identity || slices.Contains(s.Backend.Places, s.Identity)) ||
		slices.Contains(s.Backend.Reserved, s.Identity)
}

// CheckBackendSamples checks S4 ("no phantom holder"): a claim reported Held must be held on the
// backend for its identity. A mismatch is legitimate in two cases, which the rule leaves out:
//   - the claim's status.expireTime is less than margin ahead of the sample: a hold whose
//     renewals fail stays Held until it expires, while the backend may already have dropped it;
//   - the mismatch is younger than grace: the controller releases the backend key before it
//     writes the claim's new phase, and a backend that lost its data (Redis restarted empty) is
//     noticed only at the next renewal, up to a sixth of the TTL later (the grace allows a third).
//
// So a hold (claim and token) is a violation once it has been seen mismatched, with expireTime
// more than margin ahead each time, over at least grace without a matching sample in between.
// Samples whose backend could not be read are skipped. One line per violating hold.
func CheckBackendSamples(samples []HeldSample, margin, grace time.Duration) []string {
	type holdKey struct {
		lock, claim string
		token       int64
	}
	byHold := map[holdKey][]HeldSample{}
	var order []holdKey
	for _, s := range samples {
		k := holdKey{s.Lock, s.Claim, s.Token}
		if _, ok := byHold[k]; !ok {
			order = append(order, k)
		}
		byHold[k] = append(byHold[k], s)
	}
	var out []string
	for _, k := range order {
		ss := byHold[k]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].At.Before(ss[j].At) })
		var first *HeldSample
		for i := range ss {
			s := &ss[i]
			switch {
			case !s.Backend.Known:
				continue
			case s.matches():
				first = nil
				continue
			case s.ExpireTime.Sub(s.At) <= margin:
				continue // expiring: the backend may have let it go already
			}
			if first == nil {
				first = s
				continue
			}
			if s.At.Sub(first.At) >= grace {
				what := "free"
				switch h := s.Backend.exclusiveHolder(); {
				case h != "":
					what = "held by " + h
				case s.Backend.Held:
					what = "held in places by " + strings.Join(s.Backend.Places, ", ")
				}
				out = append(out, fmt.Sprintf("lock %s: claim %s (token %d, identity %s) reported Held from %s to %s with expireTime %s, but the backend key was %s",
					k.lock, k.claim, k.token, s.Identity, first.At.Format(time.StampMilli), s.At.Format(time.StampMilli), s.ExpireTime.Format(time.StampMilli), what))
				break
			}
		}
	}
	return out
}

// ClaimState is one claim in a snapshot of a namespace's claims (one LIST, so one instant of
// the API server's state).
type ClaimState struct {
	Lock, Claim string
	Held        bool
	Token       int64
	Identity    string
	ExpireTime  time.Time
	// Exclusive: the claim's spec.mode is Exclusive.
	Exclusive bool
}

// Snapshot is every claim of a namespace as one LIST returned them, at At.
type Snapshot struct {
	At     time.Time
	Claims []ClaimState
}

// CheckControllerExclusion checks the controller's own view: no snapshot may show, Held on one
// lock while their expireTimes are more than margin ahead (a claim that expires may be waiting for
// the controller to notice), two claims of different identities of which one is Exclusive or
// whose lock has one place, nor more identities than the lock's places (placesOf; claims of one
// identity share a hold). One line per lock and pair, or per lock and count, reported once.
func CheckControllerExclusion(snapshots []Snapshot, margin time.Duration, placesOf func(lock string) int) []string {
	var out []string
	seen := map[string]bool{}
	for _, snap := range snapshots {
		byLock := map[string][]ClaimState{}
		for _, c := range snap.Claims {
			if c.Held && c.ExpireTime.Sub(snap.At) > margin {
				byLock[c.Lock] = append(byLock[c.Lock], c)
			}
		}
		for _, lock := range sortedKeys(byLock) {
			cs := byLock[lock]
			places := max(placesOf(lock), 1)
			identities := map[string]bool{}
			for i := range cs {
				identities[cs[i].Identity] = true
				for j := i + 1; j < len(cs); j++ {
					a, b := cs[i], cs[j]
					if a.Identity == b.Identity || (places > 1 && !a.Exclusive && !b.Exclusive) {
						continue
					}
					key := lock + "\x00" + min(a.Claim, b.Claim) + "\x00" + max(a.Claim, b.Claim)
					if seen[key] {
						continue
					}
					seen[key] = true
					out = append(out, fmt.Sprintf("lock %s: at %s the API showed %s (token %d, expires %s) and %s (token %d, expires %s) both Held",
						lock, snap.At.Format(time.StampMilli), a.Claim, a.Token, a.ExpireTime.Format(time.StampMilli), b.Claim, b.Token, b.ExpireTime.Format(time.StampMilli)))
				}
			}
			if key := lock + "\x00count"; places > 1 && len(identities) > places && !seen[key] {
				seen[key] = true
				out = append(out, fmt.Sprintf("lock %s: at %s the API showed %d holders Held, more than its %d place(s)",
					lock, snap.At.Format(time.StampMilli), len(identities), places))
			}
		}
	}
	return out
}

// BackendKey is one hold of a lock key found on the backend at the end of a run: the key's
// exclusive hold, or one of its places (a key held in places gives one BackendKey per place).
type BackendKey struct {
	Key, Holder string
}

// CheckOrphans checks L2's "no orphaned backend key": after convergence and a further TTL,
// every hold still on the backend (a key's exclusive hold, or each of its places) must belong to
// a claim the API shows Held (heldBy maps a key to the identities of its Held claims). A hold for
// no Held claim is kept alive by nobody who will ever release it, or by a renewal of a hold that
// ended. One line per orphan.
func CheckOrphans(keys []BackendKey, heldBy map[string][]string) []string {
	var out []string
	for _, k := range keys {
		if !slices.Contains(heldBy[k.Key], k.Holder) {
			owners := "none"
			if ids := heldBy[k.Key]; len(ids) > 0 {
				owners = strings.Join(ids, ", ")
			}
			out = append(out, fmt.Sprintf("backend key %s is held by %s (exclusively or in a place), but no Held claim has that identity (Held claims' identities: %s)", k.Key, k.Holder, owners))
		}
	}
	return out
}

// CheckTokensAbove checks that every grant of lock observed after 'after' has a token above
// floor: after a DistributedLock is deleted and re-created under the same name, floor is the last
// token the old lock issued (its status.fencingToken when it went), which covers tokens issued
// to grants the harness never saw.
func CheckTokensAbove(grants []Grant, lock string, after time.Time, floor int64) []string {
	var out []string
	for _, g := range grants {
		if g.Lock != lock || g.Acquired.IsZero() || !g.Acquired.After(after) {
			continue
		}
		if g.Token <= floor {
			out = append(out, fmt.Sprintf("lock %s re-created: %s got token %d, not above %d issued by the lock before it was deleted", lock, g.Claim, g.Token, floor))
		}
	}
	return out
}
