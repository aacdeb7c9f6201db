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

// Package renewal keeps held locks alive. The Renewer runs on the controller leader and renews,
// every sixth of a lease's TTL (Interval), every hold it tracks, in one batched Backend.Renew call
// per backend and TTL, so that renewal costs a fixed number of backend round trips however many
// locks are held. Through the callback given to New it tells the lock engine
// (lockengine.Reconciler.NotifyLost) which claims lost their lock, so that each lock's pass ends
// those holds; it never writes to the API itself.
package renewal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/mutant"
)

// Resolver returns the backend session for a LockBackend name.
type Resolver func(ctx context.Context, backendName string) (backends.Backend, error)

// HoldKey names one hold: a key held for an identity on a backend. Several claims with the same
// identity (reentrancy) share one hold.
type HoldKey struct {
	Backend  string
	Key      string
	Identity string
}

// Hold is what the Renewer knows about a hold.
type Hold struct {
	// Lease is the lease as last confirmed by the backend.
	Lease backends.Lease
	// Lost is true once the backend reported the lock gone or owned by someone else, or once it
	// expired without a successful renewal.
	Lost bool
	// LastError is the error of the last failed renewal attempt, nil after a success.
	LastError error
	// RenewTime is when the backend last confirmed the lease.
	RenewTime time.Time
}

type hold struct {
	Hold
	claims map[types.NamespacedName]struct{}
	// session is the backend session the hold lives on. When the resolver hands out another one
	// for the backend (its LockBackend was edited), the next renewal moves the hold there.
	session backends.Backend
	// renewedAt, expiresAt and attemptedAt are RenewTime, Lease.ExpireTime and the last renewal
	// attempt on the Renewer's stopwatch (Renewer.elapsed), which a step of the wall clock does
	// not move: renewals are scheduled by them, so that a clock stepped back does not postpone a
	// renewal by the step, nor one stepped forward bring it early.
	renewedAt, expiresAt, attemptedAt time.Time
}

// confirmed records that the backend confirmed lease at now (the wall clock) and at (the
// stopwatch).
func (h *hold) confirmed(lease backends.Lease, now, at time.Time) {
	h.Lease, h.RenewTime, h.LastError = lease, now, nil
	h.renewedAt, h.attemptedAt = at, at
	h.expiresAt = at.Add(lease.ExpireTime.Sub(now))
}

// Monotonic is a clock that also tells a time that wall-clock steps do not move, as Go's
// monotonic clock reading does (a test clock whose wall time is stepped implements it).
type Monotonic interface {
	Monotonic() time.Time
}

// elapsed reads the Renewer's stopwatch: the clock's monotonic time if it tells one, else its
// Now (the real clock's carries Go's monotonic reading; a fake clock only moves when told).
func (r *Renewer) elapsed() time.Time {
	if m, ok := r.clock.(Monotonic); ok {
		return m.Monotonic()
	}
	return r.clock.Now()
}

// Renewer renews tracked holds. Create it with New and add it to the manager.
type Renewer struct {
	clock   clock.Clock
	resolve Resolver
	notify  func(types.NamespacedName)
	timeout time.Duration

	mu    sync.Mutex
	holds map[HoldKey]*hold
	// renewing is the batches whose Renew call is in flight. The loop does not wait for them: a
	// backend that hangs until the call's timeout (up to 5 s) must not hold back the renewals of
	// another, whose lease may be shorter than that timeout.
	renewing map[batchID]bool
	wake     chan struct{}
	// afterRenewals is called after each round of renewals with a test for the sessions holds
	// live on, so that sessions nothing lives on any more can be closed.
	afterRenewals func(ctx context.Context, inUse func(backends.Backend) bool)
}

// Option configures a Renewer.
type Option func(*Renewer)

// WithClock sets the clock (default: the real one).
func WithClock(c clock.Clock) Option { return func(r *Renewer) { r.clock = c } }

// WithAfterRenewals sets a function called after each round of renewals with a test that tells
// whether a hold still lives on a session (registry.Registry.CloseRetired, which closes the
// sessions of edited LockBackends once their holds have moved).
func WithAfterRenewals(f func(ctx context.Context, inUse func(backends.Backend) bool)) Option {
	return func(r *Renewer) { r.afterRenewals = f }
}

// WithCallTimeout bounds each Renew call (default 5 s, and never more than a third of the TTL).
func WithCallTimeout(d time.Duration) Option { return func(r *Renewer) { r.timeout = d } }

