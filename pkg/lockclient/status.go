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
	"cmp"
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// LockStatus is who holds a lock and who waits for it.
type LockStatus struct {
	// Namespace and Lock name the DistributedLock.
	Namespace string `json:"namespace"`
	Lock      string `json:"lock"`
	// Backend is the LockBackend the lock lives on.
	Backend string `json:"backend"`
	// Ready says whether claims on the lock can be granted; Message says why not.
	Ready   bool   `json:"ready"`
	Message string `json:"message,omitempty"`
	// Holder is the current holder; nil while the lock is free.
	Holder *HolderStatus `json:"holder,omitempty"`
	// LastFencingToken is the last token issued for the lock.
	LastFencingToken int64 `json:"lastFencingToken"`
	// Queue lists the waiting claims in the order they will be granted.
	Queue []QueuedClaim `json:"queue"`
}

// HolderStatus describes the claim that holds a lock.
type HolderStatus struct {
	Claim        string     `json:"claim"`
	Pod          string     `json:"pod,omitempty"`
	Identity     string     `json:"identity"`
	FencingToken int64      `json:"fencingToken"`
	AcquireTime  time.Time  `json:"acquireTime"`
	ExpireTime   *time.Time `json:"expireTime,omitempty"`
}

// QueuedClaim is a claim waiting for a lock.
type QueuedClaim struct {
	// Position is 1 for the next claim to be granted.
	Position int       `json:"position"`
	Claim    string    `json:"claim"`
	Pod      string    `json:"pod,omitempty"`
	Created  time.Time `json:"created"`
	// Reason is the claim's Acquired reason (Queued, Contended, PodNotFound, ...).
	Reason string `json:"reason,omitempty"`
}

// Status reports the holder, the fencing token, the expiry and the queue of one lock.
func (c *Client) Status(ctx context.Context, namespace, lock string) (*LockStatus, error) {
	l := &locksv1alpha1.DistributedLock{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: lock}, l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, c.lockExists(ctx, namespace, lock)
		}
		return nil, apiError(err, "reading DistributedLock "+lock)
	}
	// The server filters by spec.lockName (a selectable field of the CRD), so that a busy
	// namespace's other claims are not read.
	claims := &locksv1alpha1.LockClaimList{}
	if err := c.kube.List(ctx, claims, client.InNamespace(namespace), client.MatchingFields{"spec.lockName": lock}); err != nil {
		return nil, apiError(err, "listing LockClaims")
	}
	return lockStatus(l, claims.Items), nil
}

// StatusAll reports every lock in namespace, by name.
func (c *Client) StatusAll(ctx context.Context, namespace string) ([]LockStatus, error) {
	locks := &locksv1alpha1.DistributedLockList{}
	if err := c.kube.List(ctx, locks, client.InNamespace(namespace)); err != nil {
		return nil, apiError(err, "listing DistributedLocks")
	}
	claims := &locksv1alpha1.LockClaimList{}
	if err := c.kube.List(ctx, claims, client.InNamespace(namespace)); err != nil {
		return nil, apiError(err, "listing LockClaims")
	}
	out := make([]LockStatus, 0, len(locks.Items))
	for i := range locks.Items {
		out = append(out, *lockStatus(&locks.Items[i], claims.Items))
	}
	slices.SortFunc(out, func(a, b LockStatus) int { return cmp.Compare(a.Lock, b.Lock) })
	return out, nil
}

// lockStatus computes a lock's status from the lock and the claims of its namespace. The queue is
// in grant order: creation time, then name, as the controller grants.
func lockStatus(l *locksv1alpha1.DistributedLock, claims []locksv1alpha1.LockClaim) *LockStatus {
	s := &LockStatus{
		Namespace:        l.Namespace,
		Lock:             l.Name,
		Backend:          l.BackendName(),
		LastFencingToken: l.Status.FencingToken,
		Queue:            []QueuedClaim{},
	}
	if cond := meta.FindStatusCondition(l.Status.Conditions, locksv1alpha1.ConditionReady); cond != nil {
		s.Ready = cond.Status == metav1.ConditionTrue
		if !s.Ready {
			s.Message = oneLine(cond.Message)
		}
	} else {
		s.Message = "not reconciled yet; is the lockwarden controller running?"
	}
	if hs := l.Status.CurrentHolders(); len(hs) > 0 {
		h := hs[0]
		s.Holder = &HolderStatus{Claim: h.Claim, Identity: h.Identity, FencingToken: h.FencingToken, AcquireTime: h.AcquireTime.Time}
		if h.ExpireTime != nil {
			s.Holder.ExpireTime = &h.ExpireTime.Time
		}
	}
	var waiting []*locksv1alpha1.LockClaim
	for i := range claims {
		cl := &claims[i]
		if cl.Spec.LockName != l.Name {
			continue
		}
		if s.Holder != nil && cl.Name == s.Holder.Claim {
			if cl.Spec.Holder != nil {
				s.Holder.Pod = cl.Spec.Holder.PodName
			}
			// The lock record keeps the expiry of the grant; the claim's follows renewals.
			if t := cl.Status.ExpireTime; t != nil && cl.Status.Phase == locksv1alpha1.ClaimHeld {
				expire := t.Time
				s.Holder.ExpireTime = &expire
			}
		}
		if cl.Status.Phase == locksv1alpha1.ClaimHeld || isFinal(cl.Status.Phase) || !cl.DeletionTimestamp.IsZero() {
			continue
		}
		waiting = append(waiting, cl)
	}
	slices.SortFunc(waiting, func(a, b *locksv1alpha1.LockClaim) int {
		if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for i, cl := range waiting {
		q := QueuedClaim{Position: i + 1, Claim: cl.Name, Created: cl.CreationTimestamp.Time, Reason: acquiredReason(cl)}
		if cl.Spec.Holder != nil {
			q.Pod = cl.Spec.Holder.PodName
		}
		s.Queue = append(s.Queue, q)
	}
	return s
}
