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

// Package backendtest is the conformance suite that every backends.Backend runs against a real
// server (the fake runs it with a fake clock). It checks the promises of the Backend interface
// that controllers rely on: mutual exclusion, reentrancy by identity, resumption from a new
// session, owner-checked release, expiry, batched renewal whose cost does not grow with the batch,
// detection of lost locks without reviving them, and races.
//
// Subtests run one after another and use keys and identities unique to the run and the subtest,
// so any number of runs can share one server. Sessions are closed when their subtest ends.
package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// Harness tells the suite how to open sessions on the backend under test.
type Harness struct {
	// New opens a fresh session on the store under test. Every session of one Run must see the
	// same store. The suite closes the sessions it opens.
	New func(t *testing.T) backends.Backend
	// TTL is the short TTL the expiry tests use, e.g. 1-2 s for a real server. The suite waits
	// TTL rounded up to a whole second, plus a second, for a lock to expire.
	TTL time.Duration
	// Advance, when set, moves the fake clock the backend measures time with. When nil the suite
	// sleeps real time.
	Advance func(d time.Duration)
	// RoundTrips, when set, returns how many requests session b has sent to the store so far; the
	// suite then checks that renewing many leases costs no more requests than renewing one.
	RoundTrips func(b backends.Backend) int64
}

const (
	// holdTTL is the TTL of holds that must not expire during a subtest, however slow the machine.
	holdTTL = 60 * time.Second
	// tick is a pause after which any backend's clock has moved on.
	tick = 100 * time.Millisecond
	// callTimeout bounds each subtest's calls; backends answer far sooner.
	callTimeout = 2 * time.Minute
	// batchSize is how many leases the batched renewal test renews in one call.
	batchSize = 50
	// racers is how many goroutines race for one key.
	racers = 20
	// maxKeyLength is the longest key lockwarden passes to a backend (DistributedLock spec.key).
	maxKeyLength = 512
)

// Run runs the conformance suite against the backend that h opens.
func Run(t *testing.T, h Harness) {
	t.Helper()
	s := newSuite(t, h)
	t.Run("MutualExclusion", s.mutualExclusion)
	t.Run("Reentrancy", s.reentrancy)
	t.Run("ResumeInNewSessionByTryAcquire", s.resumeByTryAcquire)
	t.Run("ResumeInNewSessionByRenew", s.resumeByRenew)
	t.Run("OwnerCheckedRelease", s.ownerCheckedRelease)
	t.Run("ReleaseThenAcquire", s.releaseThenAcquire)
	t.Run("ExpiryWithoutRenewal", s.expiryWithoutRenewal)
	t.Run("BatchedRenewal", s.batchedRenewal)
	t.Run("LostDetection", s.lostDetection)
	t.Run("ReleaseOfExpiredLock", s.releaseOfExpiredLock)
	t.Run("Inspect", s.inspect)
	t.Run("Concurrency", s.concurrency)
	t.Run("MonotonicState", s.monotonicState)
	t.Run("LongKeys", s.longKeys)
	t.Run("InvalidArguments", s.invalidArguments)
	t.Run("Ping", s.ping)
}

// newSuite checks the harness and starts a run of the suite with keys of its own.
func newSuite(t *testing.T, h Harness) *suite {
	t.Helper()
	if h.New == nil || h.TTL <= 0 {
		t.Fatalf("backendtest: Harness needs New and a positive TTL, got New set %t, TTL %s", h.New != nil, h.TTL)
	}
	return &suite{h: h, run: randomID()}
}

// suite carries the harness and what makes this run's keys unique.
type suite struct {
	h Harness
	// run is random per Run, so that runs sharing a server never share a key.
	run string
}

