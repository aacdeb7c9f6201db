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

package renewal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/fake"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// harness runs a Renewer on a fake clock and a fake backend, and records the claims it reports.
type harness struct {
	clock   *clocktesting.FakeClock
	backend *fake.Backend
	r       *renewal.Renewer

	mu   sync.Mutex
	lost []types.NamespacedName
}

func newHarness(t *testing.T) *harness {
	h := &harness{clock: clocktesting.NewFakeClock(time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC))}
	h.backend = fake.New(fake.WithClock(h.clock))
	h.r = renewal.New(func(context.Context, string) (backends.Backend, error) { return h.backend, nil },
		func(c types.NamespacedName) { h.mu.Lock(); h.lost = append(h.lost, c); h.mu.Unlock() },
		renewal.WithClock(h.clock))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = h.r.Start(ctx) }()
	return h
}

// step moves the fake clock and gives the Renewer's loop time to act on it.
func (h *harness) step(d time.Duration) {
	h.clock.Step(d)
	time.Sleep(50 * time.Millisecond)
}

func (h *harness) lostClaims() []types.NamespacedName {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]types.NamespacedName(nil), h.lost...)
}

func claim(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("c%d", i)}
}

func TestRenewsEveryHoldInOneCallPerInterval(t *testing.T) {
	h := newHarness(t)
	const ttl = 9 * time.Second
	for i := range 50 {
		lease, err := h.backend.TryAcquire(context.Background(), fmt.Sprintf("k%d", i), fmt.Sprintf("id%d", i), ttl)
		if err != nil {
			t.Fatal(err)
		}
		h.r.Track("fake", h.backend, lease, claim(i))
	}
	time.Sleep(50 * time.Millisecond)
	for range 12 { // two TTLs
		h.step(renewal.Interval(ttl))
	}
	if got := h.backend.Calls()[fake.OpRenew]; got < 11 || got > 13 {
		t.Fatalf("Renew calls over two TTLs of 50 holds = %d, want about 12 (one per sixth of the TTL)", got)
	}
	hold, ok := h.r.Lookup(renewal.HoldKey{Backend: "fake", Key: "k7", Identity: "id7"})
	if !ok || hold.Lost || !hold.Lease.ExpireTime.After(h.clock.Now()) {
		t.Fatalf("hold k7 = %+v (tracked %v), want renewed into the future", hold, ok)
	}
	if lost := h.lostClaims(); len(lost) != 0 {
		t.Fatalf("no hold should be lost, got %v", lost)
	}
}

// hangingBackend is a backend whose Renew answers only when its call times out, as a server that
// accepts connections and never replies does.
type hangingBackend struct{ *fake.Backend }

