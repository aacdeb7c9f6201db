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

package lockclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Wait waits, by watching, until the claim namespace/name holds its lock: until its lock's record
// names it (with its token, one write before the claim's own status says Held; with a Role that
// cannot watch DistributedLocks, until the claim says so). It fails fast with an
// *Error when the claim ends without the lock or cannot proceed (lock, pod or backend missing);
// when ctx's deadline passes first the error is ErrTimedOut.
func (c *Client) Wait(ctx context.Context, namespace, name string) (*Result, error) {
	start := time.Now()
	res, err := c.wait(ctx, namespace, name)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, ErrTimedOut) {
			lock, pos := c.queuePosition(context.WithoutCancel(ctx), namespace, name)
			detail := fmt.Sprintf("timed out waiting for claim %q in namespace %q", name, namespace)
			if pos > 0 {
				detail += fmt.Sprintf(" (lock %q, queue position %d)", lock, pos)
			}
			return nil, &Error{Kind: ErrTimedOut, Namespace: namespace, Lock: lock, Claim: name, Detail: detail, Err: ctx.Err()}
		}
		return nil, err
	}
	res.Waited = time.Since(start)
	return res, nil
}

// WaitLost blocks while the claim namespace/name holds its lock. It returns an *Error of kind
// ErrLost as soon as the claim stops holding it (lost, released, deleted), and nil when ctx ends
// first. A Hold's Context does the same for a claim the caller acquired.
func (c *Client) WaitLost(ctx context.Context, namespace, name string) error {
	return c.waitLost(ctx, namespace, name, "", nil)
}