// randomID returns 12 random hex digits.
func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// session opens a session and closes it when the subtest ends.
func (s *suite) session(t *testing.T) backends.Backend {
	t.Helper()
	b := s.h.New(t)
	if b == nil {
		t.Fatal("backendtest: Harness.New returned nil")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// ctx bounds a subtest's calls.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// key returns a key unique to this run and subtest. Keys contain '/', as lockwarden's do.
func (s *suite) key(t *testing.T, name string) string {
	return fmt.Sprintf("backendtest/%s/%s/%s", s.run, t.Name(), name)
}

// identity returns a holder identity unique to this run.
func (s *suite) identity(name string) string {
	return s.run + "-" + name
}

// wait lets d pass on the backend's clock.
func (s *suite) wait(d time.Duration) {
	if s.h.Advance != nil {
		s.h.Advance(d)
		return
	}
	time.Sleep(d)
}

// waitForExpiry waits until a lock taken with the harness TTL just before has surely expired.
// Backends may round TTLs up to whole seconds (Kubernetes Lease, Redis EX).
func (s *suite) waitForExpiry() {
	whole := s.h.TTL.Truncate(time.Second)
	if whole < s.h.TTL {
		whole += time.Second
	}
	s.wait(whole + time.Second)
}

// acquire takes key for identity and checks the lease it gets.
func acquire(t *testing.T, ctx context.Context, b backends.Backend, key, identity string, ttl time.Duration) backends.Lease {
	t.Helper()
	g := gomega.NewWithT(t)
	l, err := b.TryAcquire(ctx, key, identity, ttl)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "TryAcquire(%q, %q)", key, identity)
	g.Expect(l.Key).To(gomega.Equal(key))
	g.Expect(l.Identity).To(gomega.Equal(identity))
	g.Expect(l.TTL).To(gomega.Equal(ttl), "Lease.TTL is the TTL asked for")
	g.Expect(l.AcquireTime.IsZero()).To(gomega.BeFalse(), "AcquireTime is set")
	// A backend may round the TTL up to whole seconds, never down.
	g.Expect(l.ExpireTime.Sub(l.AcquireTime)).To(gomega.BeNumerically(">=", ttl-time.Millisecond), "ExpireTime is at least TTL after AcquireTime on a fresh hold: %+v", l)
	return l
}

// expectLocked checks that err says key is held by holder.
func expectLocked(t *testing.T, err error, key, holder string) *backends.LockedError {
	t.Helper()
	g := gomega.NewWithT(t)
	g.Expect(err).To(gomega.MatchError(backends.ErrLocked), "error wraps ErrLocked")
	g.Expect(errors.Is(err, backends.ErrNotHeld)).To(gomega.BeFalse(), "ErrLocked is not ErrNotHeld")
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(gomega.BeTrue(), "error is a *LockedError: %v", err)
	g.Expect(locked.Key).To(gomega.Equal(key))
	g.Expect(locked.Holder).To(gomega.Equal(holder), "LockedError names the holder")
	return locked
}

// expectHolder checks that Inspect reports identity as key's holder and returns the lease.
func expectHolder(t *testing.T, ctx context.Context, b backends.Backend, key, identity string) backends.Lease {
	t.Helper()
	g := gomega.NewWithT(t)
	l, err := b.Inspect(ctx, key)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "Inspect(%q)", key)
	g.Expect(l.Key).To(gomega.Equal(key))
	g.Expect(l.Identity).To(gomega.Equal(identity))
	return l
}

// expectFree checks that Inspect reports key as not held.
func expectFree(t *testing.T, ctx context.Context, b backends.Backend, key string) {
	t.Helper()
	_, err := b.Inspect(ctx, key)
	gomega.NewWithT(t).Expect(err).To(gomega.MatchError(backends.ErrNotHeld), "Inspect(%q) of a free key", key)
}

// keysOf lists the keys of leases.
func keysOf(leases []backends.Lease) []string {
	keys := make([]string, 0, len(leases))
	for _, l := range leases {
		keys = append(keys, l.Key)
	}
	return keys
}

// Two sessions, two identities: the second is refused and told who holds the lock.
func (s *suite) mutualExclusion(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	s1, s2 := s.session(t), s.session(t)
	k := s.key(t, "k")
	a, b := s.identity("a"), s.identity("b")

	la := acquire(t, ctx, s1, k, a, holdTTL)

	_, err := s2.TryAcquire(ctx, k, b, holdTTL)
	locked := expectLocked(t, err, k, a)
	if !locked.ExpireTime.IsZero() {
		g.Expect(locked.ExpireTime).To(gomega.BeTemporally("~", la.ExpireTime, time.Second), "LockedError.ExpireTime is the holder's expiry")
	}
	// The session does not matter, the identity does.
	_, err = s1.TryAcquire(ctx, k, b, holdTTL)
	_ = expectLocked(t, err, k, a)

	expectHolder(t, ctx, s2, k, a)
	// Other keys are independent.
	acquire(t, ctx, s2, s.key(t, "other"), b, holdTTL)
}

