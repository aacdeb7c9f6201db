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

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// A hold is lost when a claim that was seen Held stops being Held, or goes away, although the
// harness neither deleted it nor deleted its holder pod; or when its fencing token changes while
// it is Held (the lock was granted to it again, so the hold in between was not kept). A claim
// the harness ended (retired) leaves Held as a release, not a loss.
type loss struct {
	claim, lock string
	token       int64
	at          time.Time
	// how says what was seen: the phase and reason it went to, "deleted while Held", or the
	// token change.
	how string
}

func (l loss) String() string {
	return fmt.Sprintf("%s %s (lock %s, token %d): %s", l.at.Format("15:04:05.000"), l.claim, l.lock, l.token, l.how)
}

// grant is a claim seen becoming Held.
type grant struct {
	claim, lock, pod string
	at               time.Time
}

type claimRec struct {
	lock, pod  string
	phase      locksv1alpha1.ClaimPhase
	held       bool
	token      int64
	renewTime  time.Time
	expireTime time.Time
	hasStatus  bool
	heldAt     time.Time
	retired    bool
}

// pending tells whether the claim waits in its lock's queue: not Held, not in a final phase, and
// not ended by the harness.
func (r *claimRec) pending() bool {
	return r != nil && !r.held && !r.retired && (r.phase == "" || r.phase == locksv1alpha1.ClaimPending)
}

type lockRec struct {
	holders map[string]bool
	// retiredAt is when the harness last ended a holder of this lock, until the next grant:
	// the start of a handoff.
	retiredAt time.Time
	// pending counts the claims waiting in the lock's queue (claimRec.pending).
	pending int
}

// tracker follows the claims (and, for pod workloads, the pods) of one namespace through
// informers, and keeps what the figures need: which claims hold which locks, every grant,
// every lost hold, handoff latencies. Its state changes only in observe, observeDelete and
// retire, which are plain functions of the events, so that tests can drive it.
type tracker struct {
	mu      sync.Mutex
	claims  map[string]*claimRec
	locks   map[string]*lockRec
	retired map[string]time.Time
	losses  []loss
	grants  int
	// heldLocks counts locks with at least one holder; wantLocks is how many the workload has.
	heldLocks, wantLocks int
	allHeldAt            time.Time
	// claimsSeen counts claims ever seen; wantClaims is how many the workload makes at first,
	// allClaimsAt when claimsSeen reached it.
	claimsSeen, wantClaims int
	allClaimsAt            time.Time
	// withStatus counts the claims whose status has a phase.
	withStatus int
	// podsSeen counts pods ever seen; wantPods is how many the workload makes at first;
	// firstPodAt and lastPodAt when the first and the wantPods-th were seen.
	podsSeen, wantPods    int
	firstPodAt, lastPodAt time.Time
	// handoffLat are the times from a holder retired to its lock's next grant.
	handoffLat []time.Duration
	// grantsCh, when set, receives every grant (for churn). Sends happen outside mu.
	grantsCh chan grant

	stop func()
}

func newTracker(wantLocks, wantClaims, wantPods int) *tracker {
	return &tracker{claims: map[string]*claimRec{}, locks: map[string]*lockRec{}, retired: map[string]time.Time{},
		wantLocks: wantLocks, wantClaims: wantClaims, wantPods: wantPods}
}

// startTracker starts informers on the claims (and pods) of ns and feeds t.
func startTracker(ctx context.Context, cfg *rest.Config, ns string, t *tracker, pods bool) error {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme(),
		DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultTransform:  cache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	t.stop = cancel
	claims, err := c.GetInformer(ctx, &locksv1alpha1.LockClaim{})
	if err != nil {
		cancel()
		return err
	}
	if _, err := claims.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.onClaim(o) },
		UpdateFunc: func(_, o any) { t.onClaim(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if cl, ok := o.(*locksv1alpha1.LockClaim); ok {
				t.observeDelete(cl.Name, time.Now())
			}
		},
	}); err != nil {
		cancel()
		return err
	}
	if pods {
		pi, err := c.GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			cancel()
			return err
		}
		if _, err := pi.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { t.podSeen(time.Now()) },
		}); err != nil {
			cancel()
			return err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return fmt.Errorf("the tracker's informers on namespace %s did not sync", ns)
	}
	return nil
}

func (t *tracker) close() {
	if t.stop != nil {
		t.stop()
	}
}