// waitLost is WaitLost for the claim with UID uid (any UID when empty): a claim of that name
// with another UID is a new claim, and the hold of the old one has ended. observe, when set, is
// given the claim as each read or watch event shows it.
func (c *Client) waitLost(ctx context.Context, namespace, name string, uid types.UID, observe func(*locksv1alpha1.LockClaim)) error {
	var lost error
	// The API server not answering says nothing about the lock, which the controller keeps
	// renewing: read and watch again, backing off.
	_ = wait.ExponentialBackoffWithContext(ctx, lostRetry, func(ctx context.Context) (bool, error) {
		err := c.watchLost(ctx, namespace, name, uid, observe)
		var typed *Error
		if errors.As(err, &typed) {
			lost = err
			return true, nil
		}
		return false, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return lost
}

// lostRetry spaces WaitLost's attempts to read the claim while the API server does not answer.
var lostRetry = wait.Backoff{Duration: time.Second, Factor: 1.5, Jitter: 0.2, Cap: 5 * time.Second, Steps: math.MaxInt32}

func (c *Client) watchLost(ctx context.Context, namespace, name string, uid types.UID, observe func(*locksv1alpha1.LockClaim)) error {
	lock := "" // the claim's lock, once seen
	return c.watchClaim(ctx, namespace, name, func(claim *locksv1alpha1.LockClaim) (bool, error) {
		if observe != nil && claim != nil && (uid == "" || claim.UID == uid) {
			observe(claim)
		}
		lost := &Error{Kind: ErrLost, Namespace: namespace, Claim: name}
		switch {
		case (claim == nil || (uid != "" && claim.UID != uid)) && lock != "":
			lost.Lock = lock
			lost.Detail = fmt.Sprintf("lost lock %q: claim %q in namespace %q was deleted", lock, name, namespace)
		case claim == nil || (uid != "" && claim.UID != uid):
			lost.Detail = fmt.Sprintf("lost the lock: claim %q in namespace %q was deleted", name, namespace)
		case !claim.DeletionTimestamp.IsZero():
			lost.Lock = locksLabel(claim)
			lost.Detail = fmt.Sprintf("lost lock %q: claim %q in namespace %q is being deleted", locksLabel(claim), name, namespace)
		case isFinal(claim.Status.Phase):
			// Not Pending: a hold learnt from the lock record is reported before the claim's own
			// status says Held.
			lost.Lock, lost.Phase, lost.Reason = locksLabel(claim), claim.Status.Phase, acquiredReason(claim)
			lost.Detail = fmt.Sprintf("lost lock %q: claim %q in namespace %q is %s (%s)",
				locksLabel(claim), name, namespace, claim.Status.Phase, acquiredMessage(claim))
		default:
			lock = locksLabel(claim)
			return false, nil
		}
		return true, lost
	})
}

// wait waits until the claim holds its lock or fails: it watches the claim, and, once it has seen
// the claim, the claim's lock too, whose record names the claim one write before the claim's own
// status says Held (record.go). Whichever tells first ends the wait.
func (c *Client) wait(ctx context.Context, namespace, name string) (*Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recorded := make(chan *Result, 1)
	var watchingRecord sync.Once
	var res *Result
	seen := false
	err := c.watchClaim(ctx, namespace, name, func(claim *locksv1alpha1.LockClaim) (bool, error) {
		if claim == nil {
			kind, detail := ErrClaimNotFound, fmt.Sprintf("claim %q not found in namespace %q", name, namespace)
			if seen {
				kind, detail = ErrClaimEnded, fmt.Sprintf("claim %q in namespace %q was deleted before it got the lock", name, namespace)
			}
			return true, &Error{Kind: kind, Namespace: namespace, Claim: name, Detail: detail}
		}
		seen = true
		// A claim of several locks is Held only once its own status says so: its locks' records
		// name it before that, one by one.
		watchingRecord.Do(func() {
			if len(claim.Spec.LockNames) > 0 {
				return
			}
			go func() {
				if r := c.watchRecord(ctx, claim.DeepCopy()); r != nil {
					recorded <- r
					cancel()
				}
			}()
		})
		r, err := c.evaluate(ctx, claim)
		res = r
		return r != nil || err != nil, err
	})
	select {
	case r := <-recorded:
		return r, nil
	default:
	}
	return res, err
}

// check reads the claim once and evaluates it: a result when it holds the lock, nil and nil while
// it waits.
func (c *Client) check(ctx context.Context, namespace, name string) (*Result, error) {
	claim := &locksv1alpha1.LockClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, claim); err != nil {
		return nil, apiError(err, "reading LockClaim "+name)
	}
	return c.evaluate(ctx, claim)
}

// evaluate says whether claim holds its lock (a result), has failed (an error) or is still
// waiting (neither). A claim that waits for a missing lock, pod or backend fails fast once the
// API confirms that the object is missing (the claim's status may be older than the object).
func (c *Client) evaluate(ctx context.Context, claim *locksv1alpha1.LockClaim) (*Result, error) {
	ns, lock := claim.Namespace, locksLabel(claim)
	fail := func(kind error, detail string) error {
		return &Error{Kind: kind, Namespace: ns, Lock: lock, Claim: claim.Name,
			Phase: claim.Status.Phase, Reason: acquiredReason(claim), Detail: detail}
	}
	switch claim.Status.Phase {
	case locksv1alpha1.ClaimHeld:
		if !meta.IsStatusConditionTrue(claim.Status.Conditions, locksv1alpha1.ConditionAcquired) {
			return nil, nil
		}
		return result(claim), nil
	case locksv1alpha1.ClaimTimedOut:
		return nil, fail(ErrTimedOut, fmt.Sprintf("timed out waiting for lock %q in namespace %q (claim %q: %s)",
			lock, ns, claim.Name, acquiredMessage(claim)))
	case locksv1alpha1.ClaimReleased, locksv1alpha1.ClaimLost, locksv1alpha1.ClaimFailed:
		kind := ErrClaimEnded
		switch reason := acquiredReason(claim); {
		case reason == locksv1alpha1.ReasonLockNotFound:
			kind = ErrLockNotFound
		case reason == locksv1alpha1.ReasonHolderTerminated && claim.Status.Phase == locksv1alpha1.ClaimFailed:
			kind = ErrPodNotFound
		case reason == locksv1alpha1.ReasonQueueFull:
			kind = ErrLockBusy
		}
		return nil, fail(kind, fmt.Sprintf("claim %q for lock %q in namespace %q ended in phase %s (%s)",
			claim.Name, lock, ns, claim.Status.Phase, acquiredMessage(claim)))
	}
	if !claim.DeletionTimestamp.IsZero() {
		return nil, fail(ErrClaimEnded, fmt.Sprintf("claim %q in namespace %q is being deleted", claim.Name, ns))
	}

	ready := meta.FindStatusCondition(claim.Status.Conditions, locksv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse {
		return nil, nil
	}
	var err error
	switch ready.Reason {
	case locksv1alpha1.ReasonLockNotFound:
		for _, l := range claim.Spec.Locks() {
			if err = c.lockExists(ctx, ns, l); err != nil {
				break
			}
		}
	case locksv1alpha1.ReasonPodNotFound:
		if h := claim.Spec.Holder; h != nil && h.PodName != "" {
			_, err = c.pod(ctx, ns, Pod{Name: h.PodName})
		}
	case locksv1alpha1.ReasonBackendUnavailable:
		for _, l := range claim.Spec.Locks() {
			if err = c.backendMissing(ctx, ns, l); err != nil {
				break
			}
		}
	case locksv1alpha1.ReasonMixedBackends:
		// A mistake in the locks' specs: no wait ends it.
		err = &Error{Kind: ErrBackendNotFound, Namespace: ns, Reason: ready.Reason,
			Detail: fmt.Sprintf("locks %q in namespace %q cannot be held together: %s", lock, ns, ready.Message)}
	case locksv1alpha1.ReasonKeyConflict:
		// A mistake in the lock's spec, not an outage: waiting would last until someone deletes
		// the other lock.
		err = &Error{Kind: ErrKeyConflict, Namespace: ns, Reason: ready.Reason,
			Detail: fmt.Sprintf("lock %q in namespace %q cannot be granted: %s", lock, ns, ready.Message)}
	}
	var typed *Error
	if errors.As(err, &typed) {
		typed.Claim = claim.Name
		typed.Lock = lock
		return nil, typed
	}
	return nil, nil // transient: the next event tells
}

// backendMissing returns ErrBackendNotFound when the lock's BackendReady condition says its
// LockBackend does not exist or does not admit the namespace: mistakes a waiting claim cannot
// outwait. An unreachable backend is worth waiting for.
func (c *Client) backendMissing(ctx context.Context, ns, lock string) error {
	l := &locksv1alpha1.DistributedLock{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: lock}, l); err != nil {
		if apierrors.IsNotFound(err) {
			return c.lockExists(ctx, ns, lock)
		}
		return apiError(err, "reading DistributedLock "+lock)
	}
	cond := meta.FindStatusCondition(l.Status.Conditions, locksv1alpha1.ConditionBackendReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.ObservedGeneration != l.Generation {
		return nil
	}
	switch cond.Reason {
	case locksv1alpha1.ReasonBackendNotFound, locksv1alpha1.ReasonNamespaceNotAllowed:
		return &Error{Kind: ErrBackendNotFound, Namespace: ns, Lock: lock, Reason: cond.Reason,
			Detail: fmt.Sprintf("lock %q in namespace %q cannot be used: %s", lock, ns, cond.Message)}
	}
	return nil
}

func result(claim *locksv1alpha1.LockClaim) *Result {
	r := &Result{
		Namespace:    claim.Namespace,
		Lock:         locksLabel(claim),
		Claim:        claim.Name,
		uid:          claim.UID,
		Identity:     claim.Status.HolderIdentity,
		Mode:         claimMode(claim),
		FencingToken: claim.Status.FencingToken,
	}
	if h := claim.Spec.Holder; h != nil {
		r.Pod = h.PodName
	}
	if t := claim.Status.AcquireTime; t != nil {
		r.AcquireTime = t.Time
	}
	if t := claim.Status.ExpireTime; t != nil {
		r.ExpireTime = t.Time
	}
	if len(claim.Spec.LockNames) > 0 {
		r.FencingToken = 0
		for _, part := range claim.Status.Locks {
			r.Locks = append(r.Locks, HeldLock{Lock: part.LockName, FencingToken: part.FencingToken})
		}
	}
	return r
}

// locksLabel names claim's lock, or its locks, in messages.
func locksLabel(claim *locksv1alpha1.LockClaim) string {
	return locksv1alpha1.LocksLabel(claim.Spec.Locks())
}

func acquiredReason(claim *locksv1alpha1.LockClaim) string {
	if cond := meta.FindStatusCondition(claim.Status.Conditions, locksv1alpha1.ConditionAcquired); cond != nil {
		return cond.Reason
	}
	return ""
}

func acquiredMessage(claim *locksv1alpha1.LockClaim) string {
	cond := meta.FindStatusCondition(claim.Status.Conditions, locksv1alpha1.ConditionAcquired)
	switch {
	case cond == nil:
		return "no conditions yet"
	case cond.Message == "":
		return cond.Reason
	}
	return cond.Reason + ": " + cond.Message
}

// errStale ends a watch whose resourceVersion the API server has compacted away: read again.
var errStale = errors.New("watch too old")

// watchClaim calls fn with the claim's current state (nil once it does not exist) until fn says it
// is done or ctx ends (watchNamed).
func (c *Client) watchClaim(ctx context.Context, namespace, name string, fn func(*locksv1alpha1.LockClaim) (bool, error)) error {
	return watchNamed(ctx, c.kube, "LockClaim", namespace, name, &locksv1alpha1.LockClaimList{},
		func(l *locksv1alpha1.LockClaimList) *locksv1alpha1.LockClaim {
			if len(l.Items) == 0 {
				return nil
			}
			return &l.Items[0]
		}, fn)
}

// watchNamed calls fn with the current state of the object of kind and name in namespace (nil once
// it does not exist) until fn says it is done or ctx ends: one list of that name into list (first
// picks the object out of it), then client-go's RetryWatcher from the list's resourceVersion (it
// watches again from the last event it saw when the API server ends a watch, after a delay so as
// not to spin), and a new list when the server no longer has that version.
func watchNamed[O client.Object, L client.ObjectList](ctx context.Context, kube client.WithWatch, kind, namespace, name string,
	list L, first func(L) O, fn func(O) (bool, error)) error {
	byName := client.MatchingFields{"metadata.name": name}
	var none O
	watcher := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return kube.Watch(ctx, list, client.InNamespace(namespace), byName, &client.ListOptions{Raw: &opts})
	}}
	for {
		err := kube.List(ctx, list, client.InNamespace(namespace), byName)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return apiError(err, "reading "+kind+" "+name)
		}
		if done, err := fn(first(list)); done {
			return err
		}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), watcher)
		if err != nil {
			return fmt.Errorf("watching %s %s: %w", kind, name, err)
		}
		_, err = watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return true, errStale
				}
				return true, apiError(err, "watching "+kind+" "+name)
			case watch.Deleted:
				return fn(none)
			}
			obj, ok := ev.Object.(O)
			if !ok {
				return false, nil
			}
			return fn(obj)
		})
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, errStale):
			return err
		}
	}
}