// The holder acquires again: the same hold, extended.
func (s *suite) reentrancy(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	b := s.session(t)
	k, a := s.key(t, "k"), s.identity("a")

	first := acquire(t, ctx, b, k, a, holdTTL)
	s.wait(tick)
	again := acquire(t, ctx, b, k, a, holdTTL)
	g.Expect(again.ExpireTime).To(gomega.BeTemporally(">", first.ExpireTime), "a reentrant acquire extends the hold")
	g.Expect(again.AcquireTime).To(gomega.BeTemporally("==", first.AcquireTime), "a reentrant acquire continues the hold")

	_, err := b.TryAcquire(ctx, k, s.identity("b"), holdTTL)
	_ = expectLocked(t, err, k, a)
}

// A new session (a restarted controller) takes up a hold of the same identity with TryAcquire.
func (s *suite) resumeByTryAcquire(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	old := s.session(t)
	k, a := s.key(t, "k"), s.identity("a")
	first := acquire(t, ctx, old, k, a, holdTTL)

	s.wait(tick)
	restarted := s.session(t)
	resumed := acquire(t, ctx, restarted, k, a, holdTTL)
	g.Expect(resumed.AcquireTime).To(gomega.BeTemporally("==", first.AcquireTime), "resuming continues the hold")
	g.Expect(resumed.ExpireTime).To(gomega.BeTemporally(">", first.ExpireTime))

	_, err := restarted.TryAcquire(ctx, k, s.identity("b"), holdTTL)
	_ = expectLocked(t, err, k, a)
	expectHolder(t, ctx, old, k, a)

	renewed, lost, err := restarted.Renew(ctx, []backends.Lease{resumed}, holdTTL)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(lost).To(gomega.BeEmpty())
	g.Expect(keysOf(renewed)).To(gomega.ConsistOf(k))
}

// A new session (a restarted controller) takes up a hold of the same identity with Renew alone.
func (s *suite) resumeByRenew(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	old := s.session(t)
	k, a := s.key(t, "k"), s.identity("a")
	first := acquire(t, ctx, old, k, a, holdTTL)

	s.wait(tick)
	restarted := s.session(t)
	renewed, lost, err := restarted.Renew(ctx, []backends.Lease{first}, holdTTL)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(lost).To(gomega.BeEmpty(), "the identity still holds the lock, whichever session renews it")
	g.Expect(renewed).To(gomega.HaveLen(1))
	g.Expect(renewed[0].Key).To(gomega.Equal(k))
	g.Expect(renewed[0].Identity).To(gomega.Equal(a))
	g.Expect(renewed[0].ExpireTime).To(gomega.BeTemporally(">", first.ExpireTime))
	g.Expect(renewed[0].AcquireTime).To(gomega.BeTemporally("==", first.AcquireTime))

	got := expectHolder(t, ctx, restarted, k, a)
	g.Expect(got.ExpireTime).To(gomega.BeTemporally("~", renewed[0].ExpireTime, time.Second))
	_, err = old.TryAcquire(ctx, k, s.identity("b"), holdTTL)
	_ = expectLocked(t, err, k, a)
}

// Releasing as another identity fails and leaves the holder alone.
func (s *suite) ownerCheckedRelease(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	s1, s2 := s.session(t), s.session(t)
	k, a, b := s.key(t, "k"), s.identity("a"), s.identity("b")
	held := acquire(t, ctx, s1, k, a, holdTTL)

	foreign := held
	foreign.Identity = b
	g.Expect(s2.Release(ctx, foreign)).To(gomega.MatchError(backends.ErrNotHeld))
	g.Expect(s1.Release(ctx, foreign)).To(gomega.MatchError(backends.ErrNotHeld))

	got := expectHolder(t, ctx, s2, k, a)
	if held.Version != "" {
		g.Expect(got.Version).To(gomega.Equal(held.Version), "a refused release leaves the hold untouched")
	}
	_, err := s2.TryAcquire(ctx, k, b, holdTTL)
	_ = expectLocked(t, err, k, a)

	// The holder's identity may release from any session.
	g.Expect(s2.Release(ctx, held)).To(gomega.Succeed())
	expectFree(t, ctx, s1, k)
}

