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
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

var severalT0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// severalClaim is a claim on the given locks (one name: a one-lock claim).
func severalClaim(locks ...string) *locksv1alpha1.LockClaim {
	c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: "deploy", Namespace: "ns",
		CreationTimestamp: metav1.NewTime(severalT0)}}
	if len(locks) == 1 {
		c.Spec.LockName = locks[0]
	} else {
		c.Spec.LockNames = locks
	}
	return c
}

// heldOn marks c Held on its locks, lock i with token 10+i expiring i seconds after severalT0+10s.
func heldOn(c *locksv1alpha1.LockClaim) *locksv1alpha1.LockClaim {
	c.Status.Phase = locksv1alpha1.ClaimHeld
	for i, l := range claimLocks(c) {
		c.Status.Locks = append(c.Status.Locks, locksv1alpha1.ClaimLock{LockName: l, FencingToken: int64(10 + i),
			ExpireTime: micro(severalT0.Add(10*time.Second + time.Duration(i)*time.Second))})
	}
	c.Status.ExpireTime = earliestExpiry(c.Status.Locks)
	return c
}

func TestClaimLocksAndHome(t *testing.T) {
	if got := claimLocks(severalClaim("db")); !slices.Equal(got, []string{"db"}) {
		t.Errorf("one lock: %v", got)
	}
	c := severalClaim("staging", "prod", "cache")
	if got := claimLocks(c); !slices.Equal(got, []string{"cache", "prod", "staging"}) {
		t.Errorf("claimLocks = %v, want name order", got)
	}
	if got := homeLock(c); got != "cache" {
		t.Errorf("homeLock = %q, want the first in name order", got)
	}
	if !slices.Equal(c.Spec.LockNames, []string{"staging", "prod", "cache"}) {
		t.Errorf("claimLocks reordered the spec: %v", c.Spec.LockNames)
	}
}

func TestPartOnShowsEachLocksTokenAndExpiry(t *testing.T) {
	c := heldOn(severalClaim("b", "a"))
	for i, l := range []string{"a", "b"} {
		p := partOn(c, l)
		if p.Status.FencingToken != int64(10+i) || !p.Status.ExpireTime.Time.Equal(severalT0.Add(10*time.Second+time.Duration(i)*time.Second)) {
			t.Errorf("part on %s: token %d, expiry %v", l, p.Status.FencingToken, p.Status.ExpireTime)
		}
	}
	if c.Status.FencingToken != 0 || !c.Status.ExpireTime.Time.Equal(severalT0.Add(10*time.Second)) {
		t.Errorf("partOn changed the claim: %+v", c.Status)
	}
	waiting := severalClaim("a", "b")
	waiting.Status.Phase = locksv1alpha1.ClaimPending
	if p := partOn(waiting, "a"); p.Status.Phase != locksv1alpha1.ClaimPending || p.Status.FencingToken != 0 {
		t.Errorf("a waiting claim's part: %+v", p.Status)
	}
	one := severalClaim("db")
	one.Status.Phase, one.Status.FencingToken = locksv1alpha1.ClaimHeld, 7
	if p := partOn(one, "db"); p.Status.FencingToken != 7 {
		t.Errorf("a one-lock claim's part changed: %+v", p.Status)
	}
}

func TestWithPartPutsTheRefreshBack(t *testing.T) {
	whole := heldOn(severalClaim("a", "b"))
	before := partOn(whole, "a")
	after := before.DeepCopy()
	markRenewed(after, severalT0.Add(20*time.Second), severalT0.Add(30*time.Second))
	w := withPart(whole, before, after, "a")
	if w.Status.FencingToken != 0 {
		t.Errorf("the claim's own token: %d, want none", w.Status.FencingToken)
	}
	if got := partOf(&w.Status, "a").ExpireTime.Time; !got.Equal(severalT0.Add(30 * time.Second)) {
		t.Errorf("a's expiry = %v, want the refresh", got)
	}
	if got := partOf(&w.Status, "b").ExpireTime.Time; !got.Equal(severalT0.Add(11 * time.Second)) {
		t.Errorf("b's expiry = %v, want it unchanged", got)
	}
	if got := w.Status.ExpireTime.Time; !got.Equal(severalT0.Add(11 * time.Second)) {
		t.Errorf("the claim's expiry = %v, want the earliest of its locks' (b's)", got)
	}
	if partOf(&whole.Status, "a").ExpireTime.Time.Equal(severalT0.Add(30 * time.Second)) {
		t.Error("withPart changed the claim as read")
	}
}

func TestWithPartOfAnEnding(t *testing.T) {
	whole := heldOn(severalClaim("a", "b"))
	before := partOn(whole, "b")
	after := before.DeepCopy()
	markEnded(after, locksv1alpha1.ClaimLost, locksv1alpha1.ReasonRenewFailed, "lost b", severalT0.Add(12*time.Second))
	w := withPart(whole, before, after, "b")
	if w.Status.Phase != locksv1alpha1.ClaimLost || w.Status.FencingToken != 0 {
		t.Errorf("ended claim: phase %s token %d", w.Status.Phase, w.Status.FencingToken)
	}
	if !w.Status.ExpireTime.Time.Equal(whole.Status.ExpireTime.Time) {
		t.Errorf("the claim's expiry = %v, want it as it was", w.Status.ExpireTime)
	}
	if partOf(&w.Status, "b").FencingToken != 11 {
		t.Error("the ended claim's tokens are kept, for the record")
	}
}

