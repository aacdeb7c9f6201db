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
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// manyResult is the throughput across many locks at once.
type manyResult struct {
	locks, claimsPerLock, handoffs int
	elapsed                        time.Duration
	handoff                        quantiles
	// paced are handoffs below the capacity.
	paced []pacedResult
}

func (m manyResult) perSec() float64 {
	if m.elapsed <= 0 {
		return 0
	}
	return float64(m.handoffs) / m.elapsed.Seconds()
}

// manyLocks measures the capacity of many locks of the built-in backend, each with a queue: every
// holder is deleted the moment it is seen Held, by a pool of clients that does not wait for the
// handoff it starts (an open loop across locks), until every queue is empty. It reports handoffs
// per second from the first delete to the last grant (the capacity), and the latency of each
// handoff, which at capacity is mostly the backlog's.
func (b *bench) manyLocks(t *testing.T, ctx context.Context, locks, perLock int) manyResult {
	const ns = "bench-many"
	res := manyResult{locks: locks, claimsPerLock: perLock}
	held, name := b.queueMany(t, ctx, ns, locks, perLock)

	type job struct {
		name string
	}
	deletes := make(chan job, locks*perLock)
	deletedAt := map[string]time.Time{} // holder deleted → its lock's next claim, by next claim's name
	var lat []time.Duration
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for j := range deletes {
				_ = b.c.Delete(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: j.name}})
			}
		})
	}
	next := func(claim string) (string, bool) {
		var l, i int
		if _, err := fmt.Sscanf(claim, "many-%04d-%d", &l, &i); err != nil || i+1 >= perLock {
			return "", false
		}
		return name(l, i+1), true
	}
	start := time.Now()
	for l := range locks {
		if n, ok := next(name(l, 0)); ok {
			deletedAt[n] = time.Now()
		}
		deletes <- job{name: name(l, 0)}
	}
	want := locks * (perLock - 1)
	last := start
	for got := 0; got < want; {
		select {
		case n := <-held:
			now := time.Now()
			if at, ok := deletedAt[n]; ok {
				lat = append(lat, now.Sub(at))
			}
			got++
			last = now
			if nn, ok := next(n); ok {
				deletedAt[nn] = time.Now()
			}
			deletes <- job{name: n}
		case <-time.After(60 * time.Second):
			close(deletes)
			t.Fatalf("only %d of %d handoffs across %d locks within a minute of the last", got, want, locks)
		}
	}
	close(deletes)
	wg.Wait()
	res.handoffs, res.elapsed = want, last.Sub(start)
	res.handoff = report(fmt.Sprintf("across %d locks at capacity (holder deleted → next Held)", locks), lat)
	fmt.Printf("  %-58s %.0f handoffs/s (%d handoffs across %d locks in %s)\n", "many-lock throughput (open loop)",
		res.perSec(), res.handoffs, locks, res.elapsed.Round(time.Millisecond))
	return res
}

// queueMany makes namespace ns with locks locks of perLock claims each, waits until every lock is
// held by its first claim, and returns the watch of grants in ns and the claims' names.
func (b *bench) queueMany(t *testing.T, ctx context.Context, ns string, locks, perLock int) (<-chan string, func(lock, i int) string) {
	must(t, b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() {
		_ = b.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	// Watch first, so that no grant is missed; the watch is made again if the server ends it.
	held := watchHeld(ctx, b.c, ns)
	name := func(lock, i int) string { return fmt.Sprintf("many-%04d-%d", lock, i) }
	parallel(t, 16, locks, func(l int) error {
		lock := fmt.Sprintf("many-%04d", l)
		if err := b.c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lock}}); err != nil {
			return err
		}
		for i := range perLock {
			// As lockctl does: no finalizer.
			if err := b.c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(l, i)}, Spec: locksv1alpha1.LockClaimSpec{LockName: lock}}); err != nil {
				return err
			}
			// Creation seconds order the queue: keep each lock's claims in order.
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	heads := map[string]bool{}
	for l := range locks {
		heads[name(l, 0)] = true
	}
	for len(heads) > 0 {
		select {
		case n := <-held:
			delete(heads, n)
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d locks not granted to their first claim within a minute", len(heads), locks)
		}
	}
	return held, name
}

// pacedResult is handoffs across many locks with deletes asked at a fixed rate.
type pacedResult struct {
	// share is the rate as a share of the capacity measured by manyLocks.
	share, rate                    float64
	locks, claimsPerLock, handoffs int
	handoff                        quantiles
	// idle counts the ticks at which no holder was there to delete (every lock's next grant still
	// on its way): the manager was behind the rate.
	idle int
}

// pacedLocks measures handoff latency across many locks of the built-in backend below capacity:
// a pacer deletes one holder every 1/rate seconds, the one seen Held longest ago, through a pool
// of clients (an open loop), until every queue is empty. Each handoff is timed from its delete to
// the next claim seen Held.
func (b *bench) pacedLocks(t *testing.T, ctx context.Context, ns string, locks, perLock int, share, rate float64) pacedResult {
	res := pacedResult{share: share, rate: rate, locks: locks, claimsPerLock: perLock}
	held, name := b.queueMany(t, ctx, ns, locks, perLock)
	next := func(claim string) (string, bool) {
		var l, i int
		if _, err := fmt.Sscanf(claim, "many-%04d-%d", &l, &i); err != nil || i+1 >= perLock {
			return "", false
		}
		return name(l, i+1), true
	}
	ready := make([]string, 0, locks)
	for l := range locks {
		ready = append(ready, name(l, 0))
	}
	deletes := make(chan string, locks*perLock)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for n := range deletes {
				_ = b.c.Delete(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}})
			}
		})
	}
	defer func() {
		close(deletes)
		wg.Wait()
	}()
	deletedAt := map[string]time.Time{} // by the next claim's name
	var lat []time.Duration
	want := locks * (perLock - 1)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	quiet := time.Now()
	for len(lat) < want {
		select {
		case n := <-held:
			quiet = time.Now()
			if at, ok := deletedAt[n]; ok {
				lat = append(lat, time.Since(at))
			}
			if _, ok := next(n); ok {
				ready = append(ready, n)
			}
		case <-tick.C:
			if len(ready) == 0 {
				res.idle++
				if time.Since(quiet) > time.Minute {
					t.Fatalf("only %d of %d handoffs across %d locks at %.0f/s, none within a minute of the last", len(lat), want, locks, rate)
				}
				continue
			}
			n := ready[0]
			ready = ready[1:]
			nn, _ := next(n)
			deletedAt[nn] = time.Now()
			deletes <- n
		}
	}
	res.handoffs = len(lat)
	res.handoff = report(fmt.Sprintf("across %d locks at %.0f%% of capacity (%.0f deletes/s)", locks, share*100, rate), lat)
	return res
}

// parallel runs do(i) for i in [0, n) on k goroutines and fails t on the first error.
func parallel(t *testing.T, k, n int, do func(int) error) {
	work := make(chan int)
	errs := make(chan error, k)
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for i := range work {
				if err := do(i); err != nil {
					select {
					case errs <- err:
					default: // one error is enough to fail
					}
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