// After a release the key is free at once: no waiting for the TTL.
func (s *suite) releaseThenAcquire(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	s1, s2 := s.session(t), s.session(t)
	k, a, b := s.key(t, "k"), s.identity("a"), s.identity("b")

	la := acquire(t, ctx, s1, k, a, holdTTL)
	g.Expect(s1.Release(ctx, la)).To(gomega.Succeed())
	expectFree(t, ctx, s2, k)
	g.Expect(s1.Release(ctx, la)).To(gomega.Succeed(), "releasing a free lock is not an error")

	renewed, lost, err := s1.Renew(ctx, []backends.Lease{la}, holdTTL)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(renewed).To(gomega.BeEmpty(), "a released lease cannot be renewed")
	g.Expect(keysOf(lost)).To(gomega.ConsistOf(k))
	expectFree(t, ctx, s2, k)

	lb := acquire(t, ctx, s2, k, b, holdTTL)
	if la.Version != "" {
		g.Expect(lb.Version).NotTo(gomega.Equal(la.Version), "a new hold has a new Version")
	}
	g.Expect(s1.Release(ctx, la)).To(gomega.MatchError(backends.ErrNotHeld), "the old lease cannot release the new holder")
	expectHolder(t, ctx, s1, k, b)
}

// A lock nobody renews expires after its TTL and another identity can take it.
func (s *suite) expiryWithoutRenewal(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	s1, s2 := s.session(t), s.session(t)
	k, a, b := s.key(t, "k"), s.identity("a"), s.identity("b")

	la := acquire(t, ctx, s1, k, a, s.h.TTL)
	_, err := s2.TryAcquire(ctx, k, b, holdTTL)
	_ = expectLocked(t, err, k, a)

	s.waitForExpiry()
	expectFree(t, ctx, s2, k)
	lb := acquire(t, ctx, s2, k, b, holdTTL)
	g.Expect(lb.AcquireTime).To(gomega.BeTemporally(">", la.AcquireTime), "a new hold starts after the old one")
	if la.Version != "" {
		g.Expect(lb.Version).NotTo(gomega.Equal(la.Version))
	}
	expectHolder(t, ctx, s1, k, b)
}

// Fifty leases renewed in one call, for no more requests than one lease.
func (s *suite) batchedRenewal(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	b := s.session(t)

	renewed, lost, err := b.Renew(ctx, nil, holdTTL)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "renewing nothing is not an error")
	g.Expect(renewed).To(gomega.BeEmpty())
	g.Expect(lost).To(gomega.BeEmpty())

	leases := make([]backends.Lease, batchSize)
	before := map[string]backends.Lease{}
	for i := range leases {
		leases[i] = acquire(t, ctx, b, s.key(t, fmt.Sprintf("k%02d", i)), s.identity(fmt.Sprintf("id%02d", i)), holdTTL)
		before[leases[i].Key] = leases[i]
	}
	s.wait(tick)

	one, _ := s.renewAll(t, ctx, b, leases[:1])
	all, renewed := s.renewAll(t, ctx, b, leases)
	if s.h.RoundTrips != nil {
		g.Expect(all).To(gomega.BeNumerically("<=", one), "renewing %d leases costs %d requests, renewing 1 costs %d", batchSize, all, one)
	}

	g.Expect(keysOf(renewed)).To(gomega.ConsistOf(keysOf(leases)))
	for _, r := range renewed {
		was := before[r.Key]
		g.Expect(r.Identity).To(gomega.Equal(was.Identity))
		g.Expect(r.ExpireTime).To(gomega.BeTemporally(">", was.ExpireTime), "renewal extends %q", r.Key)
		g.Expect(r.AcquireTime).To(gomega.BeTemporally("==", was.AcquireTime), "renewal continues the hold of %q", r.Key)
	}
	for _, i := range []int{0, batchSize - 1} {
		got := expectHolder(t, ctx, b, leases[i].Key, leases[i].Identity)
		g.Expect(got.ExpireTime).To(gomega.BeTemporally(">", leases[i].ExpireTime))
	}
}