func TestPartFateOf(t *testing.T) {
	waiting := func(reason string, parts ...locksv1alpha1.ClaimLock) *locksv1alpha1.LockClaim {
		c := severalClaim("a", "b")
		markWaiting(c, 1, true, reason, "")
		c.Status.Locks = parts
		return c
	}
	ended := severalClaim("a", "b")
	markEnded(ended, locksv1alpha1.ClaimLost, locksv1alpha1.ReasonRenewFailed, "", severalT0)
	cases := []struct {
		name  string
		claim *locksv1alpha1.LockClaim
		token int64
		want  partFate
	}{
		{"a held claim keeps its part", heldOn(severalClaim("a", "b")), 10, partKept},
		{"an ended claim's part is released", ended, 10, partEnded},
		{"a waiting claim's entry is marked first", waiting(locksv1alpha1.ReasonQueued), 10, partMarked},
		{"an entry the claim lists is given back", waiting(locksv1alpha1.ReasonPartialGrant,
			locksv1alpha1.ClaimLock{LockName: "a", FencingToken: 10}), 10, partGivenBack},
		{"an entry of another grant than the one listed is marked again", waiting(locksv1alpha1.ReasonPartialGrant,
			locksv1alpha1.ClaimLock{LockName: "a", FencingToken: 9}), 10, partMarked},
		{"a list from an earlier round, no longer PartialGrant, is marked again", waiting(locksv1alpha1.ReasonQueued,
			locksv1alpha1.ClaimLock{LockName: "a", FencingToken: 10}), 10, partMarked},
		{"another lock's listing is not this one's", waiting(locksv1alpha1.ReasonPartialGrant,
			locksv1alpha1.ClaimLock{LockName: "b", FencingToken: 10}), 10, partMarked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := partFateOf(tc.claim, "a", tc.token); got != tc.want {
				t.Errorf("partFateOf = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestOvertakable(t *testing.T) {
	ttl := 10 * time.Second
	c := severalClaim("a", "b")
	if !overtakable(c, ttl, severalT0.Add(9*time.Second)) || overtakable(c, ttl, severalT0.Add(10*time.Second)) {
		t.Error("before its first status write the bound counts from creation")
	}
	markWaiting(c, 3, true, locksv1alpha1.ReasonQueued, "")
	meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionAcquired).LastTransitionTime = metav1.NewTime(severalT0.Add(5 * time.Second))
	if !overtakable(c, ttl, severalT0.Add(14*time.Second)) || overtakable(c, ttl, severalT0.Add(15*time.Second)) {
		t.Error("once queued the bound counts from the Acquired condition's transition")
	}
}

// lineSlots spells a queue for lineUp: "S" and "X" as for slots, "M" an Exclusive several-lock
// claim that may still be overtaken, "m" one past its bound, "MS" and "mS" the same in Shared
// mode.
func lineSlots(spec string) []lineSlot {
	var out []lineSlot
	for i, f := range strings.Fields(spec) {
		var ls lineSlot
		base := f
		if f[0] == 'M' || f[0] == 'm' {
			ls.several, ls.overtakable = true, f[0] == 'M'
			base = "X"
			if len(f) > 1 {
				base = f[1:]
			}
		}
		w, _ := slots(base)
		ls.waiterSlot = w[0]
		ls.identity = "id" + string(rune('a'+i))
		out = append(out, ls)
	}
	return out
}

func TestLineUp(t *testing.T) {
	cases := []struct {
		name       string
		queue      string
		holds      string
		maxHolders int32
		line       []int
		ready      int
	}{
		{"no several-lock claim: the whole queue is in line", "X X", "", 1, []int{0, 1}, -1},
		{"a several-lock head of a free lock is ready, and may be overtaken", "M X X", "", 1, []int{1, 2}, 0},
		{"past its bound it is ready and nothing behind it is in line", "m X X", "", 1, nil, 0},
		{"a held lock: not ready, overtaken while it may be", "M X", "X", 1, []int{1}, -1},
		{"a held lock past the bound: not ready, the line ends at it", "X m X", "X", 1, []int{0}, -1},
		{"behind a waiting claim it is not first in line", "X M", "", 1, []int{0}, -1},
		{"the first ready several-lock claim is the one", "M M X", "", 1, []int{2}, 0},
		{"a second several-lock claim past its bound ends the line", "M m X", "", 1, nil, 0},
		{"a shared several-lock claim beside shared holders is ready", "MS S", "S", 3, []int{1}, 0},
		{"an exclusive several-lock claim beside shared holders is not", "M S", "S", 3, []int{1}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, holds := slots(tc.holds)
			line, ready := lineUp(lineSlots(tc.queue), holds, tc.maxHolders)
			if !slices.Equal(line, tc.line) || ready != tc.ready {
				t.Errorf("lineUp(%q, holds %q) = %v, %d; want %v, %d", tc.queue, tc.holds, line, ready, tc.line, tc.ready)
			}
		})
	}
}
