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
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/fairqueue"
	"github.com/lockwarden/lockwarden/internal/keyledger"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
	"github.com/lockwarden/lockwarden/internal/metrics"
	"github.com/lockwarden/lockwarden/internal/renewal"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// Reconciler is the one writer of each lock (docs/design.md §3, "One writer per lock"): a work queue
// keyed by DistributedLock, whose pass releases what must go, grants the head of its queue (priority, then arrival),
// writes the lock record (holders, each naming its claim, and fencing tokens, by
// compare-and-swap), then the claims' status. Claims carry no finalizer: a pass that finds a
// recorded holder's claim gone releases it (vanished.go), so a graceful handoff is the client's
// delete and then one pass of two sequential API writes.
type Reconciler struct {
	client.Client
	// Pods reads the cluster's pods: the compact pod cache, never the manager's (podcache).
	Pods Pods
	// Backends finds each lock's backend session.
	Backends *registry.Resolver
	// Renewer renews held locks and reports lost ones.
	Renewer *renewal.Renewer
	// Recorder emits events on claim transitions.
	Recorder events.EventRecorder
	// Metrics records acquisitions, waits, holds and losses.
	Metrics *metrics.Metrics
	// Clock is the controller's clock (injected so that tests can move it).
	Clock clock.Clock
	// MaxConcurrentReconciles bounds how many locks are served at once (default 8; the manager's
	// --claim-workers, 16), and as many refresh passes run besides (refresh.go); one lock is
	// never served by two workers at once.
	MaxConcurrentReconciles int
	// Guard, when set, vetoes leader writes once this process has stalled (leaderguard).
	Guard *leaderguard.Guard
	// Keys records which lock owns each backend key.
	Keys *keyledger.Ledger
	// Workloads are the workload kinds whose objects may hold locks (spec.holder.object); nil
	// for none. Each is watched, and a claim naming any other kind fails.
	Workloads *workloads.Registry
	// WorkloadCache reads workload objects: the manager's cache, since the manager's client
	// reads unstructured objects from the API server itself.
	WorkloadCache client.Reader
	// Tracer, when set, sees the moments of each handoff (trace.go); nil in the manager.
	Tracer Tracer
	// Queue is how the work queue hands out locks: by namespace turns, each namespace within its
	// bound (internal/fairqueue).
	Queue fairqueue.Options

	// wakeups carries locks to serve now: holds the Renewer found lost, and contended keys a
	// backend reported free.
	wakeups chan event.TypedGenericEvent[*locksv1alpha1.DistributedLock]
	// memory is what the engine keeps between passes (memory.go).
	memory *lockMemory
}

// Reconcile serves one lock: it ends holds that must end, grants the head of its queue, writes
// the lock record and then its claims.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	defer r.memory.passes.lock(req.NamespacedName)()
	r.trace(TracePassStart, req.NamespacedName, "")
	s, err := r.load(ctx, req.NamespacedName)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case s == nil:
		// The cache lags this process's own write: its watch event starts the next pass.
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	case s.lock == nil:
		return ctrl.Result{}, r.reconcileOrphans(ctx, s)
	}
	// Every way out of the pass either records the backend holds it took (writeLock) or gives
	// them back here: a step that fails after an acquire must not leave a key on the backend
	// that no lock record names until its TTL runs out.
	defer func() { err = errors.Join(err, r.giveBack(ctx, s)) }()
	// A joint grant's other locks: their keys no record names go back too, and their passes go.
	defer func() { err = errors.Join(err, r.endJoint(ctx, s)) }()
	if s.lock.DeletionTimestamp.IsZero() && controllerutil.AddFinalizer(s.lock, locksv1alpha1.Finalizer) {
		if err := r.Update(ctx, s.lock); err != nil {
			return ctrl.Result{}, err
		}
		r.memory.written.note(s.lock)
		s.readLock = s.lock.DeepCopy()
	}
	steps := []lockStep{
		r.settleParts, r.endHolds, r.writeEndedHolds, // holds: what goes on, what ends
		r.queueClaims, r.serveJoint, r.serveQueue, // waiters: who waits, who is granted
		r.refreshHolds, r.decideLowPriority, // which status changes are due
		r.writeLock, r.writeJoint, r.writeClaims, r.shedFinalizers, r.finishDeletes, // writes: the record first
	}
	res := after(readWake(s))
	for _, step := range steps {
		out, err := step(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		res = res.merge(out)
	}
	seams.passDone(ctx, s)
	// The holders' next refreshes, this pass's grants included, are the refresh lane's.
	if due := r.nextRefresh(s); due > 0 {
		r.memory.refresh.schedule(req.NamespacedName, wait.Jitter(due, 0.1))
	}
	if res.retry != nil {
		return ctrl.Result{}, res.retry
	}
	return ctrl.Result{RequeueAfter: wait.Jitter(res.after, 0.1), Priority: ptr.To(timerPriority)}, nil
}