// renewAll renews batch on b, checks that every lease was renewed, and returns the renewed leases
// with the requests the renewal cost (0 when the harness cannot count them).
func (s *suite) renewAll(t *testing.T, ctx context.Context, b backends.Backend, batch []backends.Lease) (int64, []backends.Lease) {
	t.Helper()
	g := gomega.NewWithT(t)
	var start int64
	if s.h.RoundTrips != nil {
		start = s.h.RoundTrips(b)
	}
	renewed, lost, err := b.Renew(ctx, batch, holdTTL)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(lost).To(gomega.BeEmpty())
	g.Expect(renewed).To(gomega.HaveLen(len(batch)))
	if s.h.RoundTrips == nil {
		return 0, renewed
	}
	return s.h.RoundTrips(b) - start, renewed
}

// Renew reports leases that expired, whether or not someone took them since, and revives none.
func (s *suite) lostDetection(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	s1, s2 := s.session(t), s.session(t)
	taken, expired, healthy := s.key(t, "taken"), s.key(t, "expired"), s.key(t, "healthy")
	a, b := s.identity("a"), s.identity("b")

	lTaken := acquire(t, ctx, s1, taken, a, s.h.TTL)
	lExpired := acquire(t, ctx, s1, expired, a, s.h.TTL)
	s.waitForExpiry()
	lb := acquire(t, ctx, s2, taken, b, holdTTL)
	lHealthy := acquire(t, ctx, s1, healthy, a, holdTTL)

	renewed, lost, err := s1.Renew(ctx, []backends.Lease{lTaken, lExpired, lHealthy}, holdTTL)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(keysOf(lost)).To(gomega.ConsistOf(taken, expired))
	g.Expect(keysOf(renewed)).To(gomega.ConsistOf(healthy))
	for _, l := range lost {
		g.Expect(l.Identity).To(gomega.Equal(a), "lost leases come back as they were given")
	}

	// The new holder is undisturbed, and the expired lock was not revived.
	got := expectHolder(t, ctx, s1, taken, b)
	g.Expect(got.AcquireTime).To(gomega.BeTemporally("==", lb.AcquireTime))
	if lb.Version != "" {
		g.Expect(got.Version).To(gomega.Equal(lb.Version))
	}
	expectFree(t, ctx, s2, expired)

	g.Expect(s1.Release(ctx, lTaken)).To(gomega.MatchError(backends.ErrNotHeld), "a lost lease cannot release the new holder")
	expectHolder(t, ctx, s2, taken, b)
}

// Releasing a lock that already expired counts as released.
func (s *suite) releaseOfExpiredLock(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	s1, s2 := s.session(t), s.session(t)
	k, a := s.key(t, "k"), s.identity("a")

	la := acquire(t, ctx, s1, k, a, s.h.TTL)
	s.waitForExpiry()
	foreign := la
	foreign.Identity = s.identity("b")
	g.Expect(s2.Release(ctx, foreign)).To(gomega.Succeed(), "an expired lock is free, whoever asks")
	g.Expect(s1.Release(ctx, la)).To(gomega.Succeed())
	expectFree(t, ctx, s2, k)
	acquire(t, ctx, s2, k, s.identity("b"), holdTTL)
}

// Inspect tells free keys from held ones and reports the hold as acquired.
func (s *suite) inspect(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	s1, s2 := s.session(t), s.session(t)
	k, a := s.key(t, "k"), s.identity("a")

	expectFree(t, ctx, s2, k)
	held := acquire(t, ctx, s1, k, a, holdTTL)
	got := expectHolder(t, ctx, s2, k, a)
	g.Expect(got.AcquireTime).To(gomega.BeTemporally("==", held.AcquireTime))
	g.Expect(got.ExpireTime).To(gomega.BeTemporally("~", held.ExpireTime, time.Second))
	g.Expect(got.Version).To(gomega.Equal(held.Version))
	expectFree(t, ctx, s2, s.key(t, "never-taken"))
}