func (t *tracker) onClaim(o any) {
	cl, ok := o.(*locksv1alpha1.LockClaim)
	if !ok {
		return
	}
	if g, ok := t.observe(cl, time.Now()); ok && t.grantsChan() != nil {
		t.grantsChan() <- g
	}
}

func (t *tracker) grantsChan() chan grant {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.grantsCh
}

// notifyGrants sends every grant from now on to ch (nil: stop).
func (t *tracker) notifyGrants(ch chan grant) {
	t.mu.Lock()
	t.grantsCh = ch
	t.mu.Unlock()
}

func (t *tracker) lock(name string) *lockRec {
	l, ok := t.locks[name]
	if !ok {
		l = &lockRec{holders: map[string]bool{}}
		t.locks[name] = l
	}
	return l
}

// observe records a claim as seen at now, and returns the grant if it just became Held.
func (t *tracker) observe(cl *locksv1alpha1.LockClaim, now time.Time) (grant, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.claims[cl.Name]
	var wasPending bool
	if ok {
		wasPending = r.pending()
	} else {
		_, retired := t.retired[cl.Name]
		r = &claimRec{lock: cl.Spec.LockName, retired: retired}
		if cl.Spec.Holder != nil {
			r.pod = cl.Spec.Holder.PodName
		}
		t.claims[cl.Name] = r
		t.claimsSeen++
		if t.claimsSeen == t.wantClaims {
			t.allClaimsAt = now
		}
	}
	st := cl.Status
	if !r.hasStatus && st.Phase != "" {
		t.withStatus++
	}
	r.phase, r.hasStatus = st.Phase, st.Phase != ""
	if st.RenewTime != nil {
		r.renewTime = st.RenewTime.Time
	}
	if st.ExpireTime != nil {
		r.expireTime = st.ExpireTime.Time
	}
	held := st.Phase == locksv1alpha1.ClaimHeld
	l := t.lock(r.lock)
	defer func() { l.pending += b2i(r.pending()) - b2i(wasPending) }()
	var g grant
	granted := false
	switch {
	case held && !r.held:
		r.held, r.token, r.heldAt = true, st.FencingToken, now
		if len(l.holders) == 0 {
			t.heldLocks++
			if t.heldLocks == t.wantLocks && t.allHeldAt.IsZero() {
				t.allHeldAt = now
			}
		}
		l.holders[cl.Name] = true
		t.grants++
		if !l.retiredAt.IsZero() {
			t.handoffLat = append(t.handoffLat, now.Sub(l.retiredAt))
			l.retiredAt = time.Time{}
		}
		g, granted = grant{claim: cl.Name, lock: r.lock, pod: r.pod, at: now}, true
	case held && r.held && st.FencingToken != r.token:
		t.losses = append(t.losses, loss{claim: cl.Name, lock: r.lock, token: r.token, at: now,
			how: fmt.Sprintf("fencing token changed from %d to %d while Held (granted again)", r.token, st.FencingToken)})
		r.token = st.FencingToken
	case !held && r.held:
		t.unhold(cl.Name, r, l)
		if _, ok := t.retired[cl.Name]; !ok {
			how := "phase " + string(st.Phase)
			if c := meta.FindStatusCondition(st.Conditions, locksv1alpha1.ConditionAcquired); c != nil {
				how += ", reason " + c.Reason
			}
			t.losses = append(t.losses, loss{claim: cl.Name, lock: r.lock, token: r.token, at: now, how: how})
		}
	}
	return g, granted
}

func (t *tracker) unhold(name string, r *claimRec, l *lockRec) {
	r.held = false
	delete(l.holders, name)
	if len(l.holders) == 0 {
		t.heldLocks--
	}
}

// observeDelete records that a claim went away.
func (t *tracker) observeDelete(name string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.claims[name]
	if !ok {
		return
	}
	if r.pending() {
		t.lock(r.lock).pending--
	}
	if r.hasStatus {
		t.withStatus--
	}
	if r.held {
		t.unhold(name, r, t.lock(r.lock))
		if _, ok := t.retired[name]; !ok {
			t.losses = append(t.losses, loss{claim: name, lock: r.lock, token: r.token, at: now, how: "deleted while Held, not by the harness"})
		}
	}
	delete(t.claims, name)
	delete(t.retired, name)
}

