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

// Package reliability is the reliability harness of issue #9: claimants standing for pods take
// locks through a real API server and a manager running as separate processes, write to a fenced
// resource under faults, and checkers decide from the recorded history whether anything was
// lost. The checkers, the resource and the report live here (plain Go, unit-tested with broken
// inputs); the harness that drives real processes is behind the build tag `reliability`.
package reliability

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// EndKind is how a claimant's hold ended.
type EndKind string

// The ways a hold ends.
const (
	// EndRelease: the claimant deleted its claim.
	EndRelease EndKind = "release"
	// EndPodDelete: the claimant's pod object was deleted.
	EndPodDelete EndKind = "pod-delete"
	// EndSilentDeath: the claimant stopped without a word; later its pod was marked Failed, as
	// a kubelet would after the container died.
	EndSilentDeath EndKind = "silent-death"
	// EndSucceeded: the claimant finished its work and exited 0; its pod was marked Succeeded.
	// Nothing of the holder is left, so the lock is free at once, lock delay or not.
	EndSucceeded EndKind = "succeeded"
	// EndHang: the claimant stopped (as after SIGSTOP) for one to two TTLs with its pod alive,
	// then went on (SIGCONT): one more write with its token, then it deleted its claim. A pod
	// that lives keeps its lock, so the hold must outlast the hang unless a fault took it.
	EndHang EndKind = "hang"
	// EndGracefulDelete: the claimant's pod was deleted with its grace period (kubectl delete, a
	// rollout), so that it stayed terminating while its process went on, then was removed (as
	// the kubelet does once the process exited). A terminating Standby holder keeps its lock until
	// its pod is gone. EndAt is the removal.
	EndGracefulDelete EndKind = "graceful-delete"
	// EndNodeLoss: the Node of the claimant's pod turned Ready=Unknown while the claimant went on
	// writing, cut off, as a process on a partitioned node does; the lock's
	// holderNodeLossSeconds ends the hold, and the claimant's later writes are a zombie's.
	EndNodeLoss EndKind = "node-loss"
)

// Grant is one claim's life on a lock, as the harness saw it through a watch on the real API
// server. Zero times mean "did not happen".
type Grant struct {
	// Lock is namespace/name of the DistributedLock; Claim is the claim's name (one claim per
	// claimant run, so it also names the writer).
	Lock, Claim string
	// Created is when the claimant created the claim (the acquire call).
	Created time.Time
	// Acquired is when the watch first showed the claim Held; Token is its fencing token and
	// Identity its status.holderIdentity (what the backend holds the key for).
	Acquired time.Time
	Token    int64
	Identity string
	// HeldRevision is the resourceVersion (an etcd revision) of the claim write first seen
	// Held, on the built-in backend whose records share that store's order; 0 when unknown.
	HeldRevision int64
	// Exclusive: the claim asked for the lock alone (spec.mode Exclusive); on a lock of one
	// place every hold is alone whatever it asked.
	Exclusive bool
	// LastRenew is the latest status.renewTime the watch showed while Held: the backend held
	// the lock then, so a loss happened after it.
	LastRenew time.Time
	// End is what the claimant did to end the hold, and EndAt when it did it.
	End   EndKind
	EndAt time.Time
	// Released is when the watch first showed the claim no longer held (Released, Lost, or
	// deleted); Lost says it was phase Lost (the controller lost the lock, not a release).
	Released time.Time
	Lost     bool
	// ReleasedRevision is the resourceVersion (an etcd revision of the harness's API server) of
	// the claim write first seen no longer held; 0 when unknown.
	ReleasedRevision int64
	// Phase and Reason are the claim's phase and Acquired reason when it was first seen final
	// (empty when it was deleted while held).
	Phase, Reason, Message string
	// AcquireTime is the claim's status.acquireTime when it was first seen Held, and
	// ReleaseTime its status.releaseTime when it was first seen final: the times of the passes
	// that granted and ended the hold, on the controller's clock (zero when not written, e.g. a
	// claim deleted while held, which the controller releases without writing its status).
	AcquireTime, ReleaseTime time.Time
	// Evicted is when the watch first showed the claim's Evicted condition True (lossPolicy
	// Evict), and PodGone when the harness first saw the claim's pod deleting or gone after the
	// claim was Lost (recorded in scenarios with lossPolicy Evict only).
	Evicted, PodGone time.Time
	// Pending says the claim was still waiting at the end of the run.
	Pending bool
	// HeldThroughHang says, for End == EndHang, that the claim was still Held when the hang
	// ended.
	HeldThroughHang bool
	// HeldAgain is when the watch showed the claim Held after it had been seen ended (a final
	// phase), and HeldAgainToken the token it showed then: never, in a correct controller.
	HeldAgain      time.Time
	HeldAgainToken int64
	// Reenters names, for a re-entry's claim (a second claim of the holder's pod made while it
	// holds), the claim whose hold it re-enters; GaveUp is when the claimant stopped waiting for
	// it to be Held, if it did.
	Reenters string
	GaveUp   time.Time
}

