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
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/keyledger"
)

// load reads what a pass works from: the lock, its claims and their pods from the cache, and the
// lock's backend. It returns nil, without error, when the cache lags this process's own last
// write of the lock or of a claim.
func (r *Reconciler) load(ctx context.Context, name types.NamespacedName) (*lockScope, error) {
	s, err := r.readLock(ctx, name)
	if s == nil || err != nil {
		return nil, err
	}
	s.pods = map[string]*corev1.Pod{}
	fresh, err := r.readClaims(ctx, s, func(c *locksv1alpha1.LockClaim) error {
		s.claims = append(s.claims, c)
		if h := c.Spec.Holder; h != nil && h.PodName != "" {
			if err := r.loadPod(ctx, s, h.PodName); err != nil {
				return err
			}
		}
		return r.loadHeartbeat(ctx, s, c)
	})
	if !fresh || err != nil {
		return nil, err
	}
	s.claims = fifo(s.claims)
	if s.lock == nil {
		return s, nil
	}
	if s.unusable, err = r.readBackend(ctx, s); err != nil {
		return nil, err
	}
	if s.lock.DeletionTimestamp.IsZero() {
		if s.conflict, err = r.takeKey(ctx, s); err != nil {
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
	s.read = map[types.UID]*locksv1alpha1.LockClaim{}
	lock := &locksv1alpha1.DistributedLock{}
	switch err := r.Get(ctx, name, lock); {
	case apierrors.IsNotFound(err):
		return s, nil
	case err != nil:
		return nil, err
	case r.written.behind(lock):
		return nil, nil
	}
	s.lock, s.readLock = lock, lock.DeepCopy()
	// A lock last written before shared locks records its holder in status.holder: the pass
	// moves it into status.holders, and its write clears the old field.
	s.lock.Status.Holders, s.lock.Status.Holder = s.lock.Status.CurrentHolders(), nil
	s.ttl = time.Duration(lock.Spec.LeaseDurationSeconds) * time.Second
	return s, nil
}

// readClaims reads the lock's claims from the cache into s.read and hands each to take. fresh is
// false when the cache lags this process's own last write of one of them.
func (r *Reconciler) readClaims(ctx context.Context, s *lockScope, take func(*locksv1alpha1.LockClaim) error) (fresh bool, err error) {
	list := &locksv1alpha1.LockClaimList{}
	if err := r.List(ctx, list, client.InNamespace(s.name.Namespace), client.MatchingFields{indexClaimLock: s.name.Name}); err != nil {
		return false, err
	}
	for i := range list.Items {
		c := &list.Items[i]
		if r.written.behind(c) {
			return false, nil
		}
		s.read[c.UID] = c.DeepCopy()
		if err := take(c); err != nil {
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
	s.backendName, s.store, s.key = use.Name, use.Store, s.lock.BackendKey(use.KeyPolicy)
	var unusable *registry.UnusableError
	switch {
	case errors.As(err, &unusable):
		return unusable, nil
	case err != nil:
		return nil, err
	}
	s.backend = use.Session
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
		// The owner's deletion wakes this lock (keyledger); an owner deleted with its finalizer
		// removed by hand does not, hence the look now and then.
		s.wait = soonest(s.wait, keyConflictRetry)
		return keyConflict(s.lock, owner, s.backendName), nil
	case taken:
		s.keyTaken = true
		s.lock.Status.FencingToken++
		s.wait = soonest(s.wait, keyTakenRetry)
	}
	return nil, nil
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
	return keyledger.Key{Store: s.store, Backend: s.backendName, Name: s.key}
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

func (r *Reconciler) loadPod(ctx context.Context, s *lockScope, name string) error {
	if _, ok := s.pods[name]; ok {
		return nil
	}
	pod := &corev1.Pod{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: s.name.Namespace, Name: name}, pod); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	s.pods[name] = pod
	return nil
}

// reconcileOrphans serves the claims of a lock that does not exist: they wait for it to be
// created, a held one (possible only if the lock's finalizer was removed by hand) fails and is
// no longer renewed, so that its key expires on the backend, and a deleted one is let go.
func (r *Reconciler) reconcileOrphans(ctx context.Context, s *lockScope) error {
	r.lowMu.Lock()
	delete(r.lowRounds, s.name)
	r.lowMu.Unlock()
	msg := fmt.Sprintf("DistributedLock %s does not exist in namespace %s; create it or fix spec.lockName", s.name.Name, s.name.Namespace)
	var errs []error
	for _, c := range s.claims {
		key := client.ObjectKeyFromObject(c)
		switch {
		case !c.DeletionTimestamp.IsZero():
			r.Renewer.Forget(key)
			errs = append(errs, r.removeFinalizer(ctx, c))
			continue
		case isHeld(c):
			r.Renewer.Forget(key)
			markEnded(c, locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound, msg, s.now)
		case !isFinal(c.Status.Phase):
			markWaiting(c, 0, false, locksv1alpha1.ReasonLockNotFound, msg)
		}
		errs = append(errs, r.writeClaim(ctx, s, c))
	}
	return errors.Join(errs...)
}

// removeFinalizer lets a deleted claim go.
func (r *Reconciler) removeFinalizer(ctx context.Context, c *locksv1alpha1.LockClaim) error {
	if !controllerutil.RemoveFinalizer(c, locksv1alpha1.Finalizer) {
		return nil
	}
	r.written.forget(c.UID)
	return client.IgnoreNotFound(r.Update(ctx, c))
}