func (hangingBackend) Renew(ctx context.Context, _ []backends.Lease, _ time.Duration) ([]backends.Lease, []backends.Lease, error) {
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

// A backend that hangs until each call's timeout holds back no other backend's renewals, though
// that timeout (here 3 s, up to 5 s by default) is longer than the other's renewal interval, or
// even than its lease.
func TestAHangingBackendDoesNotDelayAnothersRenewals(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	fast := fake.New(fake.WithClock(clock))
	slow := hangingBackend{fake.New(fake.WithClock(clock))}
	sessions := map[string]backends.Backend{"fast": fast, "slow": slow}
	r := renewal.New(func(_ context.Context, name string) (backends.Backend, error) { return sessions[name], nil },
		func(types.NamespacedName) {}, renewal.WithClock(clock), renewal.WithCallTimeout(3*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = r.Start(ctx) }()

	const fastTTL, slowTTL = 6 * time.Second, 60 * time.Second
	short, err := fast.TryAcquire(ctx, "k", "me", fastTTL)
	if err != nil {
		t.Fatal(err)
	}
	long, err := slow.TryAcquire(ctx, "k", "me", slowTTL)
	if err != nil {
		t.Fatal(err)
	}
	r.Track("fast", fast, short, claim(1))
	r.Track("slow", slow, long, claim(2))
	time.Sleep(50 * time.Millisecond)
	step := func() {
		clock.Step(renewal.Interval(fastTTL))
		time.Sleep(50 * time.Millisecond)
	}
	for range 10 { // the slow backend's first renewal falls due at the tenth, and hangs
		step()
	}
	before := fast.Calls()[fake.OpRenew]
	for range 10 { // half a second: the slow call still hangs
		step()
	}
	if got := fast.Calls()[fake.OpRenew] - before; got < 8 {
		t.Fatalf("renewals of the fast backend while the slow one hung = %d, want about 10", got)
	}
	hold, _ := r.Lookup(renewal.HoldKey{Backend: "fast", Key: "k", Identity: "me"})
	if hold.Lost || !hold.Lease.ExpireTime.After(clock.Now()) {
		t.Fatalf("the fast backend's hold = %+v, want renewed into the future", hold)
	}
}

func TestReportsStolenHoldsAsLost(t *testing.T) {
	h := newHarness(t)
	lease, _ := h.backend.TryAcquire(context.Background(), "k", "me", 9*time.Second)
	h.r.Track("fake", h.backend, lease, claim(1))
	h.r.Track("fake", h.backend, lease, claim(2)) // a reentrant claim sharing the hold
	h.backend.Steal("k", "intruder")
	h.step(3 * time.Second)
	if lost := h.lostClaims(); len(lost) != 2 {
		t.Fatalf("lost claims = %v, want both sharers", lost)
	}
	if hold, _ := h.r.Lookup(renewal.HoldKey{Backend: "fake", Key: "k", Identity: "me"}); !hold.Lost {
		t.Fatalf("hold should be marked lost")
	}
}

func TestAHoldThatCannotBeRenewedIsLostWhenItExpires(t *testing.T) {
	h := newHarness(t)
	lease, _ := h.backend.TryAcquire(context.Background(), "k", "me", 9*time.Second)
	h.r.Track("fake", h.backend, lease, claim(1))
	time.Sleep(50 * time.Millisecond) // the loop schedules the hold's renewal on the clock as it is
	h.backend.SetUnavailable(errors.New("connection refused"))
	h.step(3 * time.Second) // renewal fails, hold still valid
	if lost := h.lostClaims(); len(lost) != 0 {
		t.Fatalf("a hold must not be given up before it expires, got %v", lost)
	}
	recorded := func() bool {
		hold, _ := h.r.Lookup(renewal.HoldKey{Backend: "fake", Key: "k", Identity: "me"})
		return hold.LastError != nil
	}
	for deadline := time.Now().Add(5 * time.Second); !recorded() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // a loaded machine may take longer than step's pause
	}
	if !recorded() {
		t.Fatalf("the failed renewal should be recorded")
	}
	for range 10 {
		h.step(time.Second)
	}
	if lost := h.lostClaims(); len(lost) != 1 {
		t.Fatalf("after expiry without renewal, lost = %v, want the claim", lost)
	}
}

// revivingBackend renews whatever it is asked to while up, expired or not, as a store whose
// expiry only its readers enforce would (a ZooKeeper record past its TTL that nobody took yet, a
// SQL row past its expiry): a renewal that lands late brings the hold back.
type revivingBackend struct {
	*fake.Backend
	clock *clocktesting.FakeClock
	down  atomic.Bool
	// heldUp, when set, is how long a renewal takes to be answered (the clock moves on by it).
	heldUp atomic.Int64
}

func (b *revivingBackend) Renew(_ context.Context, leases []backends.Lease, ttl time.Duration) ([]backends.Lease, []backends.Lease, error) {
	if b.down.Load() {
		return nil, nil, errors.New("no answer in time")
	}
	if d := time.Duration(b.heldUp.Load()); d > 0 {
		b.clock.Step(d)
	}
	var out []backends.Lease
	for _, l := range leases {
		l.TTL, l.ExpireTime = ttl, b.clock.Now().Add(ttl)
		out = append(out, l)
	}
	return out, nil, nil
}

// A renewal answered after the hold expired is no renewal, though the backend accepts it: it may
// have reached the backend after the expiry, the hold may have been free for anyone meanwhile
// (the class of etcd #11456), and its claim's expireTime has passed. The hold is Lost. Found by
// the reliability matrix: a ZooKeeper place cut off for longer than its TTL came back when the
// connection healed, its claim Held throughout (zookeeper/semaphore, seed 530857048); the first
// fix judged by when the renewal was sent, and a renewal sent just before the expiry and held up
// by the partition still brought one back on replay.
func TestARenewalAnsweredAfterExpiryDoesNotReviveTheHold(t *testing.T) {
	for name, c := range map[string]struct {
		pause  time.Duration // down this long from the start (the hold has 6 s)
		jump   time.Duration // then up, and the clock moves on this much at once
		heldUp time.Duration // and each renewal is answered this much later
	}{
		"sent a second after the hold expired":    {2 * time.Second, 5 * time.Second, 0},
		"sent before the expiry, held up past it": {5 * time.Second, time.Second, 2 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC))
			b := &revivingBackend{Backend: fake.New(fake.WithClock(clock)), clock: clock}
			var mu sync.Mutex
			var lost []types.NamespacedName
			r := renewal.New(func(context.Context, string) (backends.Backend, error) { return b, nil },
				func(c types.NamespacedName) { mu.Lock(); lost = append(lost, c); mu.Unlock() }, renewal.WithClock(clock))
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go func() { _ = r.Start(ctx) }()
			lease, err := b.TryAcquire(ctx, "k", "me", 6*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			r.Track("fake", b, lease, claim(1))
			time.Sleep(50 * time.Millisecond)
			b.down.Store(true)
			clock.Step(c.pause / 2) // renewals fail; the hold has not expired yet
			time.Sleep(50 * time.Millisecond)
			clock.Step(c.pause - c.pause/2)
			time.Sleep(50 * time.Millisecond)
			b.heldUp.Store(int64(c.heldUp))
			b.down.Store(false)
			clock.Step(c.jump) // the next attempt, answered (after heldUp) past the expiry
			time.Sleep(100 * time.Millisecond)

			hold, _ := r.Lookup(renewal.HoldKey{Backend: "fake", Key: "k", Identity: "me"})
			mu.Lock()
			defer mu.Unlock()
			if !hold.Lost || len(lost) != 1 {
				t.Fatalf("hold %+v, claims reported lost %v: want the hold Lost, not renewed after it expired", hold, lost)
			}
		})
	}
}

