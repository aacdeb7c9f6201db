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
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Wait waits, by watching, until the claim namespace/name holds its lock. It fails fast with an
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
// first.
func (c *Client) WaitLost(ctx context.Context, namespace, name string) error {
	for {
		err := c.waitLost(ctx, namespace, name)
		var typed *Error
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &typed):
			return err
		}
		// The API server did not answer: that says nothing about the lock, which the controller
		// keeps renewing. Try again.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

func (c *Client) waitLost(ctx context.Context, namespace, name string) error {
	return c.watchClaim(ctx, namespace, name, func(claim *locksv1alpha1.LockClaim) (bool, error) {
		lost := &Error{Kind: ErrLost, Namespace: namespace, Claim: name}
		switch {
		case claim == nil:
			lost.Detail = fmt.Sprintf("lost the lock: claim %q in namespace %q was deleted", name, namespace)
		case !claim.DeletionTimestamp.IsZero():
			lost.Lock = claim.Spec.LockName
			lost.Detail = fmt.Sprintf("lost lock %q: claim %q in namespace %q is being deleted", claim.Spec.LockName, name, namespace)
		case claim.Status.Phase != locksv1alpha1.ClaimHeld:
			lost.Lock, lost.Phase, lost.Reason = claim.Spec.LockName, claim.Status.Phase, acquiredReason(claim)
			lost.Detail = fmt.Sprintf("lost lock %q: claim %q in namespace %q is %s (%s)",
				claim.Spec.LockName, name, namespace, claim.Status.Phase, acquiredMessage(claim))
		default:
			return false, nil
		}
		return true, lost
	})
}

// wait waits until the claim holds its lock or fails.
func (c *Client) wait(ctx context.Context, namespace, name string) (*Result, error) {
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
		r, err := c.evaluate(ctx, claim)
		res = r
		return r != nil || err != nil, err
	})
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
	ns, lock := claim.Namespace, claim.Spec.LockName
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
		err = c.lockExists(ctx, ns, lock)
	case locksv1alpha1.ReasonPodNotFound:
		if h := claim.Spec.Holder; h != nil && h.PodName != "" {
			_, err = c.pod(ctx, ns, Pod{Name: h.PodName})
		}
	case locksv1alpha1.ReasonBackendUnavailable:
		err = c.backendMissing(ctx, ns, lock)
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
		Lock:         claim.Spec.LockName,
		Claim:        claim.Name,
		Identity:     claim.Status.HolderIdentity,
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
	return r
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

// watchClaim calls fn with the claim's current state (nil once it does not exist) until fn says it
// is done or ctx ends: one read, then a watch from that read's resourceVersion, read and watched
// again whenever the API server ends the watch.
func (c *Client) watchClaim(ctx context.Context, namespace, name string, fn func(*locksv1alpha1.LockClaim) (bool, error)) error {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	for {
		claim := &locksv1alpha1.LockClaim{}
		err := c.kube.Get(ctx, key, claim)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case apierrors.IsNotFound(err):
			claim = nil
		case err != nil:
			return apiError(err, "reading LockClaim "+name)
		}
		if done, err := fn(claim); done {
			return err
		}
		rv := ""
		if claim != nil {
			rv = claim.ResourceVersion
		}
		started := time.Now()
		w, err := c.kube.Watch(ctx, &locksv1alpha1.LockClaimList{}, client.InNamespace(namespace),
			client.MatchingFields{"metadata.name": name},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return apiError(err, "watching LockClaim "+name)
		}
		done, err := consume(ctx, w, fn)
		w.Stop()
		if done {
			return err
		}
		// The watch ended (a server-side timeout, or an expired resourceVersion): read again. Do
		// not spin if the server ends watches at once.
		if time.Since(started) < time.Second {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
}

// consume feeds a watch's events to fn until fn is done, the watch ends (false) or ctx ends.
func consume(ctx context.Context, w watch.Interface, fn func(*locksv1alpha1.LockClaim) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			claim, isClaim := ev.Object.(*locksv1alpha1.LockClaim)
			switch {
			case ev.Type == watch.Error:
				return false, nil
			case !isClaim || ev.Type == watch.Bookmark:
				continue
			case ev.Type == watch.Deleted:
				claim = nil
			}
			if done, err := fn(claim); done {
				return true, err
			}
		}
	}
}
