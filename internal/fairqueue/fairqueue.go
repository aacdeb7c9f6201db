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

// Package fairqueue is the work queue of lockwarden's controllers: namespaces take turns in it,
// so that one namespace's churn does not starve another's grants (docs/scale.md, "Fairness").
//
// A controller's default queue hands out items first come, first served: a namespace that
// wakes a thousand locks at once puts a quiet namespace's one lock behind all of them. Here each
// namespace waits in a FIFO of its own and the namespaces with waiting items take turns, one
// item each, so a quiet namespace's lock waits for at most one item of every other busy
// namespace. It keeps what controller-runtime's priority queue gives: items of the initial list
// (a new leader's, a restarted manager's) wait at low priority behind fresh events, and it is
// client-go's work queue underneath (one entry per item, never two workers on one item, delays,
// rate-limited retries and the workqueue_* metrics).
//
// Turns alone do not keep a busy namespace from filling every worker, and through them the API
// server that every namespace's passes share, while the others have nothing waiting; their next
// item then waits at the saturated server's pace. A bound on each namespace's passes in flight
// (Options.MaxPerNamespace, the manager's --namespace-workers) keeps room for the others, and a
// bound on how many of its passes begin each second (Options.NamespaceRate, --namespace-rate)
// keeps its load on that server below what the server can answer.
package fairqueue

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue is a rate-limiting work queue whose waiting items are handed out by priority, then by
// turns between tenants. It is a controller-runtime priorityqueue.PriorityQueue, so that event
// handlers and the controller pass it their priorities.
type Queue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T]
	order  *order[T]
	shares *shares[T]
	paces  *paces[T]
	clock  clock.WithDelayedExecution
	// parked counts the items parked now (lockwarden_workqueue_parked), and paced those held
	// for their tenant's pace (lockwarden_workqueue_paced); nil counts nothing.
	parked, paced prometheus.Gauge

	mu sync.Mutex
	// wanted is the highest priority asked for each item since it was last pushed.
	wanted map[T]int
	// held are the items held for their tenant's pace, each with the timer that lets it go.
	held map[T]heldItem
	// closed: the queue shuts down, and nothing more is held.
	closed bool
}

// heldItem is an item held for its tenant's pace: the timer that lets it go, and the priority it
// was handed out at.
type heldItem struct {
	timer    clock.Timer
	priority int
}

// Bounds are what one tenant may take of a queue; the zero value bounds nothing.
type Bounds struct {
	// InFlight is the most items of one tenant handed out and not yet done (0: no bound).
	InFlight int
	// Rate is the most items of one tenant handed out per second, on average (0: no bound),
	// with bursts of up to a second's worth.
	Rate float64
}

// New makes a queue called name (the workqueue_* metrics' name label) whose tenants are keyOf's
// values, each within bounds.
func New[T comparable](name string, rateLimiter workqueue.TypedRateLimiter[T], keyOf func(T) string, bounds Bounds) *Queue[T] {
	return newWithClock(name, rateLimiter, keyOf, bounds, clock.RealClock{})
}

func newWithClock[T comparable](name string, rateLimiter workqueue.TypedRateLimiter[T], keyOf func(T) string, bounds Bounds, clk clock.WithDelayedExecution) *Queue[T] {
	q := &Queue[T]{wanted: map[T]int{}, held: map[T]heldItem{}, clock: clk,
		shares: newShares(keyOf, bounds.InFlight),
		paces:  newPaces(keyOf, bounds.Rate, int(math.Ceil(bounds.Rate)))}
	q.order = newOrder(keyOf, q.takeWanted)
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[T]{Name: name, Queue: q.order})
	q.TypedRateLimitingInterface = workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter, workqueue.TypedRateLimitingQueueConfig[T]{
		Name: name,
		DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{
			Name: name, Queue: base,
		}),
	})
	return q
}

// Options are how a controller's work queue hands out requests.
type Options struct {
	// FirstComeFirstServed is controller-runtime's default priority queue, first come, first
	// served: only the fairness benchmark asks for it, to compare.
	FirstComeFirstServed bool
	// MaxPerNamespace bounds one namespace's requests in flight at once (0: no bound, each may
	// have every worker).
	MaxPerNamespace int
	// NamespaceRate bounds how many of one namespace's requests are handed out a second, with
	// bursts of a second's worth (0: no bound).
	NamespaceRate float64
	// Parked, when set, counts each queue's requests parked at the bound in flight, and Paced
	// those held for their namespace's rate, by the queue's name.
	Parked, Paced *prometheus.GaugeVec
}

// NewQueue is a controller's NewQueue (controller.Options): namespaces take turns, each within
// MaxPerNamespace; nil (controller-runtime's default) with FirstComeFirstServed.
func (o Options) NewQueue() func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if o.FirstComeFirstServed {
		return nil
	}
	return func(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := New(name, rateLimiter, func(r reconcile.Request) string { return r.Namespace },
			Bounds{InFlight: o.MaxPerNamespace, Rate: o.NamespaceRate})
		if o.Parked != nil {
			q.parked = o.Parked.WithLabelValues(name)
		}
		if o.Paced != nil {
			q.paced = o.Paced.WithLabelValues(name)
		}
		return q
	}
}

