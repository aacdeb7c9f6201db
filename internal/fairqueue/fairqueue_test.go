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

package fairqueue

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func newQueue(t *testing.T) *Queue[reconcile.Request] { return boundedQueue(t, 0) }

// boundedQueue is a queue whose namespaces have at most perNamespace requests in flight.
func boundedQueue(t *testing.T, perNamespace int) *Queue[reconcile.Request] {
	q := Options{MaxPerNamespace: perNamespace}.NewQueue()("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*Queue[reconcile.Request])
	t.Cleanup(q.ShutDown)
	return q
}

// get hands out the next item, failing the test if none comes within a second.
func get(t *testing.T, q *Queue[reconcile.Request]) (reconcile.Request, int) {
	t.Helper()
	type got struct {
		r reconcile.Request
		p int
	}
	ch := make(chan got, 1)
	go func() {
		r, p, _ := q.GetWithPriority()
		ch <- got{r, p}
	}()
	select {
	case g := <-ch:
		return g.r, g.p
	case <-time.After(time.Second):
		t.Fatal("no item within a second")
		return reconcile.Request{}, 0
	}
}

func TestAQuietNamespaceIsNextAfterOneItemOfABusyOne(t *testing.T) {
	q := newQueue(t)
	for i := range 1000 {
		q.Add(req("noisy", fmt.Sprintf("lock-%d", i)))
	}
	q.Add(req("quiet", "db"))
	if r, _ := get(t, q); r != req("noisy", "lock-0") {
		t.Fatalf("first %v", r)
	}
	if r, _ := get(t, q); r != req("quiet", "db") {
		t.Fatalf("second %v, want quiet/db: it waited behind the busy namespace's backlog", r)
	}
	if r, _ := get(t, q); r != req("noisy", "lock-1") {
		t.Fatalf("third %v: the busy namespace's own order", r)
	}
}

func TestTheWorkQueueRulesHold(t *testing.T) {
	t.Run("an item waits once, however often it is added", func(t *testing.T) {
		q := newQueue(t)
		q.Add(req("a", "x"))
		q.Add(req("a", "x"))
		q.Add(req("a", "y"))
		if q.Len() != 2 {
			t.Fatalf("len %d, want 2", q.Len())
		}
	})
	t.Run("an item added while it is processed comes back after Done, not before", func(t *testing.T) {
		q := newQueue(t)
		q.Add(req("a", "x"))
		r, _ := get(t, q)
		q.Add(r)
		if q.Len() != 0 {
			t.Fatalf("len %d while x is processed: two workers could take it", q.Len())
		}
		q.Done(r)
		if again, _ := get(t, q); again != r {
			t.Fatalf("got %v", again)
		}
	})
	t.Run("priorities: the controller's and the handlers' reach the order, and come back with the item", func(t *testing.T) {
		q := newQueue(t)
		low, high := -100, 7
		q.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, req("a", "initial-list"))
		q.Add(req("b", "event"))
		q.AddWithOpts(priorityqueue.AddOpts{Priority: &high}, req("c", "urgent"))
		for _, want := range []struct {
			r reconcile.Request
			p int
		}{{req("c", "urgent"), 7}, {req("b", "event"), 0}, {req("a", "initial-list"), -100}} {
			if r, p := get(t, q); r != want.r || p != want.p {
				t.Fatalf("got %v at %d, want %v at %d", r, p, want.r, want.p)
			}
		}
	})
	t.Run("a waiting low-priority item is raised by a fresh add", func(t *testing.T) {
		q := newQueue(t)
		low := -100
		q.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, req("a", "1"), req("a", "2"))
		q.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, req("b", "1"))
		q.Add(req("a", "2"))
		if r, p := get(t, q); r != req("a", "2") || p != 0 {
			t.Fatalf("got %v at %d", r, p)
		}
	})
	t.Run("AddAfter and AddRateLimited wait, then come", func(t *testing.T) {
		q := newQueue(t)
		q.AddWithOpts(priorityqueue.AddOpts{After: 50 * time.Millisecond}, req("a", "later"))
		q.AddRateLimited(req("a", "limited"))
		if q.Len() != 0 {
			t.Fatalf("len %d at once", q.Len())
		}
		seen := map[reconcile.Request]bool{}
		for range 2 {
			r, _ := get(t, q)
			seen[r] = true
			q.Done(r)
		}
		if !seen[req("a", "later")] || !seen[req("a", "limited")] {
			t.Fatalf("got %v", seen)
		}
	})
}