// A hold taken over from another session (a new leader resuming it) may expire long before an
// Interval has passed: it is renewed at once, not an Interval after the take-over.
func TestAHoldTakenOverWithLittleLeftIsRenewedAtOnce(t *testing.T) {
	h := newHarness(t)
	const ttl = 30 * time.Second
	lease, err := h.backend.TryAcquire(context.Background(), "k", "me", ttl)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Step(25 * time.Second) // the old leader renewed it last; 5 s are left
	h.r.Track("fake", h.backend, lease, claim(1))
	time.Sleep(50 * time.Millisecond)
	if got := h.backend.Calls()[fake.OpRenew]; got != 1 {
		t.Fatalf("Renew calls right after the take-over = %d, want 1", got)
	}
	for range 4 {
		h.step(2 * time.Second) // past the old expiry
	}
	if lost := h.lostClaims(); len(lost) != 0 {
		t.Fatalf("the taken-over hold was lost: %v", lost)
	}
}

func TestUntrackedHoldsAreNotRenewed(t *testing.T) {
	h := newHarness(t)
	lease, _ := h.backend.TryAcquire(context.Background(), "k", "me", 9*time.Second)
	k := renewal.HoldKey{Backend: "fake", Key: "k", Identity: "me"}
	h.r.Track("fake", h.backend, lease, claim(1))
	h.r.Track("fake", h.backend, lease, claim(2))
	if left := h.r.Untrack(k, claim(1)); left != 1 {
		t.Fatalf("Untrack left %d sharers, want 1", left)
	}
	if left := h.r.Untrack(k, claim(2)); left != 0 {
		t.Fatalf("Untrack left %d sharers, want 0", left)
	}
	before := h.backend.Calls()[fake.OpRenew]
	h.step(10 * time.Second)
	if after := h.backend.Calls()[fake.OpRenew]; after != before {
		t.Fatalf("Renew called %d times for a forgotten hold", after-before)
	}
}

// steppedClock is a fake clock whose wall time can be stepped apart from its monotonic time, as
// an administrator steps a host's clock (skewclock in the manager's fault builds).
type steppedClock struct {
	*clocktesting.FakeClock
	mu     sync.Mutex
	offset time.Duration
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.FakeClock.Now().Add(c.offset)
}

func (c *steppedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *steppedClock) Monotonic() time.Time { return c.FakeClock.Now() }

