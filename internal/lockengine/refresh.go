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

package lockengine

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The refresh lane moves held claims' status.expireTime forward on a work queue of its own.
//
// A held claim must be rewritten before its status.expireTime passes (refreshDue), and with one
// queue for everything that rewrite waited in line behind every lock's events: under churn at
// 1,000 locks the lock queue was a minute long (each lock a pass every ~60 s at ~16 passes a
// second, bounded by the API server), and the scale benchmark found hundreds of Held claims a
// minute past their expireTime although their holds were renewed all along. Raising the priority
// of refresh timers in that queue does not work: the queue merges an event into a waiting timer
// and keeps the higher priority, so every event of a held lock would jump the line and locks
// waiting for their first grant starve (priority.go). So refreshes have their own queue,
// ordered by when each falls due, and their own workers; a refresh pass only rewrites the
// expireTime of claims the lock record and the Renewer both say hold, and leaves everything else
// to the lock's next pass. Both kinds of pass of one lock take its passLocks mutex; a refresh
// pass never waits for it, and looks again shortly when the lock's pass has it.

// refreshLane runs refresh passes on the leader, each when its lock's next refresh falls due.
type refreshLane struct {
	pass    func(context.Context, types.NamespacedName) time.Duration
	queue   workqueue.TypedDelayingInterface[types.NamespacedName]
	workers int
}

// newRefreshLane returns a lane of workers refresh passes. It is given as many workers as the lock
// queue: a refresh pass is mostly one claim status patch, 1,000 held claims at a 10 s lease need
// 120 a second, and on a loaded API server a patch takes 50 to 150 ms (with 8 workers the scale
// benchmark's lane fell 8 s behind in its steady window).
func newRefreshLane(pass func(context.Context, types.NamespacedName) time.Duration, workers int) *refreshLane {
	return &refreshLane{
		pass:    pass,
		workers: workers,
		// Named, so that controller-runtime's workqueue metrics (depth, latency, work duration)
		// show how far refreshes lag.
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.NamespacedName]{
			Name: "distributedlock_refresh",
		}),
	}
}

// schedule asks for a refresh pass of lock after the given time; a pass already asked for
// earlier stays.
func (l *refreshLane) schedule(lock types.NamespacedName, after time.Duration) {
	l.queue.AddAfter(lock, after)
}

// NeedLeaderElection makes the lane run only on the leader, like the reconcilers.
func (l *refreshLane) NeedLeaderElection() bool { return true }

// Start runs the workers until ctx ends.
func (l *refreshLane) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range l.workers {
		wg.Go(func() {
			for l.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	l.queue.ShutDown()
	wg.Wait()
	return nil
}

// next runs one refresh pass and schedules the lock's next one; false once the lane stops.
func (l *refreshLane) next(ctx context.Context) bool {
	lock, shutdown := l.queue.Get()
	if shutdown {
		return false
	}
	defer l.queue.Done(lock)
	if after := l.pass(ctx, lock); after > 0 {
		l.queue.AddAfter(lock, after)
	}
	return true
}

// refreshRetry is how soon a refresh pass that could not read what it needs looks again.
const refreshRetry = time.Second

// refreshBusyRetry is how soon a refresh of a lock whose pass was running looks again. Trying
// costs nothing but the queue: no cache read, no request.
const refreshBusyRetry = 200 * time.Millisecond

// refreshPass rewrites the status.expireTime of the lock's held claims that are due, from the
// Renewer's latest confirmation, and says when the lock's next refresh falls due: 0 when it holds
// nothing the lane can refresh now, for the lock's next pass to take up (a hold not resumed yet,
// a cache behind this process's own write, an unusable backend, a lock that is gone).
func (r *Reconciler) refreshPass(ctx context.Context, name types.NamespacedName) time.Duration {
	unlock, ok := r.memory.passes.tryLock(name)
	if !ok {
		return refreshBusyRetry
	}
	defer unlock()
	log := ctrl.LoggerFrom(ctx).WithValues("DistributedLock", name)
	s, err := r.loadHolders(ctx, name)
	switch {
	case err != nil:
		log.V(1).Info("Refresh pass could not read the lock", "error", err.Error())
		return refreshRetry
	case s == nil:
		return 0
	}
	_, _ = r.refreshHolds(ctx, s) // never fails
	// writeClaim writes only the claims refreshHolds changed.
	if err := inParallel(s.holders, claimWriters, func(c *locksv1alpha1.LockClaim) error { return r.writeClaim(ctx, s, c) }); err != nil {
		if !apierrors.IsConflict(err) {
			log.Error(err, "Refresh pass could not write a claim")
		}
		// A conflict: the claim changed since the cache showed it; the lane looks again soon,
		// from the cache that the change brings.
		return refreshRetry
	}
	return wait.Jitter(r.nextRefresh(s), 0.1)
}

// loadHolders reads, from the cache, what a refresh pass needs: the lock, its backend and key,
// and the claims its record names that say they hold. It returns nil when the lane has nothing to
// do now.
func (r *Reconciler) loadHolders(ctx context.Context, name types.NamespacedName) (*lockScope, error) {
	s, err := r.readLock(ctx, name)
	switch {
	case err != nil:
		return nil, err
	case s == nil || s.lock == nil || len(s.lock.Status.Holders) == 0:
		// Gone, nothing held, or a cache behind this process's own write (the watch event that
		// catches it up starts the lock's pass).
		return nil, nil
	}
	switch unusable, err := r.readBackend(ctx, s); {
	case err != nil:
		return nil, err
	case unusable != nil:
		// The backend cannot be used now: its holds' renewals fail too, so nothing can be
		// refreshed; the lane looks again, and the lock's pass reports the backend.
		return nil, unusable
	}
	fresh, err := r.readClaims(ctx, s, func(read *locksv1alpha1.LockClaim) error {
		if isHeld(read) && recordIndex(s.lock.Status.Holders, read) >= 0 {
			s.holders = append(s.holders, read.DeepCopy())
		}
		return nil
	})
	if !fresh || err != nil {
		// A grant this process wrote may not show yet: the lock's pass that catching up starts
		// schedules the lane again.
		return nil, err
	}
	return s, r.loadPartLocks(ctx, s, s.holders)
}

// nextRefresh is how long until the next refresh of the pass's held claims falls due, among
// those with a hold the Renewer tracks (0: none). A hold it does not track yet is resumed by the
// lock's pass, which then schedules the lane.
func (r *Reconciler) nextRefresh(s *lockScope) time.Duration {
	var wait time.Duration
	for _, c := range s.holders {
		parts, earliest := s.heldParts(c)
		if earliest == nil || !slices.ContainsFunc(parts, func(p heldPart) bool {
			h, tracked := r.Renewer.Lookup(p.key)
			return tracked && !h.Lost
		}) {
			continue
		}
		wait = soonest(wait, refreshWait(*earliest, s.use.ttl, s.now))
	}
	return wait
}
