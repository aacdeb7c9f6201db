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

package backendtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// places is the number of places of the shared locks the suite takes.
const places = 3

// RunShared runs the shared-lock part of the conformance suite (backends.Sharer): places never
// exceeded, not even by racers; exclusive and shared holds exclude each other both ways; expiry
// and release free one place and no other; renewal of shared and exclusive leases in one batch
// costs what renewing one does; lost places are reported and not revived. It fails at once for a
// backend that does not implement Sharer.
func RunShared(t *testing.T, h Harness) {
	t.Helper()
	s := newSuite(t, h)
	t.Run("PlacesNeverExceeded", s.placesNeverExceeded)
	t.Run("SharedReentrancy", s.sharedReentrancy)
	t.Run("ExclusiveExcludesShared", s.exclusiveExcludesShared)
	t.Run("SharedExcludesExclusive", s.sharedExcludesExclusive)
	t.Run("LowerLimitActsAsHoldersLeave", s.lowerLimit)
	t.Run("ReleaseFreesOnePlace", s.releaseFreesOnePlace)
	t.Run("ExpiryFreesOnePlace", s.expiryFreesOnePlace)
	t.Run("MixedBatchedRenewal", s.mixedBatchedRenewal)
	t.Run("LostPlaceDetection", s.lostPlaceDetection)
	t.Run("RacingSharedAcquirers", s.racingSharedAcquirers)
	t.Run("RacingModes", s.racingModes)
	t.Run("SharedInvalidArguments", s.sharedInvalidArguments)
}

// sharer is a session as a Sharer; the subtest fails if the backend is not one.
func (s *suite) sharer(t *testing.T) (backends.Backend, backends.Sharer) {
	t.Helper()
	b := s.session(t)
	sh, ok := backends.AsSharer(b)
	if !ok {
		t.Fatalf("backendtest: %T does not implement backends.Sharer", b)
	}
	return b, sh
}

// acquireShared takes a place of key for identity and checks the lease it gets.
func acquireShared(t *testing.T, sh backends.Sharer, key, identity string, ttl time.Duration, places int) backends.Lease {
	t.Helper()
	g := gomega.NewWithT(t)
	l, err := sh.TryAcquireShared(t.Context(), key, identity, ttl, places)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "TryAcquireShared(%q, %q, %d places)", key, identity, places)
	g.Expect(l.Key).To(gomega.Equal(key))
	g.Expect(l.Identity).To(gomega.Equal(identity))
	g.Expect(l.Shared).To(gomega.BeTrue(), "a place's Lease is Shared")
	g.Expect(l.TTL).To(gomega.Equal(ttl), "Lease.TTL is the TTL asked for")
	g.Expect(l.AcquireTime.IsZero()).To(gomega.BeFalse(), "AcquireTime is set")
	g.Expect(l.ExpireTime.Sub(l.AcquireTime)).To(gomega.BeNumerically(">=", ttl-time.Millisecond), "ExpireTime is at least TTL after AcquireTime on a fresh hold: %+v", l)
	return l
}

// expectSharedLocked checks that err is contention, not a failure of the store.
func expectSharedLocked(t *testing.T, err error, what string) {
	t.Helper()
	g := gomega.NewWithT(t)
	g.Expect(err).To(gomega.MatchError(backends.ErrLocked), "%s: the error wraps ErrLocked", what)
	g.Expect(errors.Is(err, backends.ErrNotHeld)).To(gomega.BeFalse(), "%s: ErrLocked is not ErrNotHeld", what)
}

// expectHolders checks who holds key, exclusive or shared.
func expectHolders(t *testing.T, sh backends.Sharer, key string, shared bool, identities ...string) []backends.Lease {
	t.Helper()
	g := gomega.NewWithT(t)
	holders, err := sh.Holders(t.Context(), key)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "Holders(%q)", key)
	got := make([]string, 0, len(holders))
	for _, l := range holders {
		g.Expect(l.Key).To(gomega.Equal(key))
		g.Expect(l.Shared).To(gomega.Equal(shared), "Holders(%q): %+v", key, l)
		got = append(got, l.Identity)
	}
	g.Expect(got).To(gomega.ConsistOf(identities), "Holders(%q)", key)
	return holders
}

