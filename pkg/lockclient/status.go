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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	// MaxHolders is the lock's number of places (spec.maxHolders): 1 for a mutex.
	MaxHolders int32 `json:"maxHolders"`
	// Holding is the number of holders, and Waiting the number of waiting claims (the length of
	// Queue).
	Holding int `json:"holding"`
	Waiting int `json:"waiting"`
	// Holders are the current holders, in the order they were granted; empty while the lock is
	// free.
	Holders []HolderStatus `json:"holders"`
	// Holder is the first of Holders (the one holder of a mutex); nil while the lock is free.
	//
	// Deprecated: read Holders, which has every holder of a lock with several places. Holder is
	// kept for programs written before shared locks.
	Holder *HolderStatus `json:"holder,omitempty"`
	// LastFencingToken is the last token issued for the lock.
	LastFencingToken int64 `json:"lastFencingToken"`
	// Queue lists the waiting claims in the order they will be granted.
	Queue []QueuedClaim `json:"queue"`
}

// HolderStatus describes a claim that holds a lock.
type HolderStatus struct {
	Claim string `json:"claim"`
	Pod   string `json:"pod,omitempty"`
	// Object is the workload object that holds through the claim (spec.holder.object), as
	// Kind/name: "Job/migrate".
	Object string `json:"object,omitempty"`
	// Mode is how the claim holds the lock: Exclusive (alone: an Exclusive claim, or any claim
	// on a lock of one place) or Shared (one of its places).
	Mode         locksv1alpha1.LockMode `json:"mode"`
	Identity     string                 `json:"identity"`
	FencingToken int64                  `json:"fencingToken"`
	AcquireTime  time.Time              `json:"acquireTime"`
	ExpireTime   *time.Time             `json:"expireTime,omitempty"`
	// Together are the other locks a claim of several locks holds with this one, in name order;
	// empty for a claim of one lock.
	Together []string `json:"together,omitempty"`
	// Role is the holder pod's locks.lockwarden.io/role label: holder, or standby for a pod that
	// terminates while it still holds (its traffic has moved off). Empty when the pod has no
	// role label or could not be read (listing pods needs list on pods).
	Role string `json:"role,omitempty"`
}

// QueuedClaim is a claim waiting for a lock.
type QueuedClaim struct {
	// Position is 1 for the next claim to be granted.
	Position int    `json:"position"`
	Claim    string `json:"claim"`
	Pod      string `json:"pod,omitempty"`
	// Object is the workload object the claim asks for, as Kind/name.
	Object string `json:"object,omitempty"`
	// Mode is how the claim will hold the lock: the mode it asks for, or Exclusive on a lock of
	// one place.
	Mode locksv1alpha1.LockMode `json:"mode"`
	// Priority is the claim's spec.priority: claims of a higher one are granted first.
	Priority int32     `json:"priority"`
	Created  time.Time `json:"created"`
	// Reason is the claim's Acquired reason (Queued, Contended, WaitingForLocks, PodNotFound, ...).
	Reason string `json:"reason,omitempty"`
	// Together are the other locks a claim of several locks waits for with this one, in name
	// order; empty for a claim of one lock.
	Together []string `json:"together,omitempty"`
	// Wait is how the claim's pod waits, for a pod that asks for the lock by annotation:
	// Standby (it runs as a hot standby, labelled role=standby) or Gated (not scheduled until
	// it holds). Empty for other claims, or when pods could not be listed.
	Wait string `json:"wait,omitempty"`
}

// Status reports the holders of one lock (each with its mode, fencing token and expiry), its
// places and its queue.
func (c *Client) Status(ctx context.Context, namespace, lock string) (*LockStatus, error) {
	l := &locksv1alpha1.DistributedLock{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: lock}, l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, c.lockExists(ctx, namespace, lock)
		}
		return nil, apiError(err, "reading DistributedLock "+lock)
	}
	// The server filters by spec.lockName (a selectable field of the CRD), so that a busy
	// namespace's other claims are not read: the lock's own, then the claims of several locks
	// (no spec.lockName), which lockStatus sorts out.
	var items []locksv1alpha1.LockClaim
	for _, name := range []string{lock, ""} {
		claims := &locksv1alpha1.LockClaimList{}
		if err := c.kube.List(ctx, claims, client.InNamespace(namespace), client.MatchingFields{"spec.lockName": name}); err != nil {
			return nil, apiError(err, "listing LockClaims")
		}
		items = append(items, claims.Items...)
	}
	s := lockStatus(l, items)
	withPodRoles(s, c.annotatedPods(ctx, namespace))
	return s, nil
}

// annotatedPods lists the pods of namespace that carry the role label (every pod that asks for
// a lock by annotation, once the controller or the admission policy has seen it), by name. It
// returns nil when they cannot be listed: the roles are a courtesy of status, which needs no
// more than read access to locks and claims.
func (c *Client) annotatedPods(ctx context.Context, namespace string) map[string]*corev1.Pod {
	sel, err := labels.Parse(locksv1alpha1.PodRoleLabel)
	if err != nil {
		return nil
	}
	list := &corev1.PodList{}
	if err := c.kube.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil
	}
	pods := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[list.Items[i].Name] = &list.Items[i]
	}
	return pods
}

