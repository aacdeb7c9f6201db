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

package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/failpoint"
	"github.com/lockwarden/lockwarden/internal/fencing"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
	"github.com/lockwarden/lockwarden/internal/metrics"
	"github.com/lockwarden/lockwarden/internal/mutant"
	"github.com/lockwarden/lockwarden/internal/podliveness"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// LockClaimReconciler grants, keeps and releases locks for LockClaims: DESIGN.md §3.
type LockClaimReconciler struct {
	client.Client
	// APIReader reads the DistributedLock straight from the API server before a token is issued,
	// so that the compare-and-swap starts from the latest resourceVersion.
	APIReader client.Reader
	// Backends finds each lock's backend session.
	Backends *BackendResolver
	// Renewer renews held locks and reports lost ones.
	Renewer *renewal.Renewer
	// Recorder emits events on transitions.
	Recorder events.EventRecorder
	// Metrics records acquisitions, waits, holds and losses.
	Metrics *metrics.Metrics
	// Clock is the controller's clock (injected so that tests can move it).
	Clock clock.Clock
	// MaxConcurrentReconciles bounds parallel reconciles (default 4).
	MaxConcurrentReconciles int
	// Guard, when set, vetoes leader writes once this process has stalled (leaderguard).
	Guard *leaderguard.Guard

	// wakeups carries claims to reconcile now: holds the Renewer found lost, and contended keys
	// a backend reported free.
	wakeups chan event.TypedGenericEvent[*locksv1alpha1.LockClaim]

	// freeWaitersMu guards freeWaiters.
	freeWaitersMu sync.Mutex
	// freeWaiters holds, per contended backend key with a pending backends.FreeWatcher watch,
	// the claims to wake when it fires. One watch per key is pending at a time.
	freeWaiters map[backendKey]map[types.NamespacedName]struct{}
}

// backendKey names a key on one backend.
type backendKey struct{ backend, key string }

// claimScope carries what one reconcile pass of a claim has read.
type claimScope struct {
	// claim is the claim under reconcile; its status is patched once when the pass ends.
	claim *locksv1alpha1.LockClaim
	// lock is the DistributedLock the claim names; nil when it does not exist.
	lock *locksv1alpha1.DistributedLock
	// backend is the lock's backend session; nil when it cannot be used now.
	backend backends.Backend
	// unusable says why the backend cannot be used now; nil when it can.
	unusable *UnusableError
	// hold names the hold on the backend: backend name, key and holder identity.
	hold renewal.HoldKey
	// ttl is the lock's lease duration.
	ttl time.Duration
	// siblings are all claims of the same lock, this one included, from the cache.
	siblings []locksv1alpha1.LockClaim
	// now is the time of this pass.
	now time.Time
	// done ends the pass after the current step.
	done bool
}

// NotifyLost queues a reconcile of a claim whose hold was lost. It is the Renewer's callback.
func (r *LockClaimReconciler) NotifyLost(claim types.NamespacedName) { r.wake(claim) }

// wake queues a reconcile of claim.
func (r *LockClaimReconciler) wake(claim types.NamespacedName) {
	r.wakeups <- event.TypedGenericEvent[*locksv1alpha1.LockClaim]{Object: &locksv1alpha1.LockClaim{
		ObjectMeta: ctrlObjectMeta(claim)}}
}

// watchFree asks the claim's backend, when it can, to say when the contended key is freed, and
// tells whether it will. The claim is then woken by the backend's news rather than by polling,
// which is the only way to learn soon that a client outside lockwarden let the key go.
func (r *LockClaimReconciler) watchFree(ctx context.Context, s *claimScope) bool {
	w, ok := backends.AsFreeWatcher(s.backend)
	if !ok {
		return false
	}
	k := backendKey{backend: s.hold.Backend, key: s.hold.Key}
	claim := client.ObjectKeyFromObject(s.claim)
	r.freeWaitersMu.Lock()
	waiters, pending := r.freeWaiters[k]
	if !pending {
		waiters = map[types.NamespacedName]struct{}{}
		r.freeWaiters[k] = waiters
	}
	waiters[claim] = struct{}{}
	r.freeWaitersMu.Unlock()
	if pending {
		return true
	}
	if err := w.WatchFree(ctx, s.hold.Key, func() { r.keyFreed(k) }); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Cannot watch the contended key; polling instead", "key", s.hold.Key, "error", err.Error())
		// Claims that joined meanwhile rely on this watch: wake them to set their own.
		for _, other := range r.takeFreeWaiters(k) {
			if other != claim {
				r.wake(other)
			}
		}
		return false
	}
	return true
}

// keyFreed wakes the claims waiting for k. It is the backends.FreeWatcher callback.
func (r *LockClaimReconciler) keyFreed(k backendKey) {
	for _, c := range r.takeFreeWaiters(k) {
		r.wake(c)
	}
}

func (r *LockClaimReconciler) takeFreeWaiters(k backendKey) []types.NamespacedName {
	r.freeWaitersMu.Lock()
	defer r.freeWaitersMu.Unlock()
	waiters := r.freeWaiters[k]
	delete(r.freeWaiters, k)
	out := make([]types.NamespacedName, 0, len(waiters))
	for c := range waiters {
		out = append(out, c)
	}
	return out
}