// TestNoAddIsLost adds items from several goroutines while workers take and finish them: every
// item's last add must be followed by a Get of it, as the work queue promises (a lost add would
// leave a lock unserved), with and without a bound on each namespace's items in flight, which
// must hold throughout.
func TestNoAddIsLost(t *testing.T) {
	for _, bound := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("at most %d per namespace", bound), func(t *testing.T) { noAddIsLost(t, bound) })
	}
}

func noAddIsLost(t *testing.T, bound int) {
	q := boundedQueue(t, bound)
	const items, namespaces = 200, 7
	var clock atomic.Int64
	var lastAdd, lastGet [items]atomic.Int64
	var inFlight [namespaces]atomic.Int64
	var overBound atomic.Int64
	key := func(i int) reconcile.Request {
		return req(fmt.Sprintf("ns-%d", i%namespaces), fmt.Sprintf("lock-%d", i))
	}
	index := map[reconcile.Request]int{}
	for i := range items {
		index[key(i)] = i
	}

	var workers sync.WaitGroup
	for range 6 {
		workers.Go(func() {
			for {
				r, _, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				i := index[r]
				if n := inFlight[i%namespaces].Add(1); bound > 0 && n > int64(bound) {
					overBound.Add(1)
				}
				lastGet[i].Store(clock.Add(1))
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				inFlight[i%namespaces].Add(-1)
				q.Done(r)
			}
		})
	}
	var adders sync.WaitGroup
	for a := range 4 {
		adders.Go(func() {
			low := -100
			for n := range 5000 {
				i := rand.IntN(items)
				lastAdd[i].Store(clock.Add(1))
				switch (a + n) % 4 {
				case 0:
					q.Add(key(i))
				case 1:
					q.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, key(i))
				case 2:
					q.AddAfter(key(i), time.Duration(rand.IntN(3))*time.Millisecond)
				default:
					q.AddWithOpts(priorityqueue.AddOpts{}, key(i))
				}
			}
		})
	}
	adders.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lost := 0
		for i := range items {
			if lastAdd[i].Load() > lastGet[i].Load() {
				lost++
			}
		}
		if lost == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d items added and never handed out afterwards (queue length %d, parked %d)", lost, q.Len(), q.Parked())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := overBound.Load(); n > 0 {
		t.Fatalf("a namespace had more than %d items in flight %d times", bound, n)
	}
	q.ShutDown()
	workers.Wait()
}

// A namespace at its bound has its next items parked, not handed out: another namespace's item
// is next, however long the first one's backlog, and each pass that ends lets one parked item
// back, in the order they came.
func TestABoundedNamespaceLeavesWorkersForTheOthers(t *testing.T) {
	parked := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "parked"}, []string{"name"})
	q := Options{MaxPerNamespace: 2, Parked: parked}.NewQueue()("locks", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*Queue[reconcile.Request])
	t.Cleanup(q.ShutDown)
	for i := range 100 {
		q.Add(req("noisy", fmt.Sprintf("lock-%d", i)))
	}
	first, _ := get(t, q)
	second, _ := get(t, q)
	if first != req("noisy", "lock-0") || second != req("noisy", "lock-1") {
		t.Fatalf("got %v, %v", first, second)
	}
	q.Add(req("quiet", "db"))
	if r, _ := get(t, q); r != req("quiet", "db") {
		t.Fatalf("got %v, want quiet/db: the noisy namespace is at its bound of 2", r)
	}
	if q.Parked() == 0 {
		t.Fatal("nothing parked: the noisy namespace's third item was handed out or lost")
	}
	if n := testutil.ToFloat64(parked.WithLabelValues("locks")); n != float64(q.Parked()) {
		t.Fatalf("the gauge says %v parked, the queue %d", n, q.Parked())
	}
	idle := make(chan reconcile.Request, 1)
	go func() { r, _ := q.Get(); idle <- r }()
	select {
	case r := <-idle:
		t.Fatalf("%v handed out while its namespace has 2 in flight", r)
	case <-time.After(100 * time.Millisecond):
	}
	q.Done(first)
	select {
	case r := <-idle:
		if r != req("noisy", "lock-2") {
			t.Fatalf("got %v, want the oldest parked item, noisy/lock-2", r)
		}
		if n := testutil.ToFloat64(parked.WithLabelValues("locks")); n != float64(q.Parked()) {
			t.Fatalf("the gauge says %v parked after a release, the queue %d", n, q.Parked())
		}
	case <-time.After(time.Second):
		t.Fatal("no item handed out after a noisy pass ended")
	}
}