// CheckTokens checks S2 over the grants of every lock, in the order they were observed: each
// new grant's token is above every token issued before it on that lock (strictly increasing,
// never duplicated, never regressing). It returns one line per violation.
func CheckTokens(grants []Grant) []string {
	var out []string
	byLock := map[string][]Grant{}
	for _, g := range grants {
		if !g.Acquired.IsZero() {
			byLock[g.Lock] = append(byLock[g.Lock], g)
		}
	}
	for _, lock := range sortedKeys(byLock) {
		gs := byLock[lock]
		sort.SliceStable(gs, func(i, j int) bool { return gs[i].Acquired.Before(gs[j].Acquired) })
		var highest int64
		var by string
		seen := map[int64]string{}
		for _, g := range gs {
			if o, dup := seen[g.Token]; dup {
				out = append(out, fmt.Sprintf("lock %s: token %d issued to %s and again to %s", lock, g.Token, o, g.Claim))
			} else if g.Token <= highest {
				out = append(out, fmt.Sprintf("lock %s: %s got token %d, not above %d issued earlier to %s", lock, g.Claim, g.Token, highest, by))
			}
			seen[g.Token] = g.Claim
			if g.Token > highest {
				highest, by = g.Token, g.Claim
			}
		}
	}
	return out
}

// CheckExclusion checks that two claims of one lock were never observed Held at once: each
// grant must be observed after the previous holder was observed released. Since the controller
// marks a claim not-held before granting the next, the watch must show them in that order.
func CheckExclusion(grants []Grant) []string {
	var out []string
	byLock := map[string][]Grant{}
	for _, g := range grants {
		if !g.Acquired.IsZero() {
			byLock[g.Lock] = append(byLock[g.Lock], g)
		}
	}
	for _, lock := range sortedKeys(byLock) {
		gs := byLock[lock]
		sort.SliceStable(gs, func(i, j int) bool { return gs[i].Acquired.Before(gs[j].Acquired) })
		for i := 1; i < len(gs); i++ {
			prev, g := gs[i-1], gs[i]
			if prev.Released.IsZero() || g.Acquired.Before(prev.Released) {
				out = append(out, fmt.Sprintf("lock %s: %s (token %d) observed Held at %s while %s (token %d) was still Held",
					lock, g.Claim, g.Token, g.Acquired.Format(time.StampMicro), prev.Claim, prev.Token))
			}
		}
	}
	return out
}

// Liveness sums up how fast locks changed hands and what was left waiting.
type Liveness struct {
	// Handoffs are the latencies from a holder's end (release, pod deletion, pod marked Failed)
	// to the next waiter observed Held, for ends at which a waiter was queued; HandoffsAfter
	// splits them by the way the hold ended (a hang ends with a release).
	Handoffs      []time.Duration
	HandoffsAfter map[EndKind][]time.Duration
	// Hangs counts holds that ended with a hang, and HeldThroughHangs those still Held after it.
	Hangs, HeldThroughHangs int
	// Stuck lists the claims still Pending at the end of the run.
	Stuck []string
	// Lost counts holds that ended in phase Lost rather than by the claimant's end.
	Lost int
}

// ComputeLiveness measures handoff latency and lists stuck claims.
func ComputeLiveness(grants []Grant) Liveness {
	l := Liveness{HandoffsAfter: map[EndKind][]time.Duration{}}
	byLock := map[string][]Grant{}
	for _, g := range grants {
		byLock[g.Lock] = append(byLock[g.Lock], g)
		if g.End == EndHang {
			l.Hangs++
			if g.HeldThroughHang {
				l.HeldThroughHangs++
			}
		}
		if g.Pending {
			l.Stuck = append(l.Stuck, g.Lock+"/"+g.Claim)
		}
		if g.Lost {
			l.Lost++
		}
	}
	for _, lock := range sortedKeys(byLock) {
		gs := byLock[lock]
		for _, h := range gs {
			if h.Acquired.IsZero() || h.EndAt.IsZero() || h.Lost || h.Released.IsZero() || h.EndAt.After(h.Released) {
				continue
			}
			// The next grant after this end, of a claim that was already waiting.
			var next *Grant
			for i := range gs {
				g := &gs[i]
				if g.Acquired.IsZero() || !g.Acquired.After(h.EndAt) || !g.Created.Before(h.EndAt) {
					continue
				}
				if next == nil || g.Acquired.Before(next.Acquired) {
					next = g
				}
			}
			if next != nil {
				d := next.Acquired.Sub(h.EndAt)
				l.Handoffs = append(l.Handoffs, d)
				kind := h.End
				if kind == EndHang {
					kind = EndRelease
				}
				l.HandoffsAfter[kind] = append(l.HandoffsAfter[kind], d)
			}
		}
	}
	slices.Sort(l.Handoffs)
	for _, ds := range l.HandoffsAfter {
		slices.Sort(ds)
	}
	slices.Sort(l.Stuck)
	return l
}

// Percentile returns the p-th percentile (0..100) of sorted durations; 0 when there are none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1)*p/100 + 0.5)
	return sorted[min(i, len(sorted)-1)]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// LongestHold is the longest a claim was seen Held before it was seen released, over the holds
// that ended other than Lost: what a long-hold run proves renewal kept alive.
func LongestHold(grants []Grant) time.Duration {
	var longest time.Duration
	for _, g := range grants {
		if g.Lost || g.Acquired.IsZero() || g.Released.IsZero() {
			continue
		}
		longest = max(longest, g.Released.Sub(g.Acquired))
	}
	return longest
}