// staleRetry is how soon a pass that found the cache behind its own write looks again, should
// the watch event that catches it up not come (ownWrites.caughtUp normally starts that pass).
const staleRetry = 200 * time.Millisecond

// maxRetryDelay caps how long a lock whose pass failed waits before the next try. The default
// cap (1000 s) is far too long here: a head of the queue whose backend was down for ten seconds
// would otherwise sleep for most of a minute after the backend came back, with the lock free and
// nothing else to wake it (the reliability harness measured 51 s after a PostgreSQL restart). It
// is also the Contended retry, so that a failing backend costs no more calls than a held one.
const maxRetryDelay = 5 * time.Second

// passRateLimiter is controller-runtime's default rate limiter (per-lock exponential backoff
// from 5 ms, and 10 retries a second overall with bursts of 100) with the per-lock backoff
// capped at maxRetryDelay.
func passRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// wake queues a pass of lock.
func (r *Reconciler) wake(lock types.NamespacedName) {
	r.wakeups <- event.TypedGenericEvent[*locksv1alpha1.DistributedLock]{Object: &locksv1alpha1.DistributedLock{
		ObjectMeta: ctrlObjectMeta(lock)}}
}

// NotifyLost queues a pass of the lock of a claim whose hold was lost. It is the Renewer's
// callback.
func (r *Reconciler) NotifyLost(claim types.NamespacedName) {
	c := &locksv1alpha1.LockClaim{}
	if err := r.Get(context.Background(), claim, c); err == nil {
		// A several-lock claim's loss ends its hold of every lock: each lock's pass releases its
		// part once the claim says Lost (several.go).
		for _, lock := range claimLocks(c) {
			r.wake(types.NamespacedName{Namespace: c.Namespace, Name: lock})
		}
		return
	}
	// Gone, but its lock's record may still name it (a claim deleted with its pod's foreground
	// deletion holds until the pod is gone).
	for _, req := range r.locksRecording(context.Background(), claim.Namespace, claimRecordKey(claim.Name)) {
		r.wake(req.NamespacedName)
	}
}

// SetupWithManager wires the lock's watches: the lock itself, its claims (a new claim, a
// deletion, a phase change), their pods (a dead holder is released at once), the Nodes of those
// pods (a change of Ready, for locks that set holderNodeLossSeconds), heartbeat Leases and the
// listed workload kinds (a holder object that finishes), its backend, and the Renewer's and
// backends' news.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.prepare()
	if err := mgr.Add(r.memory.refresh); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&locksv1alpha1.DistributedLock{}, builder.WithPredicates(lockChangedForPass(r.memory.written))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &locksv1alpha1.DistributedLock{}, holdsFirst())).
		Watches(&locksv1alpha1.LockClaim{}, handler.EnqueueRequestsFromMapFunc(r.lockOfClaim),
			builder.WithPredicates(claimChangedForLock(r.memory.written))).
		WatchesRawSource(&source.Informer{Informer: r.Pods.Informer(), Handler: handler.EnqueueRequestsFromMapFunc(r.locksOfPod)}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.locksOfNode), builder.WithPredicates(nodeReadyChanged())).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.locksOfLease)).
		Watches(&locksv1alpha1.LockBackend{}, handler.EnqueueRequestsFromMapFunc(r.locksOfBackend)).
		WatchesRawSource(source.Channel(r.wakeups, &handler.TypedEnqueueRequestForObject[*locksv1alpha1.DistributedLock]{}))
	return r.watchWorkloads(b).
		// Namespaces take turns for the workers (fairqueue): one namespace's churn does not starve
		// another's grants.
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles, RateLimiter: passRateLimiter(),
			NewQueue: r.Queue.NewQueue()}).
		Named("distributedlock").
		Complete(r)
}

// prepare sets the defaults and makes the in-process stores that passes share. SetupWithManager
// calls it; so do the step tests, which run passes without a manager.
func (r *Reconciler) prepare() {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 8
	}
	r.wakeups = make(chan event.TypedGenericEvent[*locksv1alpha1.DistributedLock], 1024)
	r.memory = newLockMemory(r.wake, newRefreshLane(r.refreshPass, r.MaxConcurrentReconciles))
	r.Keys.OnRelease(r.wake)
}