// New returns a Renewer that finds backends with resolve and reports each claim whose hold was
// lost to notify (which must not block; it normally queues a reconcile).
func New(resolve Resolver, notify func(types.NamespacedName), opts ...Option) *Renewer {
	r := &Renewer{
		clock:    clock.RealClock{},
		resolve:  resolve,
		notify:   notify,
		timeout:  5 * time.Second,
		holds:    map[HoldKey]*hold{},
		renewing: map[batchID]bool{},
		wake:     make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Track records that claim holds lease, which session of backend granted or confirmed. Tracking
// a hold that is already tracked adds the claim, and takes lease (and session) only if it expires
// later than the one on record (a fresh acquisition or a resumed hold); a lost hold is revived
// only by such a lease. Re-tracking the same lease changes nothing else: each claim pass
// re-tracks its hold, and resetting the renewal schedule or a failed renewal's error there would
// postpone renewals indefinitely and hide a hold that expires unrenewed.
func (r *Renewer) Track(backend string, session backends.Backend, lease backends.Lease, claim types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := HoldKey{Backend: backend, Key: lease.Key, Identity: lease.Identity}
	h, ok := r.holds[k]
	switch {
	case !ok, h.Lost && lease.ExpireTime.After(h.Lease.ExpireTime):
		h = &hold{claims: map[types.NamespacedName]struct{}{}}
		r.holds[k] = h
		h.confirmed(lease, r.clock.Now(), r.elapsed())
		h.session = session
	case h.Lost:
		// The lease that was lost: it stays lost.
	case lease.ExpireTime.After(h.Lease.ExpireTime):
		h.confirmed(lease, r.clock.Now(), r.elapsed())
		h.session = session
	}
	h.claims[claim] = struct{}{}
	r.poke()
}

// Untrack removes claim from the hold and returns how many claims still share it; at zero the
// hold is forgotten and no longer renewed.
func (r *Renewer) Untrack(k HoldKey, claim types.NamespacedName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.holds[k]
	if !ok {
		return 0
	}
	delete(h.claims, claim)
	if len(h.claims) == 0 {
		delete(r.holds, k)
	}
	return len(h.claims)
}

// Drop forgets the hold k whichever claims share it: its lock released it. Claims that shared it
// but vanished without a word (deleted without their finalizer) no longer keep it renewed.
func (r *Renewer) Drop(k HoldKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.holds, k)
}

// Forget removes claim from every hold it shares, for a claim whose lock vanished and whose hold
// can therefore not be named. Holds left without claims are no longer renewed.
func (r *Renewer) Forget(claim types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, h := range r.holds {
		delete(h.claims, claim)
		if len(h.claims) == 0 {
			delete(r.holds, k)
		}
	}
}

// Lookup returns what the Renewer knows of a hold; ok is false when it does not track it (for
// instance right after a controller restart).
func (r *Renewer) Lookup(k HoldKey) (Hold, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.holds[k]
	if !ok {
		return Hold{}, false
	}
	return h.Hold, true
}

// NeedLeaderElection makes the Renewer run only on the leader, like the reconcilers.
func (r *Renewer) NeedLeaderElection() bool { return true }

// Wake makes the Renewer look at its holds now: a session was retired, and what no hold lives on
// can be closed at once. It never blocks.
func (r *Renewer) Wake() { r.poke() }

// Start renews holds until ctx ends.
func (r *Renewer) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("renewer")
	ctx = ctrl.LoggerInto(ctx, log)
	for {
		wait := r.renewDue(ctx)
		if r.afterRenewals != nil {
			r.afterRenewals(ctx, r.inUse)
		}
		timer := r.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-r.wake:
		case <-timer.C():
		}
		timer.Stop()
	}
}

// inUse tells whether a hold lives on session.
func (r *Renewer) inUse(session backends.Backend) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.holds {
		if h.session == session && !h.Lost {
			return true
		}
	}
	return false
}

// batch is the holds of one backend with one TTL on one session: they are renewed in one call.
type batch struct {
	backend string
	ttl     time.Duration
	session backends.Backend
	keys    []HoldKey
	leases  []backends.Lease
}

// batchID names a batch.
type batchID struct {
	backend string
	ttl     time.Duration
	session backends.Backend
}