// Reconcile moves one claim towards holding its lock, keeps the hold, or releases it.
func (r *LockClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	claim := &locksv1alpha1.LockClaim{}
	if err := r.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The finalizer comes first, so that no lock is ever taken for a claim that could vanish
	// without releasing it.
	if claim.DeletionTimestamp.IsZero() && controllerutil.AddFinalizer(claim, locksv1alpha1.Finalizer) {
		if err := r.Update(ctx, claim); err != nil {
			return ctrl.Result{}, err
		}
	}

	s := &claimScope{claim: claim, now: r.Clock.Now()}
	before := claim.DeepCopy()
	defer func() {
		if err := r.writeStatus(ctx, before, claim); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	if !claim.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

type claimStep func(context.Context, *claimScope) (ctrl.Result, error)

func (r *LockClaimReconciler) reconcileNormal(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	if isFinal(s.claim.Status.Phase) {
		return ctrl.Result{}, nil
	}
	for _, step := range []claimStep{r.loadLock, r.loadBackend, r.checkHolder, r.checkLockDeleting, r.requireBackend, r.keepHold, r.acquire} {
		res, err := step(ctx, s)
		if err != nil || s.done {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}

// loadLock reads the claimed lock and its claims. A missing lock leaves the claim waiting for it;
// a lock being deleted fails the claim.
func (r *LockClaimReconciler) loadLock(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	lock := &locksv1alpha1.DistributedLock{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.LockName}, lock)
	switch {
	case apierrors.IsNotFound(err):
		msg := fmt.Sprintf("DistributedLock %s does not exist in namespace %s; create it or fix spec.lockName", c.Spec.LockName, c.Namespace)
		if isHeld(c) {
			// Only possible if someone removed the lock's finalizer by hand: stop renewing and let
			// the backend's TTL free the key.
			r.Renewer.Forget(client.ObjectKeyFromObject(c))
			markEnded(c, locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound, msg, s.now)
		} else {
			markWaiting(c, 0, false, locksv1alpha1.ReasonLockNotFound, msg)
		}
		s.done = true
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	s.lock = lock
	s.ttl = time.Duration(lock.Spec.LeaseDurationSeconds) * time.Second
	s.hold.Key = lock.BackendKey()
	s.siblings, err = claimsOfLock(ctx, r.Client, c.Namespace, c.Spec.LockName)
	return ctrl.Result{}, err
}

// checkHolder works out the holder identity and, for a claim made for a pod, whether that pod
// still lives. A dead holder's lock is released at once.
func (r *LockClaimReconciler) checkHolder(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	identity := string(c.UID)
	if h := c.Spec.Holder; h != nil && h.PodName != "" {
		pod := &corev1.Pod{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: h.PodName}, pod); apierrors.IsNotFound(err) {
			pod = nil
		} else if err != nil {
			return ctrl.Result{}, err
		}
		if pod != nil && c.Status.PodUID == "" {
			c.Status.PodUID = pod.UID
		}
		if verdict := podliveness.Check(pod, h.PodName, c.Status.PodUID); !verdict.Alive {
			return r.holderDead(ctx, s, pod, verdict.Reason)
		}
		identity = string(pod.UID)
	}
	if h := c.Spec.Holder; h != nil && h.Identity != "" {
		identity = h.Identity
	}
	if isHeld(c) {
		identity = c.Status.HolderIdentity // what the backend actually holds
	}
	s.hold.Identity = identity
	return ctrl.Result{}, nil
}

func (r *LockClaimReconciler) holderDead(ctx context.Context, s *claimScope, pod *corev1.Pod, reason string) (ctrl.Result, error) {
	c := s.claim
	s.done = true
	switch {
	case isHeld(c) && mutant.Active(mutant.KeepDeadHolder):
		return ctrl.Result{}, nil
	case isHeld(c):
		s.hold.Identity = c.Status.HolderIdentity
		if err := r.release(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		markEnded(c, locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonHolderTerminated, "Released: "+reason, s.now)
	case pod == nil && c.Status.PodUID == "":
		// The pod may not have been created yet: wait for it (the Pod watch wakes us).
		markWaiting(c, 0, false, locksv1alpha1.ReasonPodNotFound,
			fmt.Sprintf("Pod %s does not exist in namespace %s; the claim waits for it", c.Spec.Holder.PodName, c.Namespace))
	default:
		if err := r.releaseOrphan(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		markEnded(c, locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonHolderTerminated,
			"The holder will never get the lock: "+reason, s.now)
	}
	return ctrl.Result{}, nil
}

// loadBackend resolves the lock's backend session. Whether an unusable backend stops the pass is
// decided later (requireBackend): a dead holder's hold is still released if the backend answers.
func (r *LockClaimReconciler) loadBackend(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	b, name, err := r.Backends.ForLock(ctx, s.lock)
	s.hold.Backend = name
	switch {
	case errors.As(err, &s.unusable):
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	s.backend = b
	return ctrl.Result{}, nil
}

// checkLockDeleting fails the claims of a lock that is being deleted, releasing a hold first.
func (r *LockClaimReconciler) checkLockDeleting(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	if s.lock.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	s.done = true
	if err := r.release(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	markEnded(s.claim, locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound,
		fmt.Sprintf("DistributedLock %s is being deleted", s.lock.Name), s.now)
	return ctrl.Result{}, nil
}

// requireBackend stops a waiting claim whose backend cannot be used (fail closed): the
// LockBackend and DistributedLock watches wake it when that changes. A held claim goes on: the
// Renewer keeps trying until the hold expires.
func (r *LockClaimReconciler) requireBackend(_ context.Context, s *claimScope) (ctrl.Result, error) {
	if s.unusable != nil && !isHeld(s.claim) {
		// Mistakes to fix keep their own reason, so that clients (lockctl) can fail fast on
		// them; everything else is an outage to wait out.
		reason := locksv1alpha1.ReasonBackendUnavailable
		switch s.unusable.Reason {
		case locksv1alpha1.ReasonBackendNotFound, locksv1alpha1.ReasonNamespaceNotAllowed:
			reason = s.unusable.Reason
		}
		markWaiting(s.claim, 0, false, reason, s.unusable.Message)
		s.done = true
	}
	return ctrl.Result{}, nil
}

// keepHold looks after a held claim: it reports a lost hold, resumes a hold the Renewer does not
// know (after a restart or a leader change), and keeps status.expireTime ahead of now.
func (r *LockClaimReconciler) keepHold(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if !isHeld(c) {
		return ctrl.Result{}, nil
	}
	s.done = true
	key := client.ObjectKeyFromObject(c)
	h, tracked := r.Renewer.Lookup(s.hold)
	switch {
	case tracked && h.Lost:
		msg := "The backend no longer holds the lock for this holder"
		if h.LastError != nil {
			msg = fmt.Sprintf("The lock expired without a successful renewal: %v", h.LastError)
		}
		return ctrl.Result{}, r.lose(ctx, s, msg)
	case !tracked:
		// After a restart or a leader change. The backend, not status.expireTime, says whether
		// the hold lives: status.expireTime is refreshed only once it comes within a third of
		// the lease, so it can lag the backend's expiry by that much, and a failover can take
		// longer than what it had left.
		expire := c.Status.ExpireTime
		if s.backend == nil {
			if expire == nil || !s.now.Before(expire.Time) {
				return ctrl.Result{}, r.lose(ctx, s, "The lock expired while no controller could renew it (its backend is unusable)")
			}
			// Cannot resume now; try again, and give up when the hold expires.
			return ctrl.Result{RequeueAfter: jitter(min(expire.Sub(s.now), 5*time.Second))}, nil
		}
		// Resume only a hold the backend still has for us, and that no grant has replaced since
		// (the lock's holder record still carries our token): re-acquiring a key that was lost
		// and is free again would hide that the lock was not held all along.
		current, err := s.backend.Inspect(ctx, s.hold.Key)
		switch {
		case errors.Is(err, backends.ErrNotHeld):
			return ctrl.Result{}, r.lose(ctx, s, "The lock expired while no controller renewed it: the backend no longer holds it for this holder")
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("resuming hold of %s: %w", s.hold.Key, err)
		case current.Identity != s.hold.Identity:
			return ctrl.Result{}, r.lose(ctx, s, fmt.Sprintf("Another holder (%s) took the lock", current.Identity))
		case s.lock.Status.Holder == nil || s.lock.Status.Holder.FencingToken != c.Status.FencingToken:
			return ctrl.Result{}, r.lose(ctx, s, "The lock was granted again since this claim's grant")
		}
		if err := checkGuard(r.Guard); err != nil {
			return ctrl.Result{}, err
		}
		lease, err := s.backend.TryAcquire(ctx, s.hold.Key, s.hold.Identity, s.ttl)
		switch {
		case errors.Is(err, backends.ErrLocked):
			return ctrl.Result{}, r.lose(ctx, s, fmt.Sprintf("Another holder took the lock: %v", err))
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("resuming hold of %s: %w", s.hold.Key, err)
		}
		ctrl.LoggerFrom(ctx).Info("Resumed hold", "key", s.hold.Key, "fencingToken", c.Status.FencingToken)
		r.Renewer.Track(s.hold.Backend, lease, key)
		h = renewal.Hold{Lease: lease, RenewTime: s.now}
	default:
		r.Renewer.Track(s.hold.Backend, h.Lease, key) // idempotent; records this claim as a sharer
	}

	// status.expireTime must stay in the future while held, with as few writes as possible: update
	// it once it is within a third of the TTL, from the Renewer's latest confirmation.
	if c.Status.ExpireTime == nil || c.Status.ExpireTime.Sub(s.now) <= s.ttl/3 {
		markRenewed(c, h.RenewTime, h.Lease.ExpireTime)
		if err := r.updateLockHolder(ctx, s, func(holder *locksv1alpha1.LockHolder) {
			holder.ExpireTime = c.Status.ExpireTime
		}); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: jitter(max(c.Status.ExpireTime.Sub(s.now)-s.ttl/3, time.Second))}, nil
}

// acquire queues a waiting claim, or, at the head of the queue, takes the lock and issues a token.
func (r *LockClaimReconciler) acquire(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	s.done = true
	key := client.ObjectKeyFromObject(c)

	// Reentrancy: a claim with the identity of the current holder shares the hold and its token.
	if holder := s.lock.Status.Holder; holder != nil && holder.Identity == s.hold.Identity {
		if h, ok := r.Renewer.Lookup(s.hold); ok && !h.Lost {
			r.Renewer.Track(s.hold.Backend, h.Lease, key)
			if holder.Claim == c.Name {
				// Our own grant, whose status the cache has not shown us yet.
				markHeld(c, h.Lease, holder.FencingToken, holder.AcquireTime.Time)
			} else {
				r.granted(ctx, s, h.Lease, holder.FencingToken)
			}
			return r.keepHoldRequeue(s), nil
		}
	}

	place := placeInQueue(s.siblings, c, s.hold.Identity)
	deadline, hasDeadline := waitDeadline(c)
	if place.holder != nil || place.position > 1 {
		msg := fmt.Sprintf("Waiting behind %d claim(s)", place.position-1)
		if place.holder != nil {
			msg = fmt.Sprintf("Held by claim %s; position %d in the queue", place.holder.Name, place.position)
		}
		markWaiting(c, place.position, true, locksv1alpha1.ReasonQueued, msg)
		return r.waitOrTimeOut(s, deadline, hasDeadline, 0)
	}

	if err := checkGuard(r.Guard); err != nil {
		return ctrl.Result{}, err
	}
	lease, err := s.backend.TryAcquire(ctx, s.hold.Key, s.hold.Identity, s.ttl)
	if errors.Is(err, backends.ErrLocked) && mutant.Active(mutant.GrantUnacquired) {
		lease = backends.Lease{Key: s.hold.Key, Identity: s.hold.Identity, TTL: s.ttl, AcquireTime: s.now, ExpireTime: s.now.Add(s.ttl)}
		err = nil
	}
	var locked *backends.LockedError
	switch {
	case errors.As(err, &locked) || errors.Is(err, backends.ErrLocked):
		msg := "The key is held on the backend by a client outside this queue"
		retry := maxRetryDelay
		if r.watchFree(ctx, s) {
			retry = freeWatchFallback
		}
		if locked != nil {
			msg = fmt.Sprintf("The key is held on the backend by %s", locked.Holder)
			if !locked.ExpireTime.IsZero() {
				msg += " until " + locked.ExpireTime.UTC().Format(time.RFC3339)
				retry = max(locked.ExpireTime.Sub(s.now), 100*time.Millisecond)
			}
		}
		markWaiting(c, place.position, true, locksv1alpha1.ReasonContended, msg)
		return r.waitOrTimeOut(s, deadline, hasDeadline, retry)
	case err != nil:
		markWaiting(c, place.position, false, locksv1alpha1.ReasonBackendUnavailable, fmt.Sprintf("Backend %s: %v", s.hold.Backend, err))
		return ctrl.Result{}, fmt.Errorf("acquiring %s: %w", s.hold.Key, err)
	}

	token, err := r.issueToken(ctx, s, lease)
	if err != nil {
		// No token, no grant: give the backend hold back so that nothing is held that no claim
		// records, and try again on the next pass. A conflict means another writer (a deposed
		// leader) changed the lock meanwhile.
		if !r.sharedWithOthers(s) {
			if relErr := s.backend.Release(ctx, lease); relErr != nil && !errors.Is(relErr, backends.ErrNotHeld) {
				err = errors.Join(err, relErr)
			}
		}
		return ctrl.Result{}, fmt.Errorf("issuing fencing token for %s: %w", s.lock.Name, err)
	}
	r.Renewer.Track(s.hold.Backend, lease, key)
	r.granted(ctx, s, lease, token)
	return r.keepHoldRequeue(s), nil
}

func (r *LockClaimReconciler) granted(ctx context.Context, s *claimScope, lease backends.Lease, token int64) {
	markHeld(s.claim, lease, token, s.now)
	r.Metrics.WaitSeconds.WithLabelValues(s.hold.Backend).Observe(s.now.Sub(s.claim.CreationTimestamp.Time).Seconds())
	ctrl.LoggerFrom(ctx).Info("Lock granted", "lock", klog.KObj(s.lock), "fencingToken", token, "identity", lease.Identity)
}

func (r *LockClaimReconciler) keepHoldRequeue(s *claimScope) ctrl.Result {
	return ctrl.Result{RequeueAfter: jitter(max(s.ttl-s.ttl/3, time.Second))}
}

// waitOrTimeOut ends a waiting pass: it times the claim out when its wait is over (at once for
// waitTimeoutSeconds: 0), else requeues at the deadline or after retry, whichever is sooner. A
// zero retry means the claim waits for a watch event.
func (r *LockClaimReconciler) waitOrTimeOut(s *claimScope, deadline time.Time, hasDeadline bool, retry time.Duration) (ctrl.Result, error) {
	if hasDeadline && !s.now.Before(deadline) {
		markEnded(s.claim, locksv1alpha1.ClaimTimedOut, locksv1alpha1.ReasonWaitTimedOut,
			fmt.Sprintf("Gave up after waitTimeoutSeconds=%d", *s.claim.Spec.WaitTimeoutSeconds), s.now)
		return ctrl.Result{}, nil
	}
	wait := retry
	if hasDeadline && (wait == 0 || deadline.Sub(s.now) < wait) {
		wait = deadline.Sub(s.now)
	}
	if wait == 0 {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: jitter(wait)}, nil
}

func waitDeadline(c *locksv1alpha1.LockClaim) (time.Time, bool) {
	if c.Spec.WaitTimeoutSeconds == nil {
		return time.Time{}, false
	}
	return c.CreationTimestamp.Add(time.Duration(*c.Spec.WaitTimeoutSeconds) * time.Second), true
}

// issueToken writes the next fencing token and the new holder into the DistributedLock's status
// with a resourceVersion precondition: a compare-and-swap through the API server, so that no two
// grants can ever get the same token. A holder of the same identity (a grant whose claim status
// was not written before a crash, or a reentrant claim) keeps its token.
func (r *LockClaimReconciler) issueToken(ctx context.Context, s *claimScope, lease backends.Lease) (int64, error) {
	// An idle lock's cached copy is usually current. Right after a handoff it is not (the previous
	// holder's release has just rewritten it), so start from a fresh read then. Either way a
	// stale copy only costs a conflict and one retry from a fresh read.
	lock := s.lock.DeepCopy()
	if h := lock.Status.Holder; h != nil && h.Identity != lease.Identity {
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.lock), lock); err != nil {
			return 0, err
		}
	}
	token, err := r.writeToken(ctx, s, lock, lease)
	for attempt := 1; apierrors.IsConflict(err) && attempt < 4; attempt++ {
		fresh := &locksv1alpha1.DistributedLock{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.lock), fresh); err != nil {
			return 0, err
		}
		token, err = r.writeToken(ctx, s, fresh, lease)
	}
	return token, err
}

func (r *LockClaimReconciler) writeToken(ctx context.Context, s *claimScope, lock *locksv1alpha1.DistributedLock, lease backends.Lease) (int64, error) {
	if !lock.DeletionTimestamp.IsZero() {
		return 0, fmt.Errorf("DistributedLock %s is being deleted", lock.Name)
	}
	// The token comes from the resourceVersion this write is preconditioned on (package fencing).
	var token int64
	if h := lock.Status.Holder; h != nil && h.Identity == lease.Identity {
		token = h.FencingToken
	} else {
		tokens, err := fencing.Issue(lock.ResourceVersion, lock.Status.FencingToken, 1)
		if err != nil {
			return 0, err
		}
		token = tokens[0]
		switch last := lock.Status.FencingToken; {
		case last > 0 && mutant.Active(mutant.TokenReuse):
			token = last
		case last > fencing.Offset+1 && mutant.Active(mutant.TokenLower):
			token = last - 1
		}
	}
	lock.Status.FencingToken = max(lock.Status.FencingToken, token)
	lock.Status.Holder = &locksv1alpha1.LockHolder{
		Claim:        s.claim.Name,
		Identity:     lease.Identity,
		FencingToken: token,
		AcquireTime:  *micro(s.now),
		ExpireTime:   micro(lease.ExpireTime),
	}
	if err := checkGuard(r.Guard); err != nil {
		return 0, err
	}
	if err := r.Status().Update(ctx, lock); err != nil {
		return 0, err
	}
	s.lock = lock
	return token, nil
}

// lose ends a held claim whose lock is gone.
func (r *LockClaimReconciler) lose(ctx context.Context, s *claimScope, msg string) error {
	c := s.claim
	r.Renewer.Untrack(s.hold, client.ObjectKeyFromObject(c))
	if err := r.clearLockHolder(ctx, s); err != nil {
		return err
	}
	r.Metrics.Losses.WithLabelValues(s.hold.Backend, locksv1alpha1.ReasonRenewFailed).Inc()
	r.observeHold(s)
	markEnded(c, locksv1alpha1.ClaimLost, locksv1alpha1.ReasonRenewFailed, msg, s.now)
	return nil
}

// release gives up this claim's share of its hold; the backend lock is released when no other
// claim of the same identity shares it. Releasing an expired or already free lock is not an
// error, and a lock now held by someone else is left alone.
func (r *LockClaimReconciler) release(ctx context.Context, s *claimScope) error {
	c := s.claim
	if !isHeld(c) {
		return nil
	}
	key := client.ObjectKeyFromObject(c)
	expired := c.Status.ExpireTime == nil || !s.now.Before(c.Status.ExpireTime.Time)
	if !r.sharedWithOthers(s) && s.backend == nil && !expired {
		return fmt.Errorf("cannot release %s until its backend is usable: %s", s.hold.Key, s.unusable.Message)
	}
	if !r.sharedWithOthers(s) && s.backend != nil {
		lease := backends.Lease{Key: s.hold.Key, Identity: s.hold.Identity, TTL: s.ttl}
		if h, ok := r.Renewer.Lookup(s.hold); ok {
			lease = h.Lease
		}
		if err := s.backend.Release(ctx, lease); err != nil && !errors.Is(err, backends.ErrNotHeld) {
			return fmt.Errorf("releasing %s: %w", s.hold.Key, err)
		}
	}
	r.Renewer.Untrack(s.hold, key)
	if err := r.clearLockHolder(ctx, s); err != nil {
		return err
	}
	r.observeHold(s)
	return nil
}

func (r *LockClaimReconciler) observeHold(s *claimScope) {
	if t := s.claim.Status.AcquireTime; t != nil {
		r.Metrics.HoldSeconds.WithLabelValues(s.hold.Backend).Observe(s.now.Sub(t.Time).Seconds())
	}
}

// sharedWithOthers says whether another live claim holds the lock with the same identity.
func (r *LockClaimReconciler) sharedWithOthers(s *claimScope) bool {
	for i := range s.siblings {
		o := &s.siblings[i]
		if o.UID != s.claim.UID && isHeld(o) && o.DeletionTimestamp.IsZero() && o.Status.HolderIdentity == s.hold.Identity {
			return true
		}
	}
	return false
}

// clearLockHolder removes this claim from the DistributedLock's status.holder, handing the entry
// to another claim that shares the hold if there is one.
func (r *LockClaimReconciler) clearLockHolder(ctx context.Context, s *claimScope) error {
	if s.lock == nil {
		return nil
	}
	var heir string
	for i := range s.siblings {
		o := &s.siblings[i]
		if o.UID != s.claim.UID && isHeld(o) && o.DeletionTimestamp.IsZero() && o.Status.HolderIdentity == s.hold.Identity {
			heir = o.Name
			break
		}
	}
	return r.mutateLock(ctx, s, func(lock *locksv1alpha1.DistributedLock) bool {
		h := lock.Status.Holder
		if h == nil || h.Identity != s.hold.Identity {
			return false
		}
		if heir != "" {
			h.Claim = heir
		} else {
			lock.Status.Holder = nil
		}
		return true
	})
}

// updateLockHolder changes the DistributedLock's holder entry if it is this claim's hold.
func (r *LockClaimReconciler) updateLockHolder(ctx context.Context, s *claimScope, change func(*locksv1alpha1.LockHolder)) error {
	return r.mutateLock(ctx, s, func(lock *locksv1alpha1.DistributedLock) bool {
		h := lock.Status.Holder
		if h == nil || h.Identity != s.hold.Identity {
			return false
		}
		before := *h
		change(h)
		return !equality.Semantic.DeepEqual(before, *h)
	})
}

// mutateLock applies change to a fresh copy of the lock's status and writes it with a
// resourceVersion precondition, retrying on conflict.
func (r *LockClaimReconciler) mutateLock(ctx context.Context, s *claimScope, change func(*locksv1alpha1.DistributedLock) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lock := &locksv1alpha1.DistributedLock{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.lock), lock); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !change(lock) {
			return nil
		}
		return r.Status().Update(ctx, lock)
	})
}

// reconcileDelete releases the claim's hold and lets the claim go.
func (r *LockClaimReconciler) reconcileDelete(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if !controllerutil.ContainsFinalizer(c, locksv1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if isHeld(c) {
		if err := r.releaseOnDelete(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		markEnded(c, locksv1alpha1.ClaimReleased, locksv1alpha1.ReasonClaimDeleted, "Released: the claim was deleted", s.now)
		// The claim is about to disappear, so its status patch may never land: emit the event now.
		r.recordTransition(c)
	} else {
		// The claim may have been granted in a pass whose status never landed: give such a hold
		// back.
		if err := r.releaseOrphan(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(c, locksv1alpha1.Finalizer)
	if err := r.Update(ctx, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// releaseOrphan gives back a grant that a waiting claim may have received without its status
// ever saying so: a pass took the backend lock (and perhaps issued a token) and then crashed, or
// its status write failed, before the claim ended or was deleted. Left alone, such a hold would
// be renewed by the Renewer, or kept by the backend session, with no claim to release it, and
// every claim queued behind it would wait for ever. It stops this claim's renewals, and releases
// the backend lock if the claim's identity holds it and no other live claim shares the hold.
func (r *LockClaimReconciler) releaseOrphan(ctx context.Context, s *claimScope) error {
	c := s.claim
	lock := &locksv1alpha1.DistributedLock{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.LockName}, lock); err != nil {
		return client.IgnoreNotFound(err)
	}
	identity := waitingIdentity(c)
	b, name, err := r.Backends.ForLock(ctx, lock)
	hold := renewal.HoldKey{Backend: name, Key: lock.BackendKey(), Identity: identity}
	r.Renewer.Untrack(hold, client.ObjectKeyFromObject(c))
	waiting := c.Status.Phase == locksv1alpha1.ClaimPending || c.Status.Phase == ""
	recorded := lock.Status.Holder != nil && lock.Status.Holder.Claim == c.Name && lock.Status.Holder.Identity == identity
	if err != nil || !(waiting || recorded) {
		// Nothing can have been taken on a backend that cannot be used, and a claim that ended
		// while waiting (its status landed) was granted nothing unless the lock says so.
		return nil
	}
	if _, shared := r.Renewer.Lookup(hold); shared {
		return nil // another claim of this identity holds it and keeps it
	}
	lease, err := b.Inspect(ctx, hold.Key)
	if err != nil || (lease.Identity != identity && !mutant.Active(mutant.ReleaseUnchecked)) {
		return nil // free, someone else's, or unknown: nothing of ours to release
	}
	if h := lock.Status.Holder; h != nil && h.Identity == identity && h.Claim != c.Name {
		return nil // the grant of another claim of the same identity: that claim releases it
	}
	siblings, err := claimsOfLock(ctx, r.Client, c.Namespace, c.Spec.LockName)
	if err != nil {
		return err
	}
	for i := range siblings {
		o := &siblings[i]
		if o.UID != c.UID && isHeld(o) && o.DeletionTimestamp.IsZero() && o.Status.HolderIdentity == identity {
			return nil
		}
	}
	if err := b.Release(ctx, lease); err != nil && !errors.Is(err, backends.ErrNotHeld) {
		return fmt.Errorf("releasing orphaned hold of %s: %w", lease.Key, err)
	}
	ctrl.LoggerFrom(ctx).Info("Released a hold that no claim recorded", "key", lease.Key, "identity", identity)
	s.lock = lock
	return r.mutateLock(ctx, s, func(lock *locksv1alpha1.DistributedLock) bool {
		if h := lock.Status.Holder; h == nil || h.Claim != c.Name || h.Identity != identity {
			return false
		}
		lock.Status.Holder = nil
		return true
	})
}

// waitingIdentity is the identity a waiting claim asks the backend for (see checkHolder), as far
// as the claim itself tells.
func waitingIdentity(c *locksv1alpha1.LockClaim) string {
	switch {
	case c.Status.HolderIdentity != "":
		return c.Status.HolderIdentity
	case c.Spec.Holder != nil && c.Spec.Holder.Identity != "":
		return c.Spec.Holder.Identity
	case c.Status.PodUID != "":
		return string(c.Status.PodUID)
	}
	return string(c.UID)
}

func (r *LockClaimReconciler) releaseOnDelete(ctx context.Context, s *claimScope) error {
	c := s.claim
	lock := &locksv1alpha1.DistributedLock{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.LockName}, lock); err != nil {
		return client.IgnoreNotFound(err) // no lock, nothing to release
	}
	s.lock = lock
	s.ttl = time.Duration(lock.Spec.LeaseDurationSeconds) * time.Second
	s.hold = renewal.HoldKey{Key: lock.BackendKey(), Identity: c.Status.HolderIdentity}
	var err error
	if s.siblings, err = claimsOfLock(ctx, r.Client, c.Namespace, c.Spec.LockName); err != nil {
		return err
	}
	b, name, err := r.Backends.ForLock(ctx, lock)
	s.hold.Backend = name
	if err != nil {
		// The backend cannot be reached: keep the finalizer until it can, unless the hold has
		// expired anyway.
		if c.Status.ExpireTime != nil && !s.now.Before(c.Status.ExpireTime.Time) {
			r.Renewer.Untrack(s.hold, client.ObjectKeyFromObject(c))
			return r.clearLockHolder(ctx, s)
		}
		return fmt.Errorf("cannot release %s yet: %w", s.hold.Key, err)
	}
	s.backend = b
	return r.release(ctx, s)
}

// writeStatus patches the claim's status if this pass changed it, and emits an event when the
// phase changed.
func (r *LockClaimReconciler) writeStatus(ctx context.Context, before, claim *locksv1alpha1.LockClaim) error {
	if equality.Semantic.DeepEqual(before.Status, claim.Status) {
		return nil
	}
	if !claim.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(claim, locksv1alpha1.Finalizer) {
		return nil // released and let go: the object is gone
	}
	if err := checkGuard(r.Guard); err != nil {
		return err
	}
	if claim.Status.Phase == locksv1alpha1.ClaimHeld && before.Status.Phase != locksv1alpha1.ClaimHeld {
		failpoint.Pause(failpoint.GrantStatus, claim.Namespace+"/"+claim.Name)
	}
	// The patch is preconditioned on the resourceVersion this pass read: a pass that worked from
	// an outdated claim (a deposed leader waking up, a cache that lags) must not overwrite what a
	// newer pass wrote, least of all bring an ended claim back to Held. A conflict re-reads.
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if mutant.Active(mutant.BlindStatus) {
		patch = client.MergeFrom(before)
	}
	if err := r.Status().Patch(ctx, claim, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	if before.Status.Phase != claim.Status.Phase && claim.DeletionTimestamp.IsZero() {
		r.recordTransition(claim)
	}
	return nil
}

// recordTransition emits an event whose reason is the Acquired condition's reason.
func (r *LockClaimReconciler) recordTransition(claim *locksv1alpha1.LockClaim) {
	var reason, message string
	for _, cond := range claim.Status.Conditions {
		if cond.Type == locksv1alpha1.ConditionAcquired {
			reason, message = cond.Reason, cond.Message
		}
	}
	eventType := corev1.EventTypeNormal
	switch claim.Status.Phase {
	case locksv1alpha1.ClaimLost, locksv1alpha1.ClaimFailed, locksv1alpha1.ClaimTimedOut:
		eventType = corev1.EventTypeWarning
	case locksv1alpha1.ClaimPending:
		if reason == locksv1alpha1.ReasonQueued || reason == locksv1alpha1.ReasonContended {
			return // waiting is not news
		}
		eventType = corev1.EventTypeWarning // the claim cannot proceed: lock, pod or backend missing
	}
	r.Recorder.Eventf(claim, nil, eventType, reason, string(claim.Status.Phase), "%s", message)
}

// maxRetryDelay caps how long a claim whose pass failed waits before the next try. The default
// cap (1000 s) is far too long here: a waiter at the head of its queue whose backend was down for
// ten seconds would otherwise sleep for most of a minute after the backend came back, with the
// lock free and nothing else to wake it (the reliability harness measured 51 s after a PostgreSQL
// restart). It is also the Contended retry, so that a failing backend costs no more calls than a
// held one.
const maxRetryDelay = 5 * time.Second

// claimRateLimiter is controller-runtime's default rate limiter (per-claim exponential backoff
// from 5 ms, and 10 retries a second overall with bursts of 100) with the per-claim backoff
// capped at maxRetryDelay.
func claimRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// SetupWithManager wires the claim controller's watches: its own claims, their locks, their
// sibling claims (a release wakes the next in line), their pods (a dead holder is released at
// once), and the Renewer's lost holds.
func (r *LockClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 4
	}
	r.wakeups = make(chan event.TypedGenericEvent[*locksv1alpha1.LockClaim], 1024)
	r.freeWaiters = map[backendKey]map[types.NamespacedName]struct{}{}
	return ctrl.NewControllerManagedBy(mgr).
		For(&locksv1alpha1.LockClaim{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, deletionStarted()))).
		Watches(&locksv1alpha1.LockClaim{}, r.queueWaker(), builder.WithPredicates(queueChanged())).
		Watches(&locksv1alpha1.DistributedLock{}, handler.EnqueueRequestsFromMapFunc(r.claimsOfLockObject),
			builder.WithPredicates(lockUsabilityChanged())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.claimsOfPod)).
		WatchesRawSource(source.Channel(r.wakeups, &handler.TypedEnqueueRequestForObject[*locksv1alpha1.LockClaim]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles, RateLimiter: claimRateLimiter()}).
		Named("lockclaim").
		Complete(r)
}

// freeWatchFallback is how often a claim whose backend watches its contended key looks again
// anyway, in case the news of a release is lost (a watch dropped without a word).
const freeWatchFallback = 30 * time.Second

// queuePositionRefresh is how long the claims behind the head of a queue wait before they refresh
// their queuePosition after a change. Handoffs are on the critical path, positions are not: waking
// every waiter at once would spend the API budget on N status writes before the next holder's
// grant. The workqueue folds the refreshes of a burst of handoffs into one.
const queuePositionRefresh = 5 * time.Second

// queueWaker reacts to a claim event that may change who is next for its lock: it wakes the head
// of the queue at once and the other waiters a little later.
func (r *LockClaimReconciler) queueWaker() handler.EventHandler {
	wake := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
		c, ok := o.(*locksv1alpha1.LockClaim)
		if !ok {
			return
		}
		claims, err := claimsOfLock(ctx, r.Client, c.Namespace, c.Spec.LockName)
		if err != nil {
			return
		}
		var waiting []*locksv1alpha1.LockClaim
		for i := range claims {
			w := &claims[i]
			if w.UID != c.UID && !isHeld(w) && !isFinal(w.Status.Phase) && w.DeletionTimestamp.IsZero() {
				waiting = append(waiting, w)
			}
		}
		slices.SortFunc(waiting, queueOrder)
		for i, w := range waiting {
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w)}
			if i == 0 {
				q.Add(req)
			} else {
				// Spread the refreshes out (20 a second), so that they never crowd out a grant.
				q.AddAfter(req, queuePositionRefresh+time.Duration(i)*50*time.Millisecond)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			wake(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			wake(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			wake(ctx, e.Object, q)
		},
	}
}

func (r *LockClaimReconciler) claimsOfLockObject(ctx context.Context, o client.Object) []ctrl.Request {
	claims, err := claimsOfLock(ctx, r.Client, o.GetNamespace(), o.GetName())
	if err != nil {
		return nil
	}
	return requestsFor(claims)
}

func (r *LockClaimReconciler) claimsOfPod(ctx context.Context, o client.Object) []ctrl.Request {
	list := &locksv1alpha1.LockClaimList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexClaimPod: o.GetName()}); err != nil {
		return nil
	}
	return requestsFor(list.Items)
}

// deletionStarted passes updates that set a deletionTimestamp.
func deletionStarted() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// lockUsabilityChanged passes DistributedLock events that can unblock or fail its claims: creation,
// deletion, a spec change and a change of BackendReady. The holder, token and queue length change
// at every handoff and are not among them: waking every claim of a busy lock for those would put N
// reconciles in front of the next holder's grant.
func lockUsabilityChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*locksv1alpha1.DistributedLock), e.ObjectNew.(*locksv1alpha1.DistributedLock)
			return o.Generation != n.Generation ||
				o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				!equality.Semantic.DeepEqual(
					meta.FindStatusCondition(o.Status.Conditions, locksv1alpha1.ConditionBackendReady),
					meta.FindStatusCondition(n.Status.Conditions, locksv1alpha1.ConditionBackendReady))
		},
	}
}

// queueChanged passes claim events that can change who is next for a lock: creation, deletion,
// the start of deletion and phase changes.
func queueChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*locksv1alpha1.LockClaim), e.ObjectNew.(*locksv1alpha1.LockClaim)
			return o.Status.Phase != n.Status.Phase || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
	}
}

// checkGuard asks guard, if there is one, whether this process may still write as leader.
func checkGuard(guard *leaderguard.Guard) error {
	if guard == nil {
		return nil
	}
	return guard.Check()
}