// Places are taken one per identity, up to the limit; the next identity is refused; sessions do
// not matter.
func (s *suite) placesNeverExceeded(t *testing.T) {
	g := gomega.NewWithT(t)
	_, sh1 := s.sharer(t)
	_, sh2 := s.sharer(t)
	k := s.key(t, "k")
	var ids []string
	for i := range places {
		id := s.identity(fmt.Sprintf("p%d", i))
		ids = append(ids, id)
		acquireShared(t, []backends.Sharer{sh1, sh2}[i%2], k, id, holdTTL, places)
	}
	_, err := sh2.TryAcquireShared(t.Context(), k, s.identity("late"), holdTTL, places)
	expectSharedLocked(t, err, "a shared acquire when every place is taken")
	_, err = sh1.TryAcquireShared(t.Context(), k, s.identity("late"), holdTTL, places)
	expectSharedLocked(t, err, "the same from another session")
	expectHolders(t, sh1, k, true, ids...)

	// More places let the next one in at once.
	acquireShared(t, sh2, k, s.identity("late"), holdTTL, places+1)
	expectHolders(t, sh2, k, true, append(ids, s.identity("late"))...)

	// Inspect reports one of the places.
	b, _ := s.sharer(t)
	l, err := b.Inspect(t.Context(), k)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(l.Shared).To(gomega.BeTrue(), "Inspect of a shared key reports a place: %+v", l)
	g.Expect(append(ids, s.identity("late"))).To(gomega.ContainElement(l.Identity))
}

// A holder that acquires again keeps its one place, extended; from a new session too.
func (s *suite) sharedReentrancy(t *testing.T) {
	g := gomega.NewWithT(t)
	_, sh := s.sharer(t)
	_, other := s.sharer(t)
	k, a := s.key(t, "k"), s.identity("a")

	first := acquireShared(t, sh, k, a, holdTTL, 2)
	s.wait(tick)
	again := acquireShared(t, sh, k, a, holdTTL, 2)
	g.Expect(again.ExpireTime).To(gomega.BeTemporally(">", first.ExpireTime), "a reentrant acquire extends the place")
	g.Expect(again.AcquireTime).To(gomega.BeTemporally("==", first.AcquireTime), "a reentrant acquire continues the place")
	resumed := acquireShared(t, other, k, a, holdTTL, 2)
	g.Expect(resumed.AcquireTime).To(gomega.BeTemporally("==", first.AcquireTime), "a new session resumes the place")
	expectHolders(t, sh, k, true, a)

	// It took one place, not three: one more identity fits, then none.
	acquireShared(t, other, k, s.identity("b"), holdTTL, 2)
	_, err := sh.TryAcquireShared(t.Context(), k, s.identity("c"), holdTTL, 2)
	expectSharedLocked(t, err, "a third identity on two places")
}

// An exclusive hold refuses every shared acquire, the holder's own identity included, until it is
// released.
func (s *suite) exclusiveExcludesShared(t *testing.T) {
	b, sh := s.sharer(t)
	_, other := s.sharer(t)
	k, w := s.key(t, "k"), s.identity("writer")

	lw := acquire(t, t.Context(), b, k, w, holdTTL)
	expectHolders(t, sh, k, false, w)
	for _, id := range []string{s.identity("reader"), w} {
		_, err := other.TryAcquireShared(t.Context(), k, id, holdTTL, places)
		expectSharedLocked(t, err, "a shared acquire by "+id+" while the key is held exclusively")
	}
	gomega.NewWithT(t).Expect(b.Release(t.Context(), lw)).To(gomega.Succeed())
	acquireShared(t, other, k, s.identity("reader"), holdTTL, places)
}