// An item that changes while parked is handed out once, not twice, and with the higher priority.
func TestAParkedItemThatChangesIsServedOnce(t *testing.T) {
	q := boundedQueue(t, 1)
	q.Add(req("a", "1"))
	q.Add(req("a", "2"))
	running, _ := get(t, q)
	next := priorityGetter(q)
	time.Sleep(50 * time.Millisecond) // the worker parks a/2 and waits again
	high := 5
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &high}, req("a", "2"))
	if q.Len() != 0 || q.Parked() != 1 {
		t.Fatalf("len %d, parked %d: a parked item was queued again beside itself", q.Len(), q.Parked())
	}
	select {
	case g := <-next:
		t.Fatalf("%v handed out beyond the bound", g.r)
	case <-time.After(50 * time.Millisecond):
	}
	q.Done(running)
	expectOnceAt(t, next, req("a", "2"), high)
}

// priorityGetter hands out the queue's items with their priorities on a channel, from one
// worker, until the queue shuts down.
func priorityGetter(q *Queue[reconcile.Request]) <-chan prioritized {
	next := make(chan prioritized, 4)
	go func() {
		for {
			r, p, shutdown := q.GetWithPriority()
			if shutdown {
				return
			}
			next <- prioritized{r, p}
		}
	}()
	return next
}

// prioritized is an item handed out and its priority.
type prioritized struct {
	r reconcile.Request
	p int
}

// expectOnceAt expects want next, at priority, and then nothing more.
func expectOnceAt(t *testing.T, next <-chan prioritized, want reconcile.Request, priority int) {
	t.Helper()
	select {
	case g := <-next:
		if g.r != want || g.p != priority {
			t.Fatalf("got %v at %d, want %v at %d", g.r, g.p, want, priority)
		}
	case <-time.After(time.Second):
		t.Fatalf("%v not handed out", want)
	}
	select {
	case g := <-next:
		t.Fatalf("%v handed out again", g.r)
	case <-time.After(50 * time.Millisecond):
	}
}

