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

package fake_test

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/backendtest"
	"github.com/lockwarden/lockwarden/internal/backends/fake"
)

func TestConformance(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := fake.New(fake.WithClock(clock))
	h := backendtest.Harness{
		New:     func(*testing.T) backends.Backend { return store.NewSession() },
		TTL:     2 * time.Second,
		Advance: clock.Step,
		RoundTrips: func(b backends.Backend) int64 {
			var n int64
			for _, c := range b.(*fake.Backend).Calls() {
				n += int64(c)
			}
			return n
		},
	}
	backendtest.Run(t, h)
	backendtest.RunShared(t, h)
}

func TestSetUnavailable(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b := fake.New()
	l, err := b.TryAcquire(ctx, "k", "a", time.Minute)
	g.Expect(err).NotTo(HaveOccurred())

	down := errors.New("connection refused")
	b.SetUnavailable(down)
	_, err = b.TryAcquire(ctx, "other", "a", time.Minute)
	g.Expect(err).To(MatchError(down))
	_, _, err = b.Renew(ctx, []backends.Lease{l}, time.Minute)
	g.Expect(err).To(MatchError(down))
	g.Expect(b.Release(ctx, l)).To(MatchError(down))
	_, err = b.Inspect(ctx, "k")
	g.Expect(err).To(MatchError(down))
	g.Expect(b.Ping(ctx)).To(MatchError(down))

	// Other sessions still reach the store, and the failed calls changed nothing.
	got, err := b.NewSession().Inspect(ctx, "k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Identity).To(Equal("a"))
	_, err = b.NewSession().Inspect(ctx, "other")
	g.Expect(err).To(MatchError(backends.ErrNotHeld))

	b.SetUnavailable(nil)
	g.Expect(b.Ping(ctx)).To(Succeed())
	g.Expect(b.Release(ctx, l)).To(Succeed())
}

func TestSteal(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := fake.New(fake.WithClock(clock))
	l, err := b.TryAcquire(ctx, "k", "a", 10*time.Second)
	g.Expect(err).NotTo(HaveOccurred())

	clock.Step(time.Second)
	b.Steal("k", "outsider")
	renewed, lost, err := b.Renew(ctx, []backends.Lease{l}, 10*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(Equal([]backends.Lease{l}))
	g.Expect(b.Release(ctx, l)).To(MatchError(backends.ErrNotHeld))

	got, err := b.Inspect(ctx, "k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Identity).To(Equal("outsider"))
	g.Expect(got.AcquireTime).To(Equal(clock.Now()))
	g.Expect(got.TTL).To(Equal(10*time.Second), "the stolen key keeps its TTL")
	g.Expect(got.Version).NotTo(Equal(l.Version))

	b.Steal("fresh", "outsider")
	got, err = b.Inspect(ctx, "fresh")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.ExpireTime).To(Equal(clock.Now().Add(fake.StealTTL)))
}

func TestCalls(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b := fake.New()
	l, err := b.TryAcquire(ctx, "k", "a", time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.TryAcquire(ctx, "k", "b", time.Minute)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	_, _, err = b.Renew(ctx, []backends.Lease{l, l, l}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Release(ctx, l)).To(Succeed())

	calls := b.Calls()
	g.Expect(calls).To(Equal(map[string]int{fake.OpTryAcquire: 2, fake.OpRenew: 1, fake.OpRelease: 1}))
	calls[fake.OpRenew] = 99
	g.Expect(b.Calls()).To(HaveKeyWithValue(fake.OpRenew, 1), "Calls returns a copy")
	g.Expect(b.NewSession().Calls()).To(BeEmpty(), "counts are per session")
}

func TestClose(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b := fake.New()
	_, err := b.TryAcquire(ctx, "k", "a", time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Close(ctx)).To(Succeed())
	g.Expect(b.Close(ctx)).To(Succeed(), "closing twice is harmless")
	_, err = b.TryAcquire(ctx, "k2", "a", time.Minute)
	g.Expect(err).To(HaveOccurred())

	got, err := b.NewSession().Inspect(ctx, "k")
	g.Expect(err).NotTo(HaveOccurred(), "locks outlive the session that took them")
	g.Expect(got.Identity).To(Equal("a"))
}