// renewDue starts the renewal of every batch with at least one hold due, unless that batch's
// previous renewal is still in flight, and returns how long to sleep until the next one is due. A
// renewal that ends wakes the loop.
func (r *Renewer) renewDue(ctx context.Context) time.Duration {
	now := r.elapsed()
	r.mu.Lock()
	defer r.mu.Unlock()
	batches := map[batchID]*batch{}
	due := map[batchID]bool{}
	next := time.Hour
	for k, h := range r.holds {
		if h.Lost {
			continue
		}
		ttl := h.Lease.TTL
		id := batchID{k.Backend, ttl, h.session}
		if r.renewing[id] {
			continue // looked at again when that renewal ends
		}
		b, ok := batches[id]
		if !ok {
			b = &batch{backend: k.Backend, ttl: ttl, session: h.session}
			batches[id] = b
		}
		b.keys = append(b.keys, k)
		b.leases = append(b.leases, h.Lease)
		at := renewAt(h.renewedAt, h.expiresAt, ttl)
		if h.LastError != nil {
			at = h.attemptedAt.Add(retryInterval(ttl))
		}
		if !at.After(now) {
			due[id] = true
		} else if wait := at.Sub(now); wait < next {
			next = wait
		}
	}

	// Batches are renewed concurrently and in the background: a backend that is slow or down
	// (each call waits up to its timeout) must not delay the renewals of the others.
	for id, b := range batches {
		if due[id] {
			r.renewing[id] = true
			go func() {
				r.renew(ctx, b)
				r.mu.Lock()
				defer r.mu.Unlock()
				delete(r.renewing, id)
				r.poke()
			}()
		}
	}
	return next
}

// Interval is how long after a confirmation a hold is renewed again: a sixth of its TTL, where
// Redisson's watchdog takes a third. Renewal is batched, so renewing twice as often costs one more
// backend call per batch, not per hold; what it buys is claim status writes. A held claim's
// status.expireTime can only show what the latest renewal confirmed (at most one TTL after it),
// and must be rewritten before it passes: the more recent the latest renewal when the claim is
// rewritten, the further each write moves it. At a third, a write moves it about two thirds of a
// TTL (1.5 writes per held claim per TTL); at a sixth, five sixths (1.2). It also leaves a new
// leader more of the lease when the old one dies: at least five sixths of it, not two thirds.
func Interval(ttl time.Duration) time.Duration { return ttl / 6 }

// renewAt is when a hold last confirmed at renewTime, whose lease expires at expire, is next due:
// an Interval after the confirmation, but never later than the TTL less an Interval before the
// expiry. The two agree for a lease just renewed; they part for a hold taken over from another
// session (a resumed hold, after a leader failover), whose lease may have only seconds left when
// this process starts tracking it. Scheduled from the take-over alone, its first renewal would
// come after it expired (the reliability harness's default-failover scenario lost such a hold).
func renewAt(renewTime, expire time.Time, ttl time.Duration) time.Time {
	at := renewTime.Add(Interval(ttl))
	if latest := expire.Add(Interval(ttl) - ttl); latest.Before(at) {
		return latest
	}
	return at
}

// retryInterval is how soon a failed renewal is tried again: often enough to keep a lock through
// a short blip, rarely enough not to hammer a struggling backend.
func retryInterval(ttl time.Duration) time.Duration {
	return max(ttl/10, 500*time.Millisecond)
}

func (r *Renewer) renew(ctx context.Context, b *batch) {
	log := ctrl.LoggerFrom(ctx)
	callCtx, cancel := context.WithTimeout(ctx, min(r.timeout, b.ttl/3))
	defer cancel()

	var (
		renewed []on
		lost    []backends.Lease
	)
	session, err := r.resolve(callCtx, b.backend)
	switch {
	case err != nil:
	case b.session != nil && b.session != session:
		// The LockBackend was edited since these holds were taken: the new session takes them over
		// before the old one closes.
		renewed, lost, err = moveWithin(callCtx, session, b.session, b.leases, b.ttl)
		log.Info("Moved holds to the backend's new session", "backend", b.backend, "locks", len(b.leases),
			"moved", countOn(renewed, session), "lost", len(lost), "error", err)
	default:
		var done []backends.Lease
		done, lost, err = renewWithin(callCtx, session, b.leases, b.ttl)
		for _, l := range done {
			renewed = append(renewed, on{l, session})
		}
	}
	now, at := r.clock.Now(), r.elapsed()
	if mutant.Active(mutant.RenewLost) {
		for _, l := range lost {
			l.ExpireTime = now.Add(b.ttl)
			renewed = append(renewed, on{l, b.session})
		}
		lost = nil
	}

	var notify []types.NamespacedName
	r.mu.Lock()
	byKey := func(l backends.Lease) (*hold, bool) {
		h, ok := r.holds[HoldKey{Backend: b.backend, Key: l.Key, Identity: l.Identity}]
		return h, ok && !h.Lost
	}
	if err != nil {
		log.Error(err, "Renewal failed", "backend", b.backend, "locks", len(b.leases))
		for _, k := range b.keys {
			h, ok := r.holds[k]
			if !ok || h.Lost {
				continue
			}
			h.LastError, h.attemptedAt = err, at
			if !at.Before(h.expiresAt) {
				// Expired without a successful renewal: the backend may already have let it go.
				h.Lost = true
				notify = appendClaims(notify, h)
			}
		}
	}
	for _, l := range renewed {
		if h, ok := byKey(l.Lease); ok {
			if !at.Before(h.expiresAt) {
				// Answered only once the hold had expired: the renewal may have reached the
				// backend after the expiry (sent late, or held up on the way), and a backend whose
				// expiry only its readers enforce (a ZooKeeper record past its TTL, a SQL row past
				// its expiry) accepts it if nobody took the key meanwhile. But the key was free for
				// anyone in between, and the claim's expireTime has passed: a lapsed hold is never
				// resumed (the class of etcd #11456). It is Lost. What the late renewal wrote is
				// left to expire by itself (a TTL at most): a release here, owner-checked by
				// identity only, could free the hold of a leader that took over from this one
				// while it was cut off, with the same identity.
				log.Info("Lock lost: the renewal was answered after it expired", "backend", b.backend, "key", l.Key, "identity", l.Identity)
				h.Lost, h.attemptedAt = true, at
				notify = appendClaims(notify, h)
				continue
			}
			h.confirmed(l.Lease, now, at)
			if l.session != nil {
				h.session = l.session
			}
		}
	}
	for _, l := range lost {
		if h, ok := byKey(l); ok {
			log.Info("Lock lost", "backend", b.backend, "key", l.Key, "identity", l.Identity)
			h.Lost, h.attemptedAt = true, at
			notify = appendClaims(notify, h)
		}
	}
	r.mu.Unlock()
	for _, c := range notify {
		r.notify(c)
	}
}