// One live place refuses every exclusive acquire, the place holder's own identity included,
// until the last place is released.
func (s *suite) sharedExcludesExclusive(t *testing.T) {
	g := gomega.NewWithT(t)
	b, sh := s.sharer(t)
	k := s.key(t, "k")
	r1, r2, w := s.identity("r1"), s.identity("r2"), s.identity("writer")

	l1 := acquireShared(t, sh, k, r1, holdTTL, places)
	l2 := acquireShared(t, sh, k, r2, holdTTL, places)
	for _, id := range []string{w, r1} {
		_, err := b.TryAcquire(t.Context(), k, id, holdTTL)
		expectSharedLocked(t, err, "an exclusive acquire by "+id+" while places are held")
	}
	g.Expect(b.Release(t.Context(), l1)).To(gomega.Succeed())
	_, err := b.TryAcquire(t.Context(), k, w, holdTTL)
	expectSharedLocked(t, err, "an exclusive acquire while one place is held")
	g.Expect(b.Release(t.Context(), l2)).To(gomega.Succeed())
	acquire(t, t.Context(), b, k, w, holdTTL)
	expectHolders(t, sh, k, false, w)
}

// Lowering the number of places never takes one away: holders keep theirs and refresh them, and
// newcomers wait until enough have left.
func (s *suite) lowerLimit(t *testing.T) {
	g := gomega.NewWithT(t)
	b, sh := s.sharer(t)
	k := s.key(t, "k")
	var leases []backends.Lease
	for i := range places {
		leases = append(leases, acquireShared(t, sh, k, s.identity(fmt.Sprintf("p%d", i)), holdTTL, places))
	}
	late := s.identity("late")
	_, err := sh.TryAcquireShared(t.Context(), k, late, holdTTL, 1)
	expectSharedLocked(t, err, "a newcomer after lowering to 1 place")
	acquireShared(t, sh, k, leases[0].Identity, holdTTL, 1) // a holder refreshes its place

	g.Expect(b.Release(t.Context(), leases[0])).To(gomega.Succeed())
	_, err = sh.TryAcquireShared(t.Context(), k, late, holdTTL, 2)
	expectSharedLocked(t, err, "a newcomer on 2 places while 2 are held")
	g.Expect(b.Release(t.Context(), leases[1])).To(gomega.Succeed())
	acquireShared(t, sh, k, late, holdTTL, 2)
	expectHolders(t, sh, k, true, leases[2].Identity, late)
}

// Release frees the releasing identity's place alone; a release of a place not held is nil.
func (s *suite) releaseFreesOnePlace(t *testing.T) {
	g := gomega.NewWithT(t)
	b, sh := s.sharer(t)
	other, _ := s.sharer(t)
	k := s.key(t, "k")
	la := acquireShared(t, sh, k, s.identity("a"), holdTTL, 2)
	lb := acquireShared(t, sh, k, s.identity("b"), holdTTL, 2)

	g.Expect(other.Release(t.Context(), la)).To(gomega.Succeed(), "any session releases a place")
	expectHolders(t, sh, k, true, lb.Identity)
	g.Expect(b.Release(t.Context(), la)).To(gomega.Succeed(), "releasing a place twice")
	stranger := la
	stranger.Identity = s.identity("stranger")
	g.Expect(b.Release(t.Context(), stranger)).To(gomega.Succeed(), "releasing a place never held")
	expectHolders(t, sh, k, true, lb.Identity)

	// The freed place is taken by someone else; a's stale lease cannot free it.
	acquireShared(t, sh, k, s.identity("c"), holdTTL, 2)
	g.Expect(b.Release(t.Context(), la)).To(gomega.Succeed())
	expectHolders(t, sh, k, true, lb.Identity, s.identity("c"))
	g.Expect(b.Release(t.Context(), lb)).To(gomega.Succeed())
	expectHolders(t, sh, k, true, s.identity("c"))
}

// A place that is not renewed expires alone: the others stay, and a newcomer takes it.
func (s *suite) expiryFreesOnePlace(t *testing.T) {
	_, sh := s.sharer(t)
	k := s.key(t, "k")
	short, long := s.identity("short"), s.identity("long")
	acquireShared(t, sh, k, short, s.h.TTL, 2)
	acquireShared(t, sh, k, long, holdTTL, 2)
	_, err := sh.TryAcquireShared(t.Context(), k, s.identity("late"), holdTTL, 2)
	expectSharedLocked(t, err, "a newcomer while both places are held")

	s.waitForExpiry()
	expectHolders(t, sh, k, true, long)
	acquireShared(t, sh, k, s.identity("late"), holdTTL, 2)
	expectHolders(t, sh, k, true, long, s.identity("late"))

	// When every place has expired, the key is free for an exclusive hold.
	k2 := s.key(t, "k2")
	acquireShared(t, sh, k2, short, s.h.TTL, 2)
	s.waitForExpiry()
	expectHolders(t, sh, k2, true)
	b, _ := s.sharer(t)
	acquire(t, t.Context(), b, k2, s.identity("writer"), holdTTL)
}

