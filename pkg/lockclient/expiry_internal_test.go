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

package lockclient

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

func TestHoldSkew(t *testing.T) {
	for _, tc := range []struct {
		skew, ttl, want time.Duration
	}{
		{500 * time.Millisecond, 30 * time.Second, 500 * time.Millisecond},
		{500 * time.Millisecond, 5 * time.Second, 312500 * time.Microsecond},
		{500 * time.Millisecond, 0, 500 * time.Millisecond},
		{0, 30 * time.Second, 0},
	} {
		if got := holdSkew(tc.skew, tc.ttl); got != tc.want {
			t.Errorf("holdSkew(%v, %v) = %v, want %v", tc.skew, tc.ttl, got, tc.want)
		}
	}
}

// expiryUnderTest is an expiry on a fake clock whose expirations arrive on fired.
type expiryUnderTest struct {
	clock *testingclock.FakeClock
	e     *expiry
	fired chan firing
}

// firing is one call of expired.
type firing struct {
	b   bound
	due time.Time
}

// newExpiryUnderTest starts an expiry at now with the claim bound claimDue and the heartbeat
// bound heartbeatDue (zero: none).
func newExpiryUnderTest(now, claimDue, heartbeatDue time.Time) *expiryUnderTest {
	u := &expiryUnderTest{clock: testingclock.NewFakeClock(now), fired: make(chan firing, 2)}
	u.e = startExpiry(u.clock, [bounds]time.Time{claimBound: claimDue, heartbeatBound: heartbeatDue},
		func(b bound, due time.Time) { u.fired <- firing{b, due} })
	return u
}

// step moves the clock on by d and reports what the deadline fired for, the zero firing if it
// did not fire (given a moment to).
func (u *expiryUnderTest) step(d time.Duration) firing {
	u.clock.Step(d)
	select {
	case f := <-u.fired:
		return f
	case <-time.After(100 * time.Millisecond):
		return firing{}
	}
}

// held is a Held claim whose status says expireTime expire.
func held(expire time.Time) *locksv1alpha1.LockClaim {
	return &locksv1alpha1.LockClaim{Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimHeld,
		ExpireTime: &metav1.MicroTime{Time: expire}}}
}

func TestExpiry(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	skew := 500 * time.Millisecond
	none := firing{}
	claimAt := func(d time.Duration) firing { return firing{claimBound, t0.Add(d)} }

	t.Run("ends at the claim's expireTime less the skew", func(t *testing.T) {
		u := newExpiryUnderTest(t0, t0.Add(10*time.Second-skew), time.Time{})
		if got := u.step(9400 * time.Millisecond); got != none {
			t.Fatalf("fired %v before expireTime less skew", got)
		}
		if got := u.step(200 * time.Millisecond); got != claimAt(10*time.Second-skew) {
			t.Fatalf("fired %v, want the expireTime seen at the grant less skew", got)
		}
	})

	t.Run("a renewal seen moves the deadline", func(t *testing.T) {
		u := newExpiryUnderTest(t0, t0.Add(10*time.Second-skew), time.Time{})
		if got := u.step(8 * time.Second); got != none {
			t.Fatalf("fired %v", got)
		}
		u.e.observe(held(t0.Add(20*time.Second)), skew)
		if got := u.step(4 * time.Second); got != none {
			t.Fatalf("fired %v after a renewal to t0+20s, at t0+12s", got)
		}
		if got := u.step(8 * time.Second); got != claimAt(20*time.Second-skew) {
			t.Fatalf("fired %v at t0+20s, want the renewed expireTime less skew", got)
		}
	})

	t.Run("an older or equal expireTime, or a claim not Held, does not move it", func(t *testing.T) {
		u := newExpiryUnderTest(t0, t0.Add(10*time.Second-skew), time.Time{})
		u.e.observe(held(t0.Add(5*time.Second)), skew)
		u.e.observe(held(t0.Add(10*time.Second)), skew)
		pending := held(t0.Add(time.Hour))
		pending.Status.Phase = locksv1alpha1.ClaimPending
		u.e.observe(pending, skew)
		u.e.observe(nil, skew)
		if got := u.step(10 * time.Second); got != claimAt(10*time.Second-skew) {
			t.Fatalf("fired %v, want t0+10s less skew", got)
		}
	})

	t.Run("the heartbeat bound ends it first when its renewals stop being confirmed", func(t *testing.T) {
		u := newExpiryUnderTest(t0, t0.Add(30*time.Second-skew), t0.Add(15*time.Second))
		u.e.move(heartbeatBound, t0.Add(20*time.Second)) // a renewal confirmed at t0+5s
		u.e.observe(held(t0.Add(40*time.Second)), skew)
		if got := u.step(19 * time.Second); got != none {
			t.Fatalf("fired %v", got)
		}
		if got := u.step(time.Second); got != (firing{heartbeatBound, t0.Add(20 * time.Second)}) {
			t.Fatalf("fired %v, want the heartbeat bound at t0+20s", got)
		}
	})

	t.Run("a deadline past at the start waits for the first read", func(t *testing.T) {
		u := newExpiryUnderTest(t0, t0.Add(-time.Second), time.Time{})
		if got := u.step(firstReadGrace / 2); got != none {
			t.Fatalf("fired %v before the first read could answer", got)
		}
		u.e.observe(held(t0.Add(30*time.Second)), skew)
		if got := u.step(20 * time.Second); got != none {
			t.Fatalf("fired %v after the first read showed a renewal", got)
		}
	})

	t.Run("a deadline past at the start with no read: ends after the grace", func(t *testing.T) {
		u := newExpiryUnderTest(t0, t0.Add(-time.Second), time.Time{})
		if got := u.step(firstReadGrace); got != claimAt(-time.Second) {
			t.Fatalf("fired %v", got)
		}
	})

	t.Run("stopped: never fires", func(t *testing.T) {
		u := newExpiryUnderTest(t0, t0.Add(time.Second), time.Time{})
		u.e.stop()
		if got := u.step(time.Minute); got != none {
			t.Fatalf("fired %v after stop", got)
		}
		u.e.stop() // twice is fine
	})

	t.Run("no expireTime and no heartbeat: no deadline", func(t *testing.T) {
		u := newExpiryUnderTest(t0, time.Time{}, time.Time{})
		u.e.observe(held(t0.Add(time.Second)), skew) // never armed, stays so
		if got := u.step(time.Hour); got != none {
			t.Fatalf("fired %v", got)
		}
	})
}

func TestExpiredError(t *testing.T) {
	h := &Hold{Result: Result{Namespace: "team", Lock: "db", Claim: "job-db"}}
	due := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		b    bound
		want []string
	}{
		{claimBound, []string{`lost lock "db"`, `claim "job-db"`, "expireTime 2026-12-05T12:00:00.5Z", "500ms", "may be granted to another holder"}},
		{heartbeatBound, []string{`lost lock "db"`, "heartbeat Lease", "2026-12-05T12:00:00Z", "may be granted to another holder"}},
	} {
		err := expiredError(h, tc.b, due, 500*time.Millisecond)
		if !errors.Is(err, ErrLost) || !errors.Is(err, ErrExpired) {
			t.Fatalf("%v: want ErrLost and ErrExpired", err)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err.Error(), want)
			}
		}
	}
}
