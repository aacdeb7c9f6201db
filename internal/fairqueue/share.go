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

import "sync"

// shares bounds how many items of one tenant are in flight (handed to a worker, not yet done) at
// once. Turns decide whose item comes next; they cannot stop a tenant with a backlog from filling
// every worker while the others have nothing waiting, and then the others' next item waits for a
// worker and, worse, for a shared API server that the full complement of one tenant's passes
// keeps saturated. An item of a tenant at its bound is parked: out of the order, and still in
// the work queue's processing set, so that its events mark it dirty instead of queueing it twice.
// When one of the tenant's passes ends, its oldest parked item goes back into the order with the
// freed place kept for it.
type shares[T comparable] struct {
	keyOf func(T) string
	// max is the bound; 0 means none.
	max int

	mu sync.Mutex
	// running is the tenant of each item in flight that holds a place.
	running map[T]string
	// places is each tenant's places taken: items running and places kept for released items.
	places map[string]int
	// kept are the released items on their way back through the order, each with a place.
	kept map[T]bool
	// parked are each tenant's parked items, oldest first.
	parked map[string][]parkedItem[T]
	// open ends the bound: after a shutdown nothing is parked.
	open bool
}

// parkedItem is an item waiting for a place, with the priority it was handed out at.
type parkedItem[T comparable] struct {
	item     T
	priority int
}

func newShares[T comparable](keyOf func(T) string, maxPerTenant int) *shares[T] {
	return &shares[T]{keyOf: keyOf, max: maxPerTenant, running: map[T]string{}, places: map[string]int{},
		kept: map[T]bool{}, parked: map[string][]parkedItem[T]{}}
}

// take is asked when the work queue hands item out: true if it may run now, false if it is
// parked until its tenant has a place.
func (s *shares[T]) take(item T, priority int) bool {
	if s.max <= 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant := s.keyOf(item)
	if s.kept[item] {
		delete(s.kept, item) // its place was kept when it was released
		s.running[item] = tenant
		return true
	}
	if s.places[tenant] < s.max || s.open {
		s.places[tenant]++
		s.running[item] = tenant
		return true
	}
	s.parked[tenant] = append(s.parked[tenant], parkedItem[T]{item, priority})
	return false
}

// finish is told when item's pass ends. If that frees a place that a parked item of the tenant
// waits for, it returns that item, whose place is now kept: the caller puts it back in the order.
func (s *shares[T]) finish(item T) (parkedItem[T], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, ok := s.running[item]
	if !ok {
		return parkedItem[T]{}, false // not counted: no bound, or taken after a shutdown
	}
	delete(s.running, item)
	waiting := s.parked[tenant]
	if len(waiting) == 0 {
		if s.places[tenant]--; s.places[tenant] == 0 {
			delete(s.places, tenant)
		}
		return parkedItem[T]{}, false
	}
	next := waiting[0]
	if len(waiting) == 1 {
		delete(s.parked, tenant)
	} else {
		s.parked[tenant] = waiting[1:]
	}
	s.kept[next.item] = true // the place passes to it
	return next, true
}

// release ends the bound (the queue shuts down) and returns every parked item, to be let go.
func (s *shares[T]) release() []parkedItem[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = true
	var all []parkedItem[T]
	for tenant, waiting := range s.parked {
		all = append(all, waiting...)
		delete(s.parked, tenant)
	}
	return all
}

// parkedCount is the number of parked items.
func (s *shares[T]) parkedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, waiting := range s.parked {
		n += len(waiting)
	}
	return n
}