// on is a lease confirmed by a session.
type on struct {
	backends.Lease
	session backends.Backend
}

func countOn(leases []on, session backends.Backend) int {
	n := 0
	for _, l := range leases {
		if l.session == session {
			n++
		}
	}
	return n
}

// moveWithin moves holds from the session old to the session to, by acquiring each key on to for
// the same identity: a hold a store keeps by identity is refreshed, and one it keeps by session
// (a ZooKeeper node, an etcd lease) passes to the new session; a key another holder has now comes
// back in lost. The holds to cannot take (the new session cannot reach or authenticate to its
// store) are renewed on old instead, which still holds them, so that an edit that does not work
// loses nothing; err is set only when neither session answered for them.
func moveWithin(ctx context.Context, to, old backends.Backend, leases []backends.Lease, ttl time.Duration) (renewed []on, lost []backends.Lease, err error) {
	type result struct {
		lease backends.Lease
		err   error
	}
	results := make([]result, len(leases))
	var wg sync.WaitGroup
	limit := make(chan struct{}, moveConcurrency)
	for i, l := range leases {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			lease, err := to.TryAcquire(ctx, l.Key, l.Identity, ttl)
			results[i] = result{lease, err}
		})
	}
	wg.Wait()
	var stay []backends.Lease
	var moveErr error
	for i, res := range results {
		switch {
		case res.err == nil:
			renewed = append(renewed, on{res.lease, to})
		case errors.Is(res.err, backends.ErrLocked):
			lost = append(lost, leases[i])
		default:
			stay, moveErr = append(stay, leases[i]), res.err
		}
	}
	if len(stay) == 0 {
		return renewed, lost, nil
	}
	kept, gone, err := renewWithin(ctx, old, stay, ttl)
	if err != nil {
		return renewed, lost, fmt.Errorf("the new session cannot take the holds (%w), and the old one cannot renew them: %w", moveErr, err)
	}
	for _, l := range kept {
		renewed = append(renewed, on{l, old})
	}
	return renewed, append(lost, gone...), nil
}

// moveConcurrency bounds the acquires in flight while holds move to a new session.
const moveConcurrency = 16

// renewWithin calls backend.Renew but gives up when ctx ends even if the backend does not: a
// driver stuck reconnecting must not keep the Renewer from noticing that holds expire.
func renewWithin(ctx context.Context, backend backends.Backend, leases []backends.Lease, ttl time.Duration) ([]backends.Lease, []backends.Lease, error) {
	type result struct {
		renewed, lost []backends.Lease
		err           error
	}
	done := make(chan result, 1) // buffered: a late answer is dropped, and its goroutine ends
	go func() {
		renewed, lost, err := backend.Renew(ctx, leases, ttl)
		done <- result{renewed, lost, err}
	}()
	select {
	case res := <-done:
		return res.renewed, res.lost, res.err
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("renewal got no answer in time: %w", ctx.Err())
	}
}

func appendClaims(to []types.NamespacedName, h *hold) []types.NamespacedName {
	for c := range h.claims {
		to = append(to, c)
	}
	return to
}

// poke wakes the loop so that it recomputes when the next renewal is due. Callers hold r.mu.
func (r *Renewer) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