// Shared and exclusive leases renew in one batch, for what renewing one costs.
func (s *suite) mixedBatchedRenewal(t *testing.T) {
	g := gomega.NewWithT(t)
	b, sh := s.sharer(t)
	var leases []backends.Lease
	before := map[string]backends.Lease{}
	for i := range batchSize {
		k, id := s.key(t, fmt.Sprintf("k%02d", i/places)), s.identity(fmt.Sprintf("id%02d", i))
		var l backends.Lease
		if i%(places+1) == places {
			l = acquire(t, t.Context(), b, s.key(t, fmt.Sprintf("x%02d", i)), id, holdTTL)
		} else {
			l = acquireShared(t, sh, k, id, holdTTL, places)
		}
		leases = append(leases, l)
		before[l.Key+"|"+l.Identity] = l
	}
	s.wait(tick)

	one, _ := s.renewAll(t, t.Context(), b, leases[:1])
	all, renewed := s.renewAll(t, t.Context(), b, leases)
	if s.h.RoundTrips != nil {
		g.Expect(all).To(gomega.BeNumerically("<=", one), "renewing %d mixed leases costs %d requests, renewing 1 costs %d", len(leases), all, one)
	}
	for _, r := range renewed {
		was, ok := before[r.Key+"|"+r.Identity]
		g.Expect(ok).To(gomega.BeTrue(), "renewed a lease it was given: %+v", r)
		g.Expect(r.Shared).To(gomega.Equal(was.Shared), "renewal keeps the lease's kind")
		g.Expect(r.ExpireTime).To(gomega.BeTemporally(">", was.ExpireTime), "renewal extends %q for %q", r.Key, r.Identity)
		g.Expect(r.AcquireTime).To(gomega.BeTemporally("==", was.AcquireTime), "renewal continues the hold")
	}
	for _, l := range expectHolders(t, sh, leases[0].Key, true, leases[0].Identity, leases[1].Identity, leases[2].Identity) {
		g.Expect(l.ExpireTime).To(gomega.BeTemporally(">", before[l.Key+"|"+l.Identity].ExpireTime), "Holders shows the renewed expiry")
	}
}

// Renew reports places that expired or were released, whether or not someone took them since,
// and revives none; the other places of the key renew.
func (s *suite) lostPlaceDetection(t *testing.T) {
	g := gomega.NewWithT(t)
	b, sh := s.sharer(t)
	other, otherSh := s.sharer(t)
	k := s.key(t, "k")
	expired, released, healthy := s.identity("expired"), s.identity("released"), s.identity("healthy")

	lExpired := acquireShared(t, sh, k, expired, s.h.TTL, 2)
	s.waitForExpiry()
	lReleased := acquireShared(t, sh, k, released, holdTTL, 2)
	g.Expect(other.Release(t.Context(), lReleased)).To(gomega.Succeed())
	lHealthy := acquireShared(t, sh, k, healthy, holdTTL, 2)
	taker := acquireShared(t, otherSh, k, s.identity("taker"), holdTTL, 2)

	renewed, lost, err := b.Renew(t.Context(), []backends.Lease{lExpired, lReleased, lHealthy}, holdTTL)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(lost).To(gomega.HaveLen(2))
	for _, l := range lost {
		g.Expect([]string{expired, released}).To(gomega.ContainElement(l.Identity))
		g.Expect(l.Shared).To(gomega.BeTrue(), "lost leases come back as they were given")
	}
	g.Expect(renewed).To(gomega.HaveLen(1))
	g.Expect(renewed[0].Identity).To(gomega.Equal(healthy))
	expectHolders(t, sh, k, true, healthy, taker.Identity)
}