// withPodRoles fills in the role of each holder pod and how each queued pod waits, from pods by
// name (nil: unknown, left empty).
func withPodRoles(s *LockStatus, pods map[string]*corev1.Pod) {
	for i := range s.Holders {
		if p := pods[s.Holders[i].Pod]; p != nil && s.Holders[i].Pod != "" {
			s.Holders[i].Role = p.Labels[locksv1alpha1.PodRoleLabel]
		}
	}
	if s.Holder != nil && len(s.Holders) > 0 {
		first := s.Holders[0]
		s.Holder = &first
	}
	for i := range s.Queue {
		p := pods[s.Queue[i].Pod]
		if p == nil || s.Queue[i].Pod == "" || p.Annotations[locksv1alpha1.PodLockAnnotation] != s.Lock {
			continue
		}
		s.Queue[i].Wait = locksv1alpha1.PodLockWaitGated
		if p.Annotations[locksv1alpha1.PodLockWaitAnnotation] == locksv1alpha1.PodLockWaitStandby {
			s.Queue[i].Wait = locksv1alpha1.PodLockWaitStandby
		}
	}
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
	pods := c.annotatedPods(ctx, namespace)
	out := make([]LockStatus, 0, len(locks.Items))
	for i := range locks.Items {
		s := lockStatus(&locks.Items[i], claims.Items)
		withPodRoles(s, pods)
		out = append(out, *s)
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
	places := max(l.Spec.MaxHolders, 1) // 0: a lock written before maxHolders existed
	s.MaxHolders = places
	s.Holders = []HolderStatus{}
	byClaim := map[string]int{}
	for _, h := range l.Status.CurrentHolders() {
		hs := HolderStatus{Claim: h.Claim, Mode: h.Mode, Identity: h.Identity, FencingToken: h.FencingToken, AcquireTime: h.AcquireTime.Time}
		if hs.Mode == "" {
			hs.Mode = locksv1alpha1.LockModeExclusive // recorded before modes: held alone
		}
		if h.ExpireTime != nil {
			expire := h.ExpireTime.Time
			hs.ExpireTime = &expire
		}
		byClaim[h.Claim] = len(s.Holders)
		s.Holders = append(s.Holders, hs)
	}
	var waiting []*locksv1alpha1.LockClaim
	for i := range claims {
		cl := &claims[i]
		if !slices.Contains(cl.Spec.Locks(), l.Name) {
			continue
		}
		if j, ok := byClaim[cl.Name]; ok {
			h := &s.Holders[j]
			h.Pod, h.Object = holderOf(cl)
			h.Together = togetherWith(cl, l.Name)
			// The lock record keeps the expiry of the grant; the claim's follows renewals (for a
			// claim of several locks, its entry of this lock does).
			if t := partExpiry(cl, l.Name); t != nil && cl.Status.Phase == locksv1alpha1.ClaimHeld {
				expire := t.Time
				h.ExpireTime = &expire
			}
		}
		if cl.Status.Phase == locksv1alpha1.ClaimHeld || isFinal(cl.Status.Phase) || !cl.DeletionTimestamp.IsZero() {
			continue
		}
		waiting = append(waiting, cl)
	}
	slices.SortFunc(waiting, locksv1alpha1.QueueOrder) // the controller's order
	for i, cl := range waiting {
		q := QueuedClaim{Position: i + 1, Claim: cl.Name, Mode: claimMode(cl), Priority: cl.Spec.Priority, Created: cl.CreationTimestamp.Time,
			Reason: acquiredReason(cl), Together: togetherWith(cl, l.Name)}
		if places == 1 {
			q.Mode = locksv1alpha1.LockModeExclusive
		}
		q.Pod, q.Object = holderOf(cl)
		s.Queue = append(s.Queue, q)
	}
	s.Holding, s.Waiting = len(s.Holders), len(s.Queue)
	if len(s.Holders) > 0 {
		first := s.Holders[0]
		s.Holder = &first
	}
	return s
}

// togetherWith are the locks of claim cl other than lock; nil for a claim of one lock.
func togetherWith(cl *locksv1alpha1.LockClaim, lock string) []string {
	if len(cl.Spec.LockNames) == 0 {
		return nil
	}
	return slices.DeleteFunc(cl.Spec.Locks(), func(n string) bool { return n == lock })
}

// partExpiry is the expiry claim cl shows for its hold of lock: its status.expireTime, or for a
// claim of several locks the entry of lock in status.locks.
func partExpiry(cl *locksv1alpha1.LockClaim, lock string) *metav1.MicroTime {
	if len(cl.Spec.LockNames) == 0 {
		return cl.Status.ExpireTime
	}
	for i := range cl.Status.Locks {
		if cl.Status.Locks[i].LockName == lock {
			return cl.Status.Locks[i].ExpireTime
		}
	}
	return nil
}

// holderOf is the pod, or the workload object as Kind/name, that claim cl holds for.
func holderOf(cl *locksv1alpha1.LockClaim) (pod, object string) {
	h := cl.Spec.Holder
	switch {
	case h == nil:
		return "", ""
	case h.Object != nil:
		return "", h.Object.Kind + "/" + h.Object.Name
	}
	return h.PodName, ""
}
