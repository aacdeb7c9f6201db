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
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// A holder keeps a local deadline (docs/design.md §3 Renewal). The controller renews holds on the
// backend and writes each held claim's status.expireTime a little before it passes, never further
// ahead than the backend confirmed; another claim can be granted only once the hold has expired on
// the backend, which is no earlier than that expireTime. A holder that stops seeing its claim (the
// API server unreachable, or a partition between the two) cannot know whether the controller still
// renews: its lock may be granted to someone else from the last expireTime it saw. So a Hold ends
// there, less an allowance for the holder's clock running behind the controller's, whether or not
// the lock was really lost.
//
// A detached claim with a heartbeat has a second bound: the controller releases it once it has not
// seen the heartbeat Lease change for the Lease's duration, judged by when it saw the change, which
// is after this process sent it. So the hold also ends a heartbeat duration after the send of the
// last renewal the API server confirmed, on this process's clock alone.

// ErrExpired is, beside ErrLost, what the cause of a Hold's context matches when the hold ended
// at its local deadline: the last status.expireTime it saw (less the clock skew allowance) passed
// without a newer one seen, so the lock may already be granted to another holder.
var ErrExpired = errors.New("hold expired: no renewal seen before its expireTime")

// DefaultClockSkew is how far the holder's clock may run behind the controller's by default: a
// Hold ends this long before the last expireTime it saw (at most a sixteenth of the lease,
// holdSkew). Clocks kept by NTP agree to within milliseconds; the controller writes a claim's
// expireTime an eighth of its lease before it passes, so a larger allowance ends holds that are
// still renewed whenever that write is slow.
const DefaultClockSkew = 500 * time.Millisecond

// holdSkew is the clock skew allowance a hold of lease ttl keeps: skew, but at most a sixteenth of
// the lease (half the time the controller gives its expireTime write to land), so that a short
// lease's holds do not end whenever that write is a little slow. ttl 0 (unknown) leaves skew.
func holdSkew(skew, ttl time.Duration) time.Duration {
	if ttl > 0 {
		return min(skew, ttl/16)
	}
	return skew
}

// firstReadGrace is how long a hold whose deadline had passed before its Context was first asked
// for waits for its first read of the claim to show a newer expireTime.
const firstReadGrace = 2 * time.Second

// ClientOption configures a Client (New, NewFromClient).
type ClientOption func(*Client)

// WithClockSkew sets how far this process's clock may run behind the controller's (default
// DefaultClockSkew): a Hold ends that long before the last expireTime it saw. Negative values
// count as 0.
func WithClockSkew(d time.Duration) ClientOption {
	return func(c *Client) { c.skew = max(d, 0) }
}

// bound is one of the things a hold's local deadline is the earliest of.
type bound int

const (
	// claimBound: the claim's status.expireTime, less the clock skew allowance.
	claimBound bound = iota
	// heartbeatBound: the send of the last confirmed heartbeat renewal, plus its duration.
	heartbeatBound
	bounds
)

// expiry is a hold's local deadline: the earliest of its bounds, each moved only forward, in the
// clock's time. It calls expired once the deadline passes without being moved.
type expiry struct {
	clock   clock.Clock
	expired func(b bound, due time.Time)
	moved   chan struct{} // a bound moved and the timer with it
	done    chan struct{} // closed by stop

	mu    sync.Mutex
	due   [bounds]time.Time // zero: not bounded by it
	timer clock.Timer
}

// startExpiry starts a deadline with the given first due times (zero: none), calling expired, once,
// when the earliest passes. A claim bound already past at start is put off by firstReadGrace, so
// that the first read of the claim, begun at the same time, can move it.
func startExpiry(clk clock.Clock, first [bounds]time.Time, expired func(b bound, due time.Time)) *expiry {
	e := &expiry{clock: clk, expired: expired, due: first, moved: make(chan struct{}, 1), done: make(chan struct{})}
	b, due := e.deadline()
	if due.IsZero() {
		return e
	}
	left := due.Sub(clk.Now())
	if b == claimBound {
		left = max(left, firstReadGrace)
	}
	e.timer = clk.NewTimer(left)
	go e.run()
	return e
}

// deadline is the earliest due time and its bound; zero when nothing bounds the hold. Called
// with mu held, or before run starts.
func (e *expiry) deadline() (bound, time.Time) {
	var earliest time.Time
	var which bound
	for b, due := range e.due {
		if !due.IsZero() && (earliest.IsZero() || due.Before(earliest)) {
			earliest, which = due, bound(b)
		}
	}
	return which, earliest
}

// observe takes in the claim as last read or watched: a Held claim's expireTime, less skew, later
// than the claim bound moves it.
func (e *expiry) observe(claim *locksv1alpha1.LockClaim, skew time.Duration) {
	if claim == nil || claim.Status.Phase != locksv1alpha1.ClaimHeld || claim.Status.ExpireTime == nil {
		return
	}
	e.move(claimBound, claim.Status.ExpireTime.Add(-skew))
}

// move moves bound b to due when that is later, and the deadline with it. A hold started without
// a deadline (no expireTime: a backend that keeps holds without expiry) keeps none.
func (e *expiry) move(b bound, due time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer == nil || e.due[b].IsZero() || !due.After(e.due[b]) {
		return
	}
	e.due[b] = due
	_, earliest := e.deadline()
	e.timer.Stop()
	e.timer = e.clock.NewTimer(max(earliest.Sub(e.clock.Now()), 0))
	select {
	case e.moved <- struct{}{}:
	default:
	}
}

// run waits for the current timer, or a newer one, and calls expired when the current one fires.
func (e *expiry) run() {
	for {
		e.mu.Lock()
		timer := e.timer
		e.mu.Unlock()
		select {
		case <-e.done:
			return
		case <-e.moved:
		case <-timer.C():
			e.mu.Lock()
			current := e.timer == timer
			b, due := e.deadline()
			e.mu.Unlock()
			if current {
				e.expired(b, due)
				return
			}
		}
	}
}

// stop disarms the deadline; calling it again does nothing.
func (e *expiry) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.done:
	default:
		close(e.done)
	}
	if e.timer != nil {
		e.timer.Stop()
	}
}

// expiredError is the cause of a hold's context that ended at its local deadline, bound b due at
// due (for the claim bound: its expireTime less skew).
func expiredError(h *Hold, b bound, due time.Time, skew time.Duration) error {
	var why string
	switch b {
	case heartbeatBound:
		why = fmt.Sprintf("no renewal of its heartbeat Lease confirmed by the API server for the Lease's duration (until %s)",
			due.UTC().Format(time.RFC3339Nano))
	default:
		why = fmt.Sprintf("no renewal seen before its expireTime %s (less %s for clock skew)",
			due.Add(skew).UTC().Format(time.RFC3339Nano), skew)
	}
	return &Error{Kind: ErrLost, Namespace: h.Namespace, Lock: h.Lock, Claim: h.Claim, Err: ErrExpired,
		Detail: fmt.Sprintf("lost lock %q: claim %q in namespace %q: %s: the API server may be out of reach, and the lock may be granted to another holder from then on",
			h.Lock, h.Claim, h.Namespace, why)}
}