// Draining at shutdown does not wait for parked items: they are not in flight.
func TestDrainDoesNotWaitForParkedItems(t *testing.T) {
	q := boundedQueue(t, 1)
	q.Add(req("a", "1"))
	q.Add(req("a", "2"))
	running, _ := get(t, q)
	done := make(chan struct{})
	go func() {
		for {
			r, shutdown := q.Get()
			if shutdown {
				close(done)
				return
			}
			q.Done(r)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	q.Done(running)
	select {
	case <-drained:
	case <-time.After(2 * time.Second):
		t.Fatal("ShutDownWithDrain still waits, for a parked item")
	}
	<-done
}

// pacedQueue is a queue on a fake clock whose namespaces are within bounds.
func pacedQueue(t *testing.T, bounds Bounds, paced *prometheus.GaugeVec) (*Queue[reconcile.Request], *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := newWithClock("locks", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		func(r reconcile.Request) string { return r.Namespace }, bounds, clk)
	if paced != nil {
		q.paced = paced.WithLabelValues("locks")
	}
	t.Cleanup(q.ShutDown)
	return q, clk
}

// getter hands out the queue's items on a channel, from one worker, until the queue shuts down.
func getter(q *Queue[reconcile.Request]) <-chan reconcile.Request {
	out := make(chan reconcile.Request, 100)
	go func() {
		for {
			r, shutdown := q.Get()
			if shutdown {
				close(out)
				return
			}
			out <- r
		}
	}()
	return out
}

func expectNext(t *testing.T, from <-chan reconcile.Request, want reconcile.Request) {
	t.Helper()
	select {
	case r := <-from:
		if r != want {
			t.Fatalf("got %v, want %v", r, want)
		}
	case <-time.After(time.Second):
		t.Fatalf("%v not handed out", want)
	}
}

func expectNone(t *testing.T, from <-chan reconcile.Request, why string) {
	t.Helper()
	select {
	case r := <-from:
		t.Fatalf("%v handed out: %s", r, why)
	case <-time.After(50 * time.Millisecond):
	}
}

// waitHeld waits until the queue holds n items for their pace.
func waitHeld(t *testing.T, q *Queue[reconcile.Request], n int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for q.Paced() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d held for their pace, want %d", q.Paced(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A namespace ahead of its pace has its next item held until its time, while another
// namespace's items are handed out; each held item goes at the time it booked, in order.
func TestANamespaceAheadOfItsPaceIsHeldAndTheOthersAreNot(t *testing.T) {
	paced := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "paced"}, []string{"name"})
	q, clk := pacedQueue(t, Bounds{Rate: 2}, paced) // 500 ms a pass, bursts of 2
	for i := range 4 {
		q.Add(req("noisy", fmt.Sprintf("lock-%d", i)))
	}
	out := getter(q)
	expectNext(t, out, req("noisy", "lock-0"))
	expectNext(t, out, req("noisy", "lock-1"))
	waitHeld(t, q, 2) // lock-2 at 500 ms, lock-3 at 1 s
	if n := testutil.ToFloat64(paced.WithLabelValues("locks")); n != 2 {
		t.Fatalf("the gauge says %v held, want 2", n)
	}
	q.Add(req("quiet", "db"))
	expectNext(t, out, req("quiet", "db"))
	expectNone(t, out, "the noisy namespace is ahead of its pace")
	clk.Step(500 * time.Millisecond)
	expectNext(t, out, req("noisy", "lock-2"))
	expectNone(t, out, "lock-3 booked the pass at 1 s")
	clk.Step(500 * time.Millisecond)
	expectNext(t, out, req("noisy", "lock-3"))
	waitHeld(t, q, 0)
	if n := testutil.ToFloat64(paced.WithLabelValues("locks")); n != 0 {
		t.Fatalf("the gauge says %v held, want 0", n)
	}
}

// An item that changes while held is handed out once, at its time, with the higher priority.
func TestAHeldItemThatChangesIsServedOnce(t *testing.T) {
	q, clk := pacedQueue(t, Bounds{Rate: 1}, nil)
	q.Add(req("a", "1"))
	q.Add(req("a", "2"))
	next := priorityGetter(q)
	if g := <-next; g.r != req("a", "1") {
		t.Fatalf("got %v first", g.r)
	}
	waitHeld(t, q, 1)
	high := 5
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &high}, req("a", "2"))
	if q.Len() != 0 {
		t.Fatalf("len %d: a held item was queued again beside itself", q.Len())
	}
	clk.Step(time.Second)
	expectOnceAt(t, next, req("a", "2"), high)
}

// With both bounds, an item that waited for its pace and was then parked does not pay twice: it
// is handed out the moment its namespace has a place, with no second wait.
func TestAnItemPaysItsPaceOnce(t *testing.T) {
	q, clk := pacedQueue(t, Bounds{InFlight: 1, Rate: 1}, nil)
	q.Add(req("a", "1"))
	q.Add(req("a", "2"))
	out := getter(q)
	expectNext(t, out, req("a", "1"))
	waitHeld(t, q, 1)
	clk.Step(time.Second) // a/2's pass is due, but a/1 is still in flight: a/2 is parked
	deadline := time.Now().Add(time.Second)
	for q.Parked() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d parked, %d held: a/2 was not parked", q.Parked(), q.Paced())
		}
		time.Sleep(time.Millisecond)
	}
	q.Done(req("a", "1"))
	expectNext(t, out, req("a", "2"))
}

// Shutting down lets held items go, handed out at once rather than lost: a drain does not wait
// for their timers.
func TestShutdownLetsHeldItemsGo(t *testing.T) {
	q, _ := pacedQueue(t, Bounds{Rate: 1}, nil)
	q.Add(req("a", "1"))
	q.Add(req("a", "2"))
	passes := make(chan reconcile.Request, 4)
	go func() {
		for {
			r, shutdown := q.Get()
			if shutdown {
				close(passes)
				return
			}
			passes <- r
			q.Done(r)
		}
	}()
	expectNext(t, passes, req("a", "1"))
	waitHeld(t, q, 1)
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(2 * time.Second):
		t.Fatal("ShutDownWithDrain still waits, for a held item's time")
	}
	expectNext(t, passes, req("a", "2"))
	if q.Paced() != 0 {
		t.Fatalf("%d still held after shutdown", q.Paced())
	}
}