// Racers with distinct identities, over several sessions: exactly one wins, on a free key and on
// an expired one.
func (s *suite) concurrency(t *testing.T) {
	ctx := s.ctx(t)
	sessions := []backends.Backend{s.session(t), s.session(t), s.session(t), s.session(t)}

	race := func(t *testing.T, k string) {
		t.Helper()
		g := gomega.NewWithT(t)
		leases := make([]backends.Lease, racers)
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-start
				leases[i], errs[i] = sessions[i%len(sessions)].TryAcquire(ctx, k, s.identity(fmt.Sprintf("racer%02d", i)), holdTTL)
			})
		}
		close(start)
		wg.Wait()

		var winners []string
		for i, err := range errs {
			if err == nil {
				winners = append(winners, leases[i].Identity)
			}
		}
		g.Expect(winners).To(gomega.HaveLen(1), "exactly one racer wins; errors: %v", errs)
		for _, err := range errs {
			if err != nil {
				_ = expectLocked(t, err, k, winners[0])
			}
		}
		expectHolder(t, ctx, sessions[0], k, winners[0])
	}

	t.Run("FreeKey", func(t *testing.T) { race(t, s.key(t, "k")) })
	t.Run("ExpiredKey", func(t *testing.T) {
		k := s.key(t, "k")
		acquire(t, ctx, sessions[0], k, s.identity("first"), s.h.TTL)
		s.waitForExpiry()
		race(t, k)
	})
}

// Each new hold after a release starts no earlier than the last and has a new Version.
func (s *suite) monotonicState(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	sessions := []backends.Backend{s.session(t), s.session(t)}
	k := s.key(t, "k")

	var prev backends.Lease
	versions := map[string]bool{}
	for i := range 4 {
		l := acquire(t, ctx, sessions[i%2], k, s.identity(fmt.Sprintf("holder%d", i)), holdTTL)
		if i > 0 {
			g.Expect(l.AcquireTime).NotTo(gomega.BeTemporally("<", prev.AcquireTime), "hold %d starts no earlier than hold %d", i, i-1)
		}
		if l.Version != "" {
			g.Expect(versions).NotTo(gomega.HaveKey(l.Version), "hold %d has a new Version", i)
			versions[l.Version] = true
		}
		g.Expect(sessions[(i+1)%2].Release(ctx, l)).To(gomega.Succeed())
		prev = l
	}
}

// Keys as long as lockwarden allows, with '/', are distinct locks down to their last character.
func (s *suite) longKeys(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	b := s.session(t)
	base := s.key(t, "")
	long := base + strings.Repeat("x/", maxKeyLength)[:maxKeyLength-len(base)-1]
	k1, k2 := long+"1", long+"2"
	g.Expect(k1).To(gomega.HaveLen(maxKeyLength))

	l1 := acquire(t, ctx, b, k1, s.identity("a"), holdTTL)
	l2 := acquire(t, ctx, b, k2, s.identity("b"), holdTTL)
	expectHolder(t, ctx, b, k1, s.identity("a"))
	expectHolder(t, ctx, b, k2, s.identity("b"))
	g.Expect(b.Release(ctx, l1)).To(gomega.Succeed())
	expectFree(t, ctx, b, k1)
	expectHolder(t, ctx, b, k2, s.identity("b"))
	g.Expect(b.Release(ctx, l2)).To(gomega.Succeed())
}

// Arguments no store can serve are refused, and not mistaken for contention.
func (s *suite) invalidArguments(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := s.ctx(t)
	b := s.session(t)
	k, a := s.key(t, "k"), s.identity("a")
	for name, call := range map[string]func() error{
		"empty key":      func() error { _, err := b.TryAcquire(ctx, "", a, holdTTL); return err },
		"empty identity": func() error { _, err := b.TryAcquire(ctx, k, "", holdTTL); return err },
		"zero TTL":       func() error { _, err := b.TryAcquire(ctx, k, a, 0); return err },
		"negative TTL":   func() error { _, err := b.TryAcquire(ctx, k, a, -time.Second); return err },
	} {
		err := call()
		g.Expect(err).To(gomega.HaveOccurred(), name)
		g.Expect(errors.Is(err, backends.ErrLocked)).To(gomega.BeFalse(), name)
	}
	expectFree(t, ctx, b, k)
}

// A healthy store answers Ping.
func (s *suite) ping(t *testing.T) {
	gomega.NewWithT(t).Expect(s.session(t).Ping(s.ctx(t))).To(gomega.Succeed())
}
