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

package redis_test

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/internal/redisnode"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

// A client outside lockwarden that locks with SET NX PX is refused while any place is live, and
// refuses places while it holds the key; it never sees a key it cannot handle as a lock.
func TestForeignSetNXClientAndPlaces(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	b := newBackend(t, srv.Addr())
	foreign := srv.Client()
	key := "shared/lock"

	r1, err := b.TryAcquireShared(ctx, key, "reader-1", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	r2, err := b.TryAcquireShared(ctx, key, "reader-2", 2*holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(foreign.SetNX(ctx, key, "foreign", 30*time.Second).Val()).To(BeFalse(), "refused while two places are live")
	g.Expect(b.Release(ctx, r2)).To(Succeed())
	g.Expect(foreign.SetNX(ctx, key, "foreign", 30*time.Second).Val()).To(BeFalse(), "refused while one place is live")
	g.Expect(b.Release(ctx, r1)).To(Succeed())
	g.Expect(foreign.Exists(ctx, key, redisnode.PlacesKey(key)).Val()).To(BeZero(), "the last release deletes the key")
	g.Expect(foreign.SetNX(ctx, key, "foreign", 30*time.Second).Val()).To(BeTrue(), "the key is free after the last release")

	start := time.Now()
	_, err = b.TryAcquireShared(ctx, key, "reader-1", holdTTL, 2)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue())
	g.Expect(locked.Holder).To(Equal("foreign"))
	g.Expect(locked.ExpireTime).To(BeTemporally("~", start.Add(30*time.Second), 2*time.Second))

	holders, err := b.Holders(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders).To(HaveLen(1))
	g.Expect(holders[0].Identity).To(Equal("foreign"))
	g.Expect(holders[0].Shared).To(BeFalse())

	// A stale shared lease neither frees nor renews the foreign hold.
	g.Expect(b.Release(ctx, r1)).To(Succeed(), "its place is free")
	renewed, lost, err := b.Renew(ctx, []backends.Lease{r1}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed).To(BeEmpty())
	g.Expect(lost).To(Equal([]backends.Lease{r1}))
	g.Expect(foreign.Get(ctx, key).Val()).To(Equal("foreign"))
	g.Expect(foreign.PTTL(ctx, key).Val()).To(BeNumerically("<=", 30*time.Second))
}

// A place refused because every place is taken names the place that frees first.
func TestFullPlacesNameTheFirstToExpire(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	b := newBackend(t, srv.Addr())
	_, err := b.TryAcquireShared(ctx, "k", "long", 2*holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.TryAcquireShared(ctx, "k", "short", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())

	start := time.Now()
	_, err = b.TryAcquireShared(ctx, "k", "late", holdTTL, 2)
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue(), "%v", err)
	g.Expect(locked.Holder).To(Equal("short"))
	g.Expect(locked.ExpireTime).To(BeTemporally("~", start.Add(holdTTL), 2*time.Second))

	_, err = b.TryAcquireShared(ctx, "k", "late", holdTTL, 0)
	g.Expect(err).To(MatchError(ContainSubstring("places must be at least 1")))
}
