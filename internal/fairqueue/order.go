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
	"slices"
	"sync"
)

// order is the order in which a queue hands out its waiting items (client-go's workqueue.Queue:
// the work queue keeps its own dirty and processing sets and asks order only what comes next).
// Items of a higher priority come first; within one priority the tenants (by keyOf) take turns,
// one item each, and each tenant's items come in the order they were pushed.
type order[T comparable] struct {
	keyOf func(T) string
	// wanted gives the priority an item is pushed with (and, on a touch, may be raised to); it
	// forgets it once read. Unset means 0.
	wanted func(T) (int, bool)

	mu     sync.Mutex
	levels map[int]*level[T]
	// priorities are the priorities that have a level, highest first.
	priorities []int
	// at is the priority of each waiting item.
	at map[T]int
	// given is the priority of each item handed out, until it is asked for (priorityOf).
	given map[T]int
}

// level is the waiting items of one priority: a FIFO per tenant, and the tenants with items in
// the order of their turns.
type level[T comparable] struct {
	fifos map[string][]T
	turns []string
}

func newOrder[T comparable](keyOf func(T) string, wanted func(T) (int, bool)) *order[T] {
	return &order[T]{keyOf: keyOf, wanted: wanted, levels: map[int]*level[T]{}, at: map[T]int{}, given: map[T]int{}}
}

// Push adds an item that is not waiting.
func (o *order[T]) Push(item T) {
	priority, _ := o.wanted(item)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.push(item, priority)
}

// Touch is called when a waiting item is added again: it moves to a higher priority if one is
// wanted now, keeping its place otherwise (the work queue keeps an item waiting once).
func (o *order[T]) Touch(item T) {
	priority, ok := o.wanted(item)
	o.mu.Lock()
	defer o.mu.Unlock()
	current, waiting := o.at[item]
	if !ok || !waiting || priority <= current {
		return
	}
	o.remove(item, current)
	o.push(item, priority)
}

// Len is the number of waiting items.
func (o *order[T]) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.at)
}

// Pop hands out the next item: from the highest priority, the tenant whose turn it is. The work
// queue calls it only when Len is not 0.
func (o *order[T]) Pop() T {
	o.mu.Lock()
	defer o.mu.Unlock()
	priority := o.priorities[0]
	l := o.levels[priority]
	tenant := l.turns[0]
	fifo := l.fifos[tenant]
	item := fifo[0]
	var zero T
	fifo[0] = zero // let the item go once it is out
	l.turns = l.turns[1:]
	if fifo = fifo[1:]; len(fifo) > 0 {
		l.fifos[tenant] = fifo
		l.turns = append(l.turns, tenant) // its next item waits for the others' turns
	} else {
		delete(l.fifos, tenant)
	}
	if len(l.turns) == 0 {
		o.dropLevel(priority)
	}
	delete(o.at, item)
	o.given[item] = priority
	return item
}

// priorityOf returns the priority item was handed out with, and forgets it.
func (o *order[T]) priorityOf(item T) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.given[item]
	delete(o.given, item)
	return p
}

func (o *order[T]) push(item T, priority int) {
	l, ok := o.levels[priority]
	if !ok {
		l = &level[T]{fifos: map[string][]T{}}
		o.levels[priority] = l
		i, _ := slices.BinarySearchFunc(o.priorities, priority, func(have, want int) int { return want - have })
		o.priorities = slices.Insert(o.priorities, i, priority)
	}
	tenant := o.keyOf(item)
	if _, waiting := l.fifos[tenant]; !waiting {
		l.turns = append(l.turns, tenant)
	}
	l.fifos[tenant] = append(l.fifos[tenant], item)
	o.at[item] = priority
}

// remove takes a waiting item out of its level (a touch that raises it).
func (o *order[T]) remove(item T, priority int) {
	l := o.levels[priority]
	tenant := o.keyOf(item)
	fifo := slices.DeleteFunc(l.fifos[tenant], func(i T) bool { return i == item })
	if len(fifo) > 0 {
		l.fifos[tenant] = fifo
	} else {
		delete(l.fifos, tenant)
		l.turns = slices.DeleteFunc(l.turns, func(t string) bool { return t == tenant })
		if len(l.turns) == 0 {
			o.dropLevel(priority)
		}
	}
	delete(o.at, item)
}

func (o *order[T]) dropLevel(priority int) {
	delete(o.levels, priority)
	o.priorities = slices.DeleteFunc(o.priorities, func(p int) bool { return p == priority })
}
