//go:build bench

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

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/lockengine"
	"github.com/lockwarden/lockwarden/test/bench/proccpu"
)

// A handoff on one hot lock, timed span by span from the client's delete of the holder's claim:
// when the delete was acknowledged, when the controller's watch saw it, when the lock's pass
// began, when the lock record naming the next claim was written and then that claim's status
// (the engine's Tracer, in this process), and when a watcher saw the grant: on the lock record
// (how lockctl and pkg/lockclient learn of it) and by the claim's Acquired condition (how
// `kubectl wait` does). The loop is closed on both: the next delete follows the grant seen by
// both watchers. (Closed on the record alone, the next delete often came before the claim's
// own status write, which then found the claim gone: a holder may let go before its claim says
// Held, and kubectl wait's path would go unmeasured.)

// span is one moment of a handoff, timed from the client's delete.
type span int

const (
	spanAck span = iota
	spanEvent
	spanPass
	spanRecordSent
	spanRecord
	spanClaim
	spanSeenRecord
	spanSeenClaim
	spanCount
)

var spanLabels = [spanCount]string{
	spanAck:        "delete acknowledged (the client's one write)",
	spanEvent:      "controller's watch event of the delete",
	spanPass:       "the lock's pass begins",
	spanRecordSent: "the pass sends the lock record (its reads and decisions done)",
	spanRecord:     "lock record written, naming the next claim",
	spanClaim:      "the next claim's status written (Held)",
	spanSeenRecord: "seen on the lock record by a watch (lockctl, pkg/lockclient)",
	spanSeenClaim:  "seen by the claim's Acquired condition (kubectl wait)",
}

// spanTracer is the engine's Tracer: for the one lock it follows, when each moment happened, by
// point and claim.
type spanTracer struct {
	mu    sync.Mutex
	lock  types.NamespacedName
	marks map[traceKey][]time.Time
}

type traceKey struct {
	point lockengine.TracePoint
	claim string
}

func newSpanTracer() *spanTracer { return &spanTracer{marks: map[traceKey][]time.Time{}} }

func (t *spanTracer) Traced(point lockengine.TracePoint, lock types.NamespacedName, claim string) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if lock != t.lock {
		return
	}
	k := traceKey{point, claim}
	t.marks[k] = append(t.marks[k], now)
}

// follow traces lock from now on, forgetting what came before.
func (t *spanTracer) follow(lock types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lock, t.marks = lock, map[traceKey][]time.Time{}
}

// first is when point first happened for claim at or after since (zero: never).
func (t *spanTracer) first(point lockengine.TracePoint, claim string, since time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, at := range t.marks[traceKey{point, claim}] {
		if !at.Before(since) {
			return at
		}
	}
	return time.Time{}
}

// sightings are the moments a watcher first saw each claim granted.
type sightings struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	waiters map[string]chan struct{}
}

func newSightings() *sightings {
	return &sightings{seen: map[string]time.Time{}, waiters: map[string]chan struct{}{}}
}

// saw records that claim was seen granted at at, if it was not before.
func (s *sightings) saw(claim string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[claim]; ok {
		return
	}
	s.seen[claim] = at
	if ch, ok := s.waiters[claim]; ok {
		close(ch)
		delete(s.waiters, claim)
	}
}

// await returns when claim was first seen granted, waiting up to 30 s for it.
func (s *sightings) await(ctx context.Context, claim string) (time.Time, error) {
	s.mu.Lock()
	if at, ok := s.seen[claim]; ok {
		s.mu.Unlock()
		return at, nil
	}
	ch, ok := s.waiters[claim]
	if !ok {
		ch = make(chan struct{})
		s.waiters[claim] = ch
	}
	s.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		return time.Time{}, fmt.Errorf("claim %s was not seen granted within 30 s", claim)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[claim], nil
}

// watchRecord watches the lock named name, as lockctl does (a watch of the one object), and
// reports each claim its record names as a holder.
func watchRecord(ctx context.Context, c client.WithWatch, ns, name string, out *sightings) {
	sel := fields.OneTermEqualSelector("metadata.name", name)
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, &locksv1alpha1.DistributedLockList{}, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: sel})
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*locksv1alpha1.DistributedLock); ok {
				now := time.Now()
				for _, h := range l.Status.Holders {
					out.saw(h.Claim, now)
				}
			}
		}
	}
}

// watchAcquired watches the claims of ns and reports each whose Acquired condition is True.
func watchAcquired(ctx context.Context, c client.WithWatch, ns string, out *sightings) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, &locksv1alpha1.LockClaimList{}, client.InNamespace(ns))
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if cl, ok := ev.Object.(*locksv1alpha1.LockClaim); ok && meta.IsStatusConditionTrue(cl.Status.Conditions, locksv1alpha1.ConditionAcquired) {
				out.saw(cl.Name, time.Now())
			}
		}
	}
}

// closeOn says what the next delete of a round waits for.
type closeOn int

const (
	// onBoth: the grant seen on the lock record and by the claim's condition (every span timed).
	onBoth closeOn = iota
	// onRecordOnly: the grant seen on the lock record, as a holder that runs lockctl learns it;
	// the holder's delete then often comes before its claim's status write, which finds the
	// claim gone and is skipped.
	onRecordOnly
)

