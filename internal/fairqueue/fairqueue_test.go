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

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func newQueue(t *testing.T) *Queue[reconcile.Request] {
	q := ByNamespace("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*Queue[reconcile.Request])
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
// leave a lock unserved).
func TestNoAddIsLost(t *testing.T) {
	q := newQueue(t)
	const items = 200
	var clock atomic.Int64
	var lastAdd, lastGet [items]atomic.Int64
	key := func(i int) reconcile.Request { return req(fmt.Sprintf("ns-%d", i%7), fmt.Sprintf("lock-%d", i)) }
	index := map[reconcile.Request]int{}
	for i := range items {
		index[key(i)] = i
	}

	var workers sync.WaitGroup
	for range 4 {
		workers.Go(func() {
			for {
				r, _, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				lastGet[index[r]].Store(clock.Add(1))
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
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
			t.Fatalf("%d items added and never handed out afterwards (queue length %d)", lost, q.Len())
		}
		time.Sleep(10 * time.Millisecond)
	}
	q.ShutDown()
	workers.Wait()
}