func (c *steppedClock) stepWall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// A wall clock stepped back (here: a clock that ran two leases ahead, put right) must not
// postpone renewals by the step: the reliability harness's redis/clock-jumps lost a hold granted
// while the leader's clock was ahead, whose renewal came ten seconds late.
func TestAWallClockStepDoesNotMoveRenewals(t *testing.T) {
	for _, step := range []time.Duration{-10 * time.Second, 10 * time.Second} {
		t.Run(step.String(), func(t *testing.T) {
			fakeClock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC))
			clk := &steppedClock{FakeClock: fakeClock}
			backend := fake.New(fake.WithClock(clk))
			r := renewal.New(func(context.Context, string) (backends.Backend, error) { return backend, nil },
				func(types.NamespacedName) {}, renewal.WithClock(clk))
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go func() { _ = r.Start(ctx) }()
			const ttl = 9 * time.Second
			lease, err := backend.TryAcquire(ctx, "k", "me", ttl)
			if err != nil {
				t.Fatal(err)
			}
			r.Track("fake", backend, lease, claim(1))
			time.Sleep(50 * time.Millisecond)
			clk.stepWall(step)
			fakeClock.Step(renewal.Interval(ttl) - 500*time.Millisecond)
			time.Sleep(50 * time.Millisecond)
			if got := backend.Calls()[fake.OpRenew]; got != 0 {
				t.Fatalf("renewed %d times before an Interval had passed (wall stepped %s)", got, step)
			}
			fakeClock.Step(500 * time.Millisecond)
			time.Sleep(50 * time.Millisecond)
			if got := backend.Calls()[fake.OpRenew]; got != 1 {
				t.Fatalf("Renew calls an Interval after the grant, the wall clock stepped %s: %d, want 1", step, got)
			}
		})
	}
}

// A dropped hold is not renewed again, though a claim that shared it was never untracked (it
// vanished without its finalizer).
func TestDroppedHoldsAreNotRenewed(t *testing.T) {
	h := newHarness(t)
	lease, _ := h.backend.TryAcquire(context.Background(), "k", "me", 9*time.Second)
	k := renewal.HoldKey{Backend: "fake", Key: "k", Identity: "me"}
	h.r.Track("fake", h.backend, lease, claim(1))
	h.r.Track("fake", h.backend, lease, claim(2))
	h.r.Drop(k)
	if _, tracked := h.r.Lookup(k); tracked {
		t.Fatal("the hold is still tracked after Drop")
	}
	before := h.backend.Calls()[fake.OpRenew]
	h.step(10 * time.Second)
	if after := h.backend.Calls()[fake.OpRenew]; after != before {
		t.Fatalf("Renew called %d times for a dropped hold", after-before)
	}
}

// A claim reconcile re-tracks its hold on every pass. That must neither postpone the renewal nor
// clear a failed renewal's error: a hold whose backend is down is still lost when it expires, however
// often its claim is reconciled.
func TestRetrackingDoesNotPostponeRenewalOrHideFailures(t *testing.T) {
	h := newHarness(t)
	const ttl = 9 * time.Second
	lease, _ := h.backend.TryAcquire(context.Background(), "k", "me", ttl)
	h.r.Track("fake", h.backend, lease, claim(1))
	time.Sleep(50 * time.Millisecond)
	for range 6 { // two TTLs, re-tracked every second
		for range 3 {
			h.r.Track("fake", h.backend, lease, claim(1))
			h.step(time.Second)
		}
	}
	if got := h.backend.Calls()[fake.OpRenew]; got < 5 {
		t.Fatalf("Renew calls over two TTLs with a re-track every second = %d, want about 6", got)
	}

	h.backend.SetUnavailable(errors.New("connection refused"))
	for range 15 {
		h.r.Track("fake", h.backend, lease, claim(1))
		h.step(time.Second)
	}
	if lost := h.lostClaims(); len(lost) != 1 {
		t.Fatalf("a hold that cannot be renewed must be lost at expiry even when re-tracked, lost = %v", lost)
	}
}

// movingHarness is a harness whose resolver can be pointed at a new session, as when the
// LockBackend is edited, and which records what the Renewer says still lives on each session.
type movingHarness struct {
	*harness
	current atomic.Pointer[fake.Backend]
	usedBy  atomic.Pointer[func(backends.Backend) bool]
}

// inUse asks the test the Renewer last handed out whether a hold lives on session.
func (m *movingHarness) inUse(session backends.Backend) bool {
	return (*m.usedBy.Load())(session)
}