// handoffRound is one closed-loop run of handoffs on a fresh hot lock.
type handoffRound struct {
	// spans are the handoffs' times, by span, from the client's delete; a span the tracer did not
	// see (an external observer's moments always are) is left out of its list.
	spans [spanCount][]time.Duration
	// elapsed is the time from the first delete to the last grant seen by both watchers.
	elapsed time.Duration
	n       int
	// writes are those of the round, from a settle before the first delete to one after the last
	// grant (writeCounter.quiet), the client's deletes included.
	writes writeCounts
	// cpu is what the round cost each process of the machine, from the first delete until the
	// last grant was seen.
	cpu proccpu.Usage
}

func (h handoffRound) perSec() float64 { return float64(h.n) / h.elapsed.Seconds() }

// settle is how long the bench lets a lock's writes die down before and after counting them:
// longer than the engine's deferred writes of a lock's waiting count (5 s).
const settle = 6 * time.Second

// handoffs runs n handoffs on a new hot lock of backend, named after prefix and round. With depth
// 0 every claim is queued at the start (the queue shortens from n to none); otherwise depth claims
// wait behind the holder throughout: after each handoff a new claim joins the tail, as on a lock
// in steady use (its create and first status are counted apart from the handoffs').
func (b *bench) handoffs(ctx context.Context, prefix, backend string, round, n, depth int, loop closeOn) (handoffRound, error) {
	var h handoffRound
	c := b.c
	name := fmt.Sprintf("%s-hot-%d", prefix, round)
	if err := c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
		Spec: locksv1alpha1.DistributedLockSpec{BackendRef: locksv1alpha1.BackendReference{Name: backend}}}); err != nil {
		return h, err
	}
	if err := waitLockReady(ctx, c, "bench", name); err != nil {
		return h, err
	}
	b.tracer.follow(types.NamespacedName{Namespace: "bench", Name: name})
	onRecord, byCondition := newSightings(), newSightings()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go watchRecord(wctx, c, "bench", name, onRecord)
	go watchAcquired(wctx, c, "bench", byCondition)

	names := make([]string, n+1)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", name, i)
	}
	join := func(i int) error {
		// As lockctl does: no finalizer (the lock record releases a deleted claim).
		return c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: names[i]},
			Spec: locksv1alpha1.LockClaimSpec{LockName: name}})
	}
	if depth == 0 {
		depth = n
	}
	for i := range min(depth+1, n+1) {
		if err := join(i); err != nil {
			return h, err
		}
	}
	if _, err := byCondition.await(ctx, names[0]); err != nil {
		return h, err
	}
	before, err := b.writes.quiet(ctx, c, systemNS)
	if err != nil {
		return h, err
	}
	procs := append(proccpu.ClusterProcs(clusterDir()), proccpu.Proc{Label: "manager and bench (one process)", PID: os.Getpid()})
	cpu0 := proccpu.Take(procs)
	starts, acks := make([]time.Time, n+1), make([]time.Time, n+1)
	began := time.Now()
	for i := 1; i <= n; i++ {
		starts[i] = time.Now()
		if err := c.Delete(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: names[i-1]}}); err != nil {
			return h, err
		}
		acks[i] = time.Now()
		if _, err := onRecord.await(ctx, names[i]); err != nil {
			return h, err
		}
		if loop == onBoth {
			if _, err := byCondition.await(ctx, names[i]); err != nil {
				return h, err
			}
		}
		if depth < n && i+depth <= n {
			if err := join(i + depth); err != nil {
				return h, err
			}
		}
	}
	h.elapsed, h.n = time.Since(began), n
	if loop == onRecordOnly {
		// Its holders let go before their claims' status was written, most of the time: only
		// the throughput is kept.
		b.tracer.follow(types.NamespacedName{})
		return h, b.clear(ctx)
	}
	h.cpu = proccpu.Between(cpu0, proccpu.Take(procs), numCPU())
	after, err := b.writes.quiet(ctx, c, systemNS)
	if err != nil {
		return h, err
	}
	h.writes = after.minus(before)

	for i := 1; i <= n; i++ {
		t0, deleted, next := starts[i], names[i-1], names[i]
		add := func(s span, at time.Time) {
			if !at.IsZero() {
				h.spans[s] = append(h.spans[s], at.Sub(t0))
			}
		}
		add(spanAck, acks[i])
		event := b.tracer.first(lockengine.TraceClaimEvent, deleted, t0)
		add(spanEvent, event)
		if !event.IsZero() {
			add(spanPass, b.tracer.first(lockengine.TracePassStart, "", event))
		}
		add(spanRecordSent, b.tracer.first(lockengine.TraceRecordWriting, next, t0))
		add(spanRecord, b.tracer.first(lockengine.TraceRecordWritten, next, t0))
		add(spanClaim, b.tracer.first(lockengine.TraceClaimWritten, next, t0))
		at, _ := onRecord.await(ctx, next)
		add(spanSeenRecord, at)
		at, _ = byCondition.await(ctx, next)
		add(spanSeenClaim, at)
	}
	b.tracer.follow(types.NamespacedName{})
	return h, b.clear(ctx)
}

// clusterDir is the local cluster's directory (KUBECONFIG's), whose pids/ name its processes.
func clusterDir() string {
	if k := os.Getenv("KUBECONFIG"); k != "" {
		return filepath.Dir(k)
	}
	return ""
}