// AddWithOpts adds items at the priority o gives (0 when unset; an item already waiting keeps the
// higher of its two), after o.After or, with o.RateLimited, after the rate limiter's delay.
func (q *Queue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	priority := 0
	if o.Priority != nil {
		priority = *o.Priority
	}
	for _, item := range items {
		q.want(item, priority)
		switch {
		case o.RateLimited:
			q.TypedRateLimitingInterface.AddRateLimited(item)
		case o.After > 0:
			q.TypedRateLimitingInterface.AddAfter(item, o.After)
		default:
			q.TypedRateLimitingInterface.Add(item)
		}
	}
}

// Add adds item at priority 0.
func (q *Queue[T]) Add(item T) { q.AddWithOpts(priorityqueue.AddOpts{}, item) }

// AddAfter adds item at priority 0 once d has passed.
func (q *Queue[T]) AddAfter(item T, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, item)
}

// AddRateLimited adds item at priority 0 after the rate limiter's delay.
func (q *Queue[T]) AddRateLimited(item T) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

// GetWithPriority hands out the next item whose tenant is within its pace and has a place, and
// the priority it waited at; items of tenants ahead of their pace are held on the way (paces),
// and those of tenants at their bound in flight are parked (shares).
func (q *Queue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	for {
		item, shutdown = q.TypedRateLimitingInterface.Get()
		if shutdown {
			return item, 0, true
		}
		priority = q.order.priorityOf(item)
		if wait := q.paces.take(item, q.clock.Now()); wait > 0 {
			q.hold(item, priority, wait)
			continue
		}
		if q.shares.take(item, priority) {
			return item, priority, false
		}
		q.paces.paidFor(item) // its pass did not begin: the next hand-out is the one it paid for
		q.countParked(1)
	}
}

// Get hands out the next item.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	item, _, shutdown = q.GetWithPriority()
	return item, shutdown
}

// Done ends item's pass. A parked item of its tenant takes the place it frees: it leaves the
// processing set (and is queued again at once if it changed while parked) and goes back into
// the order at the priority it was handed out at.
func (q *Queue[T]) Done(item T) {
	next, released := q.shares.finish(item)
	q.TypedRateLimitingInterface.Done(item)
	if released {
		q.letGo(next)
	}
}

// ShutDown lets every parked item go first, so that none is left in processing (a drain would
// wait for it forever) and items still waiting are handed out unbounded.
func (q *Queue[T]) ShutDown() {
	q.releaseParked()
	q.TypedRateLimitingInterface.ShutDown()
}

// ShutDownWithDrain is ShutDown that waits for the items in flight.
func (q *Queue[T]) ShutDownWithDrain() {
	q.releaseParked()
	q.TypedRateLimitingInterface.ShutDownWithDrain()
}

// Parked is the number of items waiting for a place because their tenant is at its bound.
func (q *Queue[T]) Parked() int { return q.shares.parkedCount() }

// Paced is the number of items held for their tenant's pace.
func (q *Queue[T]) Paced() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.held)
}

// releaseParked lets every parked and held item go and ends both bounds.
func (q *Queue[T]) releaseParked() {
	q.paces.release()
	q.mu.Lock()
	q.closed = true
	held := q.held
	q.held = map[T]heldItem{}
	q.mu.Unlock()
	for item, h := range held {
		h.timer.Stop() // its func, if it runs now, finds the item gone and does nothing
		q.countPaced(-1)
		q.requeue(item, h.priority)
	}
	for _, p := range q.shares.release() {
		q.letGo(p)
	}
}

// hold keeps item (in the processing set) until its tenant's pace lets its pass begin.
func (q *Queue[T]) hold(item T, priority int, wait time.Duration) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		q.requeue(item, priority)
		return
	}
	q.held[item] = heldItem{q.clock.AfterFunc(wait, func() { q.unhold(item) }), priority}
	q.mu.Unlock()
	q.countPaced(1)
}

// unhold queues a held item again at its time.
func (q *Queue[T]) unhold(item T) {
	q.mu.Lock()
	h, ok := q.held[item]
	delete(q.held, item)
	q.mu.Unlock()
	if ok {
		q.countPaced(-1)
		q.requeue(item, h.priority)
	}
}

// letGo takes a parked item out of the processing set and queues it again.
func (q *Queue[T]) letGo(p parkedItem[T]) {
	q.countParked(-1)
	q.requeue(p.item, p.priority)
}

// requeue takes an item that was handed out but not passed on out of the processing set, and
// queues it again (at once if it changed meanwhile) at priority.
func (q *Queue[T]) requeue(item T, priority int) {
	q.want(item, priority)
	q.TypedRateLimitingInterface.Done(item)
	q.TypedRateLimitingInterface.Add(item)
}

func (q *Queue[T]) countParked(delta float64) {
	if q.parked != nil {
		q.parked.Add(delta)
	}
}

func (q *Queue[T]) countPaced(delta float64) {
	if q.paced != nil {
		q.paced.Add(delta)
	}
}

// want records that item is asked for at priority, before the work queue pushes or touches it.
func (q *Queue[T]) want(item T, priority int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if have, ok := q.wanted[item]; !ok || priority > have {
		q.wanted[item] = priority
	}
}

// takeWanted is the priority asked for item since it was last pushed, which it forgets.
func (q *Queue[T]) takeWanted(item T) (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.wanted[item]
	delete(q.wanted, item)
	return p, ok
}

var _ priorityqueue.PriorityQueue[reconcile.Request] = &Queue[reconcile.Request]{}