func newMovingHarness(t *testing.T) *movingHarness {
	m := &movingHarness{harness: &harness{clock: clocktesting.NewFakeClock(time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC))}}
	m.backend = fake.New(fake.WithClock(m.clock))
	m.current.Store(m.backend)
	m.r = renewal.New(func(context.Context, string) (backends.Backend, error) { return m.current.Load(), nil },
		func(c types.NamespacedName) { m.mu.Lock(); m.lost = append(m.lost, c); m.mu.Unlock() },
		renewal.WithClock(m.clock),
		renewal.WithAfterRenewals(func(_ context.Context, inUse func(backends.Backend) bool) {
			m.usedBy.Store(&inUse)
		}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = m.r.Start(ctx) }()
	return m
}

// held tracks a hold of key for "me" on the first session.
func (m *movingHarness) held(t *testing.T, key string, ttl time.Duration) {
	t.Helper()
	lease, err := m.backend.TryAcquire(context.Background(), key, "me", ttl)
	if err != nil {
		t.Fatal(err)
	}
	m.r.Track("fake", m.backend, lease, claim(1))
	time.Sleep(50 * time.Millisecond)
}

func TestAnEditedBackendsNewSessionTakesOverTheHoldsBeforeTheOldOneIsLetGo(t *testing.T) {
	m := newMovingHarness(t)
	const ttl = 9 * time.Second
	m.held(t, "k", ttl)
	old := m.backend
	if !m.inUse(old) {
		t.Fatalf("the session a hold lives on must be reported in use")
	}
	edited := old.NewSession()
	m.current.Store(edited)
	m.r.Wake()
	time.Sleep(50 * time.Millisecond)
	if !m.inUse(old) {
		t.Fatalf("the old session must stay in use until its holds have moved")
	}
	m.step(renewal.Interval(ttl))
	if got := edited.Calls()[fake.OpTryAcquire]; got != 1 {
		t.Fatalf("acquires on the new session = %d, want 1: the hold moves by acquiring it there", got)
	}
	if m.inUse(old) || !m.inUse(edited) {
		t.Fatalf("after the move the hold must live on the new session only")
	}
	renewsOnOld := old.Calls()[fake.OpRenew]
	for range 12 {
		m.step(renewal.Interval(ttl))
	}
	if old.Calls()[fake.OpRenew] != renewsOnOld || edited.Calls()[fake.OpRenew] < 11 {
		t.Fatalf("renewals after the move: old session %d (was %d), new %d; want all on the new one",
			old.Calls()[fake.OpRenew], renewsOnOld, edited.Calls()[fake.OpRenew])
	}
	hold, _ := m.r.Lookup(renewal.HoldKey{Backend: "fake", Key: "k", Identity: "me"})
	if hold.Lost || len(m.lostClaims()) != 0 {
		t.Fatalf("the hold must survive the edit: %+v, lost %v", hold, m.lostClaims())
	}
}

func TestAHoldStaysOnTheOldSessionWhileTheNewOneCannotTakeIt(t *testing.T) {
	m := newMovingHarness(t)
	const ttl = 9 * time.Second
	m.held(t, "k", ttl)
	old := m.backend
	edited := old.NewSession()
	edited.SetUnavailable(errors.New("WRONGPASS invalid username-password pair"))
	m.current.Store(edited)
	for range 18 { // three TTLs
		m.step(renewal.Interval(ttl))
	}
	if lost := m.lostClaims(); len(lost) != 0 {
		t.Fatalf("an edit whose session cannot work must lose nothing the old session still holds, lost %v", lost)
	}
	if old.Calls()[fake.OpRenew] < 16 || !m.inUse(old) {
		t.Fatalf("renewals on the old session = %d, want about 18, and it must stay in use", old.Calls()[fake.OpRenew])
	}

	edited.SetUnavailable(nil) // the edit is mended
	m.step(renewal.Interval(ttl))
	if m.inUse(old) || !m.inUse(edited) {
		t.Fatalf("once the new session works the hold must move to it")
	}
}

func TestAHoldTakenByAnotherHolderWhileItMovesIsLost(t *testing.T) {
	m := newMovingHarness(t)
	const ttl = 9 * time.Second
	m.held(t, "k", ttl)
	edited := m.backend.NewSession()
	m.current.Store(edited)
	m.backend.Steal("k", "intruder")
	m.step(renewal.Interval(ttl))
	if lost := m.lostClaims(); len(lost) != 1 {
		t.Fatalf("lost = %v, want the claim of the stolen hold", lost)
	}
	if m.inUse(m.backend) {
		t.Fatalf("a lost hold keeps no session open")
	}
}
