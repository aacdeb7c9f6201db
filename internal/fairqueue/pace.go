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
	"math"
	"sync"
	"time"
)

// paces bounds how many passes of one tenant begin per second. A bound on passes in flight
// (shares) keeps a busy tenant from taking every worker, but one pass after another it still
// sends the shared API server as many writes as that server answers, and every other tenant's
// writes are answered at the pace of a saturated server. A pace holds the busy tenant's load,
// and the load of its clients that follow its grants, below that.
//
// Each tenant has a bucket of burst passes that refills at rate a second (kept as the time at
// which the bucket is next empty, so that a full bucket is no state at all). An item handed out
// when its tenant's bucket is empty books the next pass and is held until then: out of the
// order, and in the work queue's processing set, so that its events mark it dirty instead of
// queueing it twice; a timer lets it go at its time, and the pass it booked is paid.
type paces[T comparable] struct {
	keyOf func(T) string
	// interval is the time one pass refills (1/rate); 0 means no bound.
	interval time.Duration
	// tolerance is how far ahead of now a tenant's next free time may be and its pass still
	// begin at once: (burst-1) intervals.
	tolerance time.Duration

	mu sync.Mutex
	// due is each tenant's theoretical time of its next pass: a tenant whose due time has
	// passed has a full bucket and is forgotten.
	due map[string]time.Time
	// paid are the items that booked a pass and were held, or were parked after paying for
	// one: their next hand-out begins at once.
	paid map[T]bool
	// takes counts hand-outs, to forget tenants with full buckets now and then.
	takes int
	// open ends the bound: after a shutdown nothing is held.
	open bool
}

// newPaces bounds each tenant to rate passes a second with bursts of burst; rate 0 sets no
// bound, and burst is at least 1.
func newPaces[T comparable](keyOf func(T) string, rate float64, burst int) *paces[T] {
	p := &paces[T]{keyOf: keyOf, due: map[string]time.Time{}, paid: map[T]bool{}}
	if rate > 0 {
		p.interval = time.Duration(math.Round(float64(time.Second) / rate))
		p.tolerance = time.Duration(max(burst, 1)-1) * p.interval
	}
	return p
}

// take is asked when the work queue hands item out at now: 0 if its pass may begin, else how
// long it is held for the pass it has now booked.
func (p *paces[T]) take(item T, now time.Time) time.Duration {
	if p.interval <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paid[item] || p.open {
		delete(p.paid, item)
		return 0
	}
	tenant := p.keyOf(item)
	due, wait := nextPass(p.due[tenant], now, p.interval, p.tolerance)
	p.due[tenant] = due
	if wait > 0 {
		p.paid[item] = true
	}
	if p.takes++; p.takes%1024 == 0 {
		p.forgetFull(now)
	}
	return wait
}

// nextPass books one pass of a tenant whose next pass was due at due (zero: a full bucket) at
// now: the tenant's new due time, and how long the pass waits for its turn (0: at once). A
// generic cell rate algorithm: a pass may begin while due is at most tolerance ahead of now.
func nextPass(due, now time.Time, interval, tolerance time.Duration) (time.Time, time.Duration) {
	if due.Before(now) {
		due = now
	}
	wait := max(due.Sub(now)-tolerance, 0)
	return due.Add(interval), wait
}

// paidFor records that item's pass was paid for although it did not begin (it was parked):
// its next hand-out begins at once.
func (p *paces[T]) paidFor(item T) {
	if p.interval <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paid[item] = true
}

// release ends the bound (the queue shuts down).
func (p *paces[T]) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = true
}

// forgetFull drops the tenants whose buckets are full again.
func (p *paces[T]) forgetFull(now time.Time) {
	for tenant, due := range p.due {
		if !due.After(now) {
			delete(p.due, tenant)
		}
	}
}