// retire records that the harness is about to end a claim (delete it or its pod): leaving Held
// after this is a release, and the lock's next grant ends a handoff.
func (t *tracker) retire(claim string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.retired[claim] = now
	r, ok := t.claims[claim]
	if !ok {
		return
	}
	l := t.lock(r.lock)
	if r.pending() {
		l.pending--
	}
	r.retired = true
	if r.held {
		l.retiredAt = now
	}
}

// hasWaiters tells whether a lock's queue holds a claim that waits: ending its holder then
// makes a handoff, not a free lock.
func (t *tracker) hasWaiters(lock string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.locks[lock]
	return ok && l.pending > 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (t *tracker) podSeen(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.podsSeen++
	if t.podsSeen == 1 {
		t.firstPodAt = now
	}
	if t.podsSeen == t.wantPods {
		t.lastPodAt = now
	}
}

// snapshot is a consistent copy of the counters.
type snapshot struct {
	grants, heldLocks, claimsSeen, podsSeen, losses, claims, withStatus int
	allHeldAt, allClaimsAt, firstPodAt, lastPodAt                       time.Time
}

func (t *tracker) snapshot() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return snapshot{grants: t.grants, heldLocks: t.heldLocks, claimsSeen: t.claimsSeen, podsSeen: t.podsSeen,
		losses: len(t.losses), claims: len(t.claims), withStatus: t.withStatus, allHeldAt: t.allHeldAt,
		allClaimsAt: t.allClaimsAt, firstPodAt: t.firstPodAt, lastPodAt: t.lastPodAt}
}

// lossesSince returns the losses recorded from index i on.
func (t *tracker) lossesSince(i int) []loss {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]loss(nil), t.losses[i:]...)
}

// handoffsSince returns the handoff latencies recorded from index i on, and the count so far.
func (t *tracker) handoffsSince(i int) ([]time.Duration, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.handoffLat[i:]...), len(t.handoffLat)
}

// holders returns the claims that hold each lock: claim name → its record's pod, lock, token.
type heldClaim struct {
	claim, lock, pod string
	token            int64
}

func (t *tracker) holders() []heldClaim {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []heldClaim
	for name, r := range t.claims {
		if r.held {
			out = append(out, heldClaim{claim: name, lock: r.lock, pod: r.pod, token: r.token})
		}
	}
	return out
}

// renewedAfter tells, for the claims named, how many are Held with the same token and show a
// renewal (status.renewTime) after t0, and how many are no longer Held with that token.
func (t *tracker) renewedAfter(claims []heldClaim, t0 time.Time) (renewed, gone int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range claims {
		r, ok := t.claims[h.claim]
		switch {
		case !ok || !r.held || r.token != h.token:
			gone++
		case r.renewTime.After(t0):
			renewed++
		}
	}
	return renewed, gone
}

// grantedAfter counts the locks named that have a holder granted after t0.
func (t *tracker) grantedAfter(locks []string, t0 time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, name := range locks {
		l, ok := t.locks[name]
		if !ok {
			continue
		}
		for c := range l.holders {
			if r := t.claims[c]; r != nil && r.heldAt.After(t0) {
				n++
				break
			}
		}
	}
	return n
}

// expiredCandidates lists the claims that the informer shows Held with an expireTime before
// now. The informer may lag behind the API server (a renewal not seen yet), never lead it: a
// claim Held past its expireTime in the API server is a candidate here, and a candidate is
// confirmed by a read from the API server (sampleExpired).
func (t *tracker) expiredCandidates(now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for name, r := range t.claims {
		if r.held && !r.expireTime.IsZero() && r.expireTime.Before(now) {
			out = append(out, name)
		}
	}
	return out
}

// waitFor polls cond on the tracker's snapshot until it holds, the bound passes or ctx ends; it
// says how far it got every 30 s.
func (t *tracker) waitFor(ctx context.Context, bound time.Duration, what string, cond func(snapshot) bool) error {
	start := time.Now()
	deadline, progress := start.Add(bound), start.Add(30*time.Second)
	for {
		s := t.snapshot()
		if cond(s) {
			return nil
		}
		state := fmt.Sprintf("locks held %d of %d, claims seen %d, pods seen %d", s.heldLocks, t.wantLocks, s.claimsSeen, s.podsSeen)
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s (%s)", what, bound, state)
		}
		if time.Now().After(progress) {
			logf("waiting %s for %s: %s", time.Since(start).Round(time.Second), what, state)
			progress = progress.Add(30 * time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