// Racers for the places of one key, over several sessions: exactly as many win as there are
// places, on a free key and on one whose places expired.
func (s *suite) racingSharedAcquirers(t *testing.T) {
	sessions := make([]backends.Sharer, 4)
	for i := range sessions {
		_, sessions[i] = s.sharer(t)
	}
	race := func(t *testing.T, k string) {
		t.Helper()
		g := gomega.NewWithT(t)
		errs := make([]error, racers)
		leases := make([]backends.Lease, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-start
				leases[i], errs[i] = sessions[i%len(sessions)].TryAcquireShared(t.Context(), k, s.identity(fmt.Sprintf("racer%02d", i)), holdTTL, places)
			})
		}
		close(start)
		wg.Wait()
		var winners []string
		for i, err := range errs {
			if err == nil {
				winners = append(winners, leases[i].Identity)
				continue
			}
			expectSharedLocked(t, err, "a losing racer")
		}
		g.Expect(winners).To(gomega.HaveLen(places), "exactly %d racers win; errors: %v", places, errs)
		expectHolders(t, sessions[0], k, true, winners...)
	}
	t.Run("FreeKey", func(t *testing.T) { race(t, s.key(t, "k")) })
	t.Run("ExpiredPlaces", func(t *testing.T) {
		k := s.key(t, "k")
		for i := range places {
			acquireShared(t, sessions[i], k, s.identity(fmt.Sprintf("first%d", i)), s.h.TTL, places)
		}
		s.waitForExpiry()
		race(t, k)
	})
}

// Exclusive and shared racers on one free key: either one exclusive winner alone, or shared
// winners within the places and no exclusive one.
func (s *suite) racingModes(t *testing.T) {
	type racer struct {
		b  backends.Backend
		sh backends.Sharer
	}
	rs := make([]racer, 4)
	for i := range rs {
		rs[i].b, rs[i].sh = s.sharer(t)
	}
	for round := range 3 {
		g := gomega.NewWithT(t)
		k := s.key(t, fmt.Sprintf("k%d", round))
		errs := make([]error, racers)
		exclusive := func(i int) bool { return i%4 == round%4 }
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-start
				r, id := rs[i%len(rs)], s.identity(fmt.Sprintf("r%d-%02d", round, i))
				if exclusive(i) {
					_, errs[i] = r.b.TryAcquire(t.Context(), k, id, holdTTL)
				} else {
					_, errs[i] = r.sh.TryAcquireShared(t.Context(), k, id, holdTTL, places)
				}
			})
		}
		close(start)
		wg.Wait()
		var exclusiveWins, sharedWins int
		for i, err := range errs {
			switch {
			case err == nil && exclusive(i):
				exclusiveWins++
			case err == nil:
				sharedWins++
			default:
				expectSharedLocked(t, err, "a losing racer")
			}
		}
		if exclusiveWins > 0 {
			g.Expect(exclusiveWins).To(gomega.Equal(1), "round %d: one exclusive winner at most", round)
			g.Expect(sharedWins).To(gomega.BeZero(), "round %d: no place beside an exclusive hold", round)
			continue
		}
		g.Expect(sharedWins).To(gomega.Equal(places), "round %d: every place is taken when no exclusive racer won; errors: %v", round, errs)
	}
}

// Place counts no store can serve are refused, and not mistaken for contention.
func (s *suite) sharedInvalidArguments(t *testing.T) {
	g := gomega.NewWithT(t)
	_, sh := s.sharer(t)
	k, a := s.key(t, "k"), s.identity("a")
	for name, call := range map[string]func() error{
		"zero places":     func() error { _, err := sh.TryAcquireShared(t.Context(), k, a, holdTTL, 0); return err },
		"negative places": func() error { _, err := sh.TryAcquireShared(t.Context(), k, a, holdTTL, -1); return err },
		"empty key":       func() error { _, err := sh.TryAcquireShared(t.Context(), "", a, holdTTL, places); return err },
		"empty identity":  func() error { _, err := sh.TryAcquireShared(t.Context(), k, "", holdTTL, places); return err },
		"zero TTL":        func() error { _, err := sh.TryAcquireShared(t.Context(), k, a, 0, places); return err },
	} {
		err := call()
		g.Expect(err).To(gomega.HaveOccurred(), name)
		g.Expect(errors.Is(err, backends.ErrLocked)).To(gomega.BeFalse(), name)
	}
	expectHolders(t, sh, k, true)
}
