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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/heartbeat"
	"github.com/lockwarden/lockwarden/internal/keyledger"
)

// This file fills a pass's scope: the lock and its claims from the cache, each claim's holder
// (holder.load: pods, holder pods' Nodes, heartbeat Leases, workload objects), the claims the
// record names that the cache no longer has (vanished.go), the other locks a home lock refreshes
// by (joint.go), the backend, and the key ledger's word on who owns the lock's key.

// load reads what a pass works from: the lock, its claims and their pods from the cache, and the
// lock's backend. It returns nil, without error, when the cache lags this process's own last
// write of the lock or of a claim.
func (r *Reconciler) load(ctx context.Context, name types.NamespacedName) (*lockScope, error) {
	s, err := r.readLock(ctx, name)
	if s == nil || err != nil {
		return nil, err
	}
	s.world.pods = map[string]*corev1.Pod{}
	fresh, err := r.readClaims(ctx, s, func(read *locksv1alpha1.LockClaim) error {
		c := read.DeepCopy()
		s.claims = append(s.claims, c)
		return holderOf(c).load(ctx, r, s, c)
	})
	if !fresh || err != nil {
		return nil, err
	}
	if err := r.loadVanished(ctx, s); err != nil {
		return nil, err
	}
	s.claims = inQueueOrder(s.claims)
	if s.lock == nil {
		return s, nil
	}
	if s.use.unusable, err = r.readBackend(ctx, s); err != nil {
		return nil, err
	}
	if err := r.loadPartLocks(ctx, s, s.claims); err != nil {
		return nil, err
	}
	if s.lock.DeletionTimestamp.IsZero() {
		if s.use.conflict, err = r.takeKey(ctx, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// readLock starts the scope of a pass of lock name at now, with the lock from the cache (s.lock
// nil when it does not exist). It returns nil, without error, when the cache lags this process's
// own last write of the lock.
func (r *Reconciler) readLock(ctx context.Context, name types.NamespacedName) (*lockScope, error) {
	s := &lockScope{name: name, now: r.Clock.Now()}
	s.read = map[types.UID]claimView{}
	lock := &locksv1alpha1.DistributedLock{}
	switch err := r.Get(ctx, name, lock); {
	case apierrors.IsNotFound(err):
		return s, nil
	case err != nil:
		return nil, err
	case r.memory.written.behind(lock):
		return nil, nil
	}
	s.lock, s.readLock = lock, lock.DeepCopy()
	// A lock last written before shared locks records its holder in status.holder: the pass
	// moves it into status.holders, and its write clears the old field.
	s.lock.Status.Holders, s.lock.Status.Holder = s.lock.Status.CurrentHolders(), nil //nolint:staticcheck // SA1019: the old field is cleared here, once, by design
	s.use.ttl = time.Duration(lock.Spec.LeaseDurationSeconds) * time.Second
	return s, nil
}

// readClaims reads the lock's claims from the cache into s.read and hands each to take, which
// copies those it keeps. fresh is false when the cache lags this process's own last write of one
// of them.
//
// The claims share their contents with the cache (no copy of the whole list: with a queue of two
// hundred, copying every claim twice was a third of a handoff pass's CPU), so neither s.read nor
// what take is handed is ever written into: a pass changes only its copies (s.claims), and
// replaces s.read's entry after a write.
func (r *Reconciler) readClaims(ctx context.Context, s *lockScope, take func(*locksv1alpha1.LockClaim) error) (fresh bool, err error) {
	list := &locksv1alpha1.LockClaimList{}
	if err := r.List(ctx, list, client.InNamespace(s.name.Namespace), client.MatchingFields{indexClaimLock: s.name.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	for i := range list.Items {
		read := &list.Items[i]
		if r.memory.written.behind(read) {
			return false, nil
		}
		// A new holder whose Held write is still on the way counts as written (heldlane.go).
		read = r.memory.lane.overlay(read)
		v := viewOn(read, s.name.Name)
		s.read[read.UID] = v
		if err := take(v.part); err != nil {
			return false, err
		}
	}
	return true, nil
}

// readBackend resolves the lock's backend into the scope: its session (nil when it cannot be
// used now, and then the returned *UnusableError says why), name, store and the lock's key on it.
// Other errors are transient API errors.
func (r *Reconciler) readBackend(ctx context.Context, s *lockScope) (*registry.UnusableError, error) {
	use, err := r.Backends.ForLock(ctx, s.lock)
	s.use.name, s.use.store, s.use.key, s.use.keyPolicy = use.Name, use.Store, s.lock.BackendKey(use.KeyPolicy), use.KeyPolicy
	var unusable *registry.UnusableError
	switch {
	case errors.As(err, &unusable):
		return unusable, nil
	case err != nil:
		return nil, err
	}
	s.use.session = use.Session
	return nil, nil
}

// takeKey makes the lock the owner of its key in its store in the key ledger, or says which lock
// took it first, through whichever LockBackend of the store. When the key passes to this lock
// now, the pass grants nothing and writes the lock (its last token moves up by one): the next
// pass's grant is then preconditioned on a resourceVersion above every write of the key's earlier
// owners, so that its token is above theirs (package fencing).
func (r *Reconciler) takeKey(ctx context.Context, s *lockScope) (*registry.UnusableError, error) {
	self := ownerOf(s.lock)
	owner, taken, err := r.Keys.Take(ctx, ledgerKey(s), self)
	switch {
	case err != nil:
		return nil, err
	case owner.UID != self.UID:
		return keyConflict(s.lock, owner, s.use.name), nil
	case taken:
		s.use.keyTaken = true
		s.lock.Status.FencingToken++
	}
	return nil, nil
}

// readWake is how soon what a pass read changes with time alone, so that the pass looks again
// then: a live heartbeat Lease that would expire unrenewed (its claimant is released without
// waiting for any event); a key another lock owns (the owner's deletion wakes this lock, through
// the key ledger, but an owner deleted with its finalizer removed by hand does not); a key taken
// in this pass (the next pass grants, should the watch event of this one's write not come first).
func readWake(s *lockScope) time.Duration {
	var wait time.Duration
	for _, v := range s.world.heartbeats {
		if v.State == heartbeat.Alive {
			wait = soonest(wait, max(v.ExpireAt.Sub(s.now), 0))
		}
	}
	if s.use.conflict != nil {
		wait = soonest(wait, keyConflictRetry)
	}
	if s.use.keyTaken {
		wait = soonest(wait, keyTakenRetry)
	}
	return wait
}

// keyConflictRetry is how often a lock whose key another lock owns looks whether it is free.
const keyConflictRetry = 30 * time.Second

// keyTakenRetry is how soon the pass after a key was taken looks again, should the watch event
// of its own write not come first.
const keyTakenRetry = 100 * time.Millisecond

// keyConflict says which lock took lock's key first: by name within the namespace, and only as
// "another lock" across namespaces, which a namespace user is not told about. It names this
// lock's backend, not the store (an address) nor the other lock's backend.
func keyConflict(lock *locksv1alpha1.DistributedLock, owner keyledger.Owner, backend string) *registry.UnusableError {
	other := "Another DistributedLock"
	if owner.Namespace == lock.Namespace {
		other = "DistributedLock " + owner.Name
	}
	return &registry.UnusableError{Reason: locksv1alpha1.ReasonKeyConflict, Message: fmt.Sprintf(
		"%s resolves to the same key in the store of backend %s and took it first; this lock grants nothing until that lock is deleted (give this one another spec.key)",
		other, backend)}
}

// ledgerKey is the pass's key in its store, as the key ledger records it.
func ledgerKey(s *lockScope) keyledger.Key {
	return keyledger.Key{Store: s.use.store, Backend: s.use.name, Name: s.use.key}
}

// ownerOf is lock as a key ledger owner.
func ownerOf(lock *locksv1alpha1.DistributedLock) keyledger.Owner {
	return keyledger.Owner{Namespace: lock.Namespace, Name: lock.Name, UID: lock.UID}
}

// lockAlive tells the key ledger whether the lock that owns a key still exists. The cache
// answers when it has the lock; a lock it lacks is looked up on the API server, since a cache
// behind (this process's, or a replica's just elected) must not let a live owner's key be taken.
func lockAlive(cached, live client.Reader) keyledger.Alive {
	return func(ctx context.Context, owner keyledger.Owner) (bool, error) {
		key := client.ObjectKey{Namespace: owner.Namespace, Name: owner.Name}
		lock := &locksv1alpha1.DistributedLock{}
		err := cached.Get(ctx, key, lock)
		if err == nil && lock.UID == owner.UID {
			return true, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		switch err := live.Get(ctx, key, lock); {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, err
		}
		return lock.UID == owner.UID, nil
	}
}
