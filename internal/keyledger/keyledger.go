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

// Package keyledger records which DistributedLock owns each key in each store, so that two locks
// that resolve to one key never both grant it.
//
// Two DistributedLocks can name one key: two locks of a namespace with the same spec.key, two
// namespaces' locks on a Verbatim backend, or two locks on two LockBackends that reach one store
// (two LockBackends for one Redis server and db; a new LockBackend made to change keyPolicy). On
// an external store the store itself excludes, but each lock would issue its own fencing tokens,
// which could then go backwards between holders; on the built-in backend each lock's own record
// is the hold, so both would grant. The ledger makes one of them the owner: one Lease per (store,
// key) in the controller's namespace, named after a hash of the two, created by the first lock
// that uses the key. The store is the store's identity (registry.StoreOf), not the LockBackend's
// name, so that every LockBackend reaching one store shares the rule (docs/design.md §2). Creation is the
// API server's compare-and-swap, so the first lock to get there wins even when both were created
// at once; a later lock finds the Lease and reports the conflict. The Lease is deleted with its
// lock, and a lock that finds it owned by a lock that no longer exists (its finalizer was removed
// by hand) takes it over, again by a preconditioned write.
//
// Earlier versions named the Lease after the LockBackend's name and the key (legacyLeaseName).
// Such a Lease still says who owns the key: before a lock creates the store's Lease it reads the
// legacy one, and yields to a live other owner named there, or, when it is the owner itself,
// carries its ownership over to the store's Lease (its tokens go on as before) and deletes the
// legacy Lease. So an upgrade never hands a key to whichever lock's pass runs first.
//
// The ledger costs one create (and one read of the legacy name) in a lock's life and one delete at
// its end: a lock's ownership is remembered in memory once confirmed, since only the owner's
// deletion can end it. Each Lease is labelled with its owner's UID, so that the lock's end finds
// every Lease it owns, also those of a store its LockBackend pointed at before an edit.
package keyledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// LedgerLabel marks the ledger's Leases (kubectl get leases -l locks.lockwarden.io/key-ledger).
	LedgerLabel = "locks.lockwarden.io/key-ledger"
	// OwnerLabel is the owner lock's UID, by which the lock's end finds every Lease it owns.
	OwnerLabel = "locks.lockwarden.io/key-ledger-owner"
	// BackendAnnotation says, for people, which LockBackend the owner of a ledger Lease reaches
	// the store through. The owner's UID is the Lease's holderIdentity.
	BackendAnnotation = "locks.lockwarden.io/backend"
	// StoreAnnotation says, for people, which store (registry.StoreOf) a ledger Lease is for.
	StoreAnnotation = "locks.lockwarden.io/store"
	// KeyAnnotation says, for people, which key a ledger Lease is for.
	KeyAnnotation = "locks.lockwarden.io/key"
	// LockAnnotation says, for people, which lock (namespace/name) owns a ledger Lease.
	LockAnnotation = "locks.lockwarden.io/lock"
)

// maxAttempts bounds the retries of one Take when other writers keep changing the Lease.
const maxAttempts = 3

// Owner is a DistributedLock that owns, or asks for, a key.
type Owner struct {
	Namespace, Name string
	UID             types.UID
}

// String is namespace/name.
func (o Owner) String() string { return o.Namespace + "/" + o.Name }

// Key is one key in one store, as a lock reaches it.
type Key struct {
	// Store is the store's identity (registry.StoreOf): the same for every LockBackend that
	// reaches the store. The ledger Lease is named after it.
	Store string
	// Backend names the LockBackend the lock reaches the store through: shown on the Lease for
	// people, and the name earlier versions gave the Lease (legacyLeaseName).
	Backend string
	// Name is the key on the store.
	Name string
}

// Alive tells whether owner still exists (the same name with the same UID). A lock being deleted
// is still alive: it may still hold its key until its finalizer ends.
type Alive func(ctx context.Context, owner Owner) (bool, error)

// Ledger reads and writes the ledger Leases.
type Ledger struct {
	// reader must read from the API server, not a cache: a cache could show a key free that
	// another lock took a moment ago.
	reader    client.Reader
	writer    client.Writer
	namespace string
	alive     Alive

	mu sync.Mutex
	// owned maps a ledger Lease's name to the lock this process confirmed as its owner.
	owned map[string]types.UID
	// waiting maps a ledger Lease's name to the locks that found it owned by another.
	waiting map[string]map[types.NamespacedName]bool
	// wake is called with each waiting lock when a key's owner lets it go.
	wake func(types.NamespacedName)
}

// New returns a ledger keeping its Leases in namespace; alive tells whether an owner lock still
// exists.
func New(reader client.Reader, writer client.Writer, namespace string, alive Alive) *Ledger {
	return &Ledger{reader: reader, writer: writer, namespace: namespace, alive: alive, owned: map[string]types.UID{},
		waiting: map[string]map[types.NamespacedName]bool{}, wake: func(types.NamespacedName) {}}
}

// OnRelease sets the function called with each lock that waited for a key its owner let go.
func (l *Ledger) OnRelease(wake func(types.NamespacedName)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wake = wake
}

// LeaseName is the name of the ledger Lease of key in store.
func LeaseName(store, key string) string {
	return hashedName("store\x00" + store + "\x00" + key)
}

// legacyLeaseName is the name earlier versions gave the ledger Lease of key on the LockBackend
// called backend; Take and Release still read it, so that an upgrade keeps every key's owner.
func legacyLeaseName(backend, key string) string {
	return hashedName(backend + "\x00" + key)
}

// hashedName is a Lease name for s: a hash, since keys may hold any character.
func hashedName(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "lockwarden-key-" + hex.EncodeToString(sum[:20])
}

// Take makes lock the owner of k unless another live lock owns it, and returns the owner: lock
// itself, or the other lock. taken says that the key passed to lock in this call (it was free, or
// its owner was gone): the lock's tokens must then continue above every token an earlier owner of
// the key issued, which the caller sees to.
func (l *Ledger) Take(ctx context.Context, k Key, lock Owner) (owner Owner, taken bool, err error) {
	name := LeaseName(k.Store, k.Name)
	if l.remembered(name, lock.UID) {
		return lock, false, nil
	}
	for range maxAttempts {
		lease := &coordinationv1.Lease{}
		err := l.reader.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: name}, lease)
		switch {
		case apierrors.IsNotFound(err):
			owner, taken, retry, err := l.create(ctx, name, k, lock)
			if retry {
				continue // another lock created it first: read whose it is
			}
			return owner, taken, err
		case err != nil:
			return Owner{}, false, fmt.Errorf("reading the owner of key %q: %w", k.Name, err)
		}
		owner := ownerOf(lease)
		if owner.UID == lock.UID {
			l.remember(name, lock)
			return lock, false, nil
		}
		alive, err := l.alive(ctx, owner)
		if err != nil {
			return Owner{}, false, err
		}
		if alive {
			l.await(name, lock)
			return owner, false, nil
		}
		// The owner is gone without letting the key go: take it over, by a write
		// preconditioned on what was read.
		setOwner(lease, k, lock)
		switch err := l.writer.Update(ctx, lease); {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			continue
		case err != nil:
			return Owner{}, false, fmt.Errorf("taking over key %q from lock %s, which no longer exists: %w", k.Name, owner, err)
		}
		l.remember(name, lock)
		return lock, true, nil
	}
	return Owner{}, false, fmt.Errorf("recording the owner of key %q: other writers kept changing it", k.Name)
}

// create records lock as the owner of k in the Lease called name, which does not exist, unless
// the legacy Lease names another live owner. retry says another lock created the Lease first.
func (l *Ledger) create(ctx context.Context, name string, k Key, lock Owner) (owner Owner, taken, retry bool, err error) {
	legacy, err := l.legacy(ctx, k)
	if err != nil {
		return Owner{}, false, false, err
	}
	own := legacy != nil && ownerOf(legacy).UID == lock.UID
	if legacy != nil && !own {
		prev := ownerOf(legacy)
		switch alive, err := l.alive(ctx, prev); {
		case err != nil:
			return Owner{}, false, false, err
		case alive:
			// A lock that owned the key before the upgrade, and has not run since, keeps it.
			l.await(name, lock)
			return prev, false, false, nil
		}
	}
	err = l.writer.Create(ctx, newLease(l.namespace, name, k, lock))
	if apierrors.IsAlreadyExists(err) {
		return Owner{}, false, true, nil
	}
	if err != nil {
		return Owner{}, false, false, fmt.Errorf("recording lock %s as the owner of key %q: %w", lock, k.Name, err)
	}
	l.remember(name, lock)
	if legacy != nil {
		// Best effort: the store's Lease now says who owns the key, and should this delete
		// fail, Release deletes the legacy Lease at the lock's end.
		_ = l.deleteLease(ctx, legacy)
	}
	// Its own legacy ownership carries over, and its tokens go on; a free key, or a gone
	// owner's, passes to it now.
	return lock, !own, false, nil
}

// legacy returns the Lease an earlier version kept for k, nil when there is none.
func (l *Ledger) legacy(ctx context.Context, k Key) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	switch err := l.reader.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: legacyLeaseName(k.Backend, k.Name)}, lease); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the earlier owner of key %q: %w", k.Name, err)
	}
	return lease, nil
}

// Release lets k go if lock owns it, and wakes the locks that waited for it. It deletes every
// ledger Lease lock owns: k's in its store, those of stores its LockBackend pointed at before an
// edit, and its legacy Lease.
func (l *Ledger) Release(ctx context.Context, k Key, lock Owner) error {
	leases := &coordinationv1.LeaseList{}
	if err := l.reader.List(ctx, leases, client.InNamespace(l.namespace),
		client.MatchingLabels{LedgerLabel: "true", OwnerLabel: string(lock.UID)}); err != nil {
		return fmt.Errorf("reading the keys lock %s owns: %w", lock, err)
	}
	legacy, err := l.legacy(ctx, k)
	if err != nil {
		return err
	}
	if legacy != nil {
		leases.Items = append(leases.Items, *legacy)
	}
	names := []string{LeaseName(k.Store, k.Name)}
	for i := range leases.Items {
		lease := &leases.Items[i]
		if ownerOf(lease).UID != lock.UID {
			continue
		}
		if err := l.deleteLease(ctx, lease); err != nil {
			return err
		}
		names = append(names, lease.Name)
	}
	l.forget(names, lock)
	return nil
}

// deleteLease deletes lease as read; a Lease changed since is not deleted (a conflict error),
// so that the caller reads it again.
func (l *Ledger) deleteLease(ctx context.Context, lease *coordinationv1.Lease) error {
	err := l.writer.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("letting key %q go: %w", lease.Annotations[KeyAnnotation], err)
	}
	return nil
}

// forget drops lock's ownership of the Leases called names from memory and wakes the locks that
// waited for them.
func (l *Ledger) forget(names []string, lock Owner) {
	l.mu.Lock()
	var woken []types.NamespacedName
	for _, name := range names {
		if l.owned[name] == lock.UID {
			delete(l.owned, name)
		}
		for w := range l.waiting[name] {
			woken = append(woken, w)
		}
		delete(l.waiting, name)
	}
	wake := l.wake
	l.mu.Unlock()
	for _, w := range woken {
		wake(w)
	}
}

func (l *Ledger) remembered(name string, uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owned[name] == uid
}

func (l *Ledger) remember(name string, lock Owner) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.owned[name] = lock.UID
	delete(l.waiting[name], types.NamespacedName{Namespace: lock.Namespace, Name: lock.Name})
}

func (l *Ledger) await(name string, lock Owner) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting[name] == nil {
		l.waiting[name] = map[types.NamespacedName]bool{}
	}
	l.waiting[name][types.NamespacedName{Namespace: lock.Namespace, Name: lock.Name}] = true
}

func newLease(namespace, name string, k Key, lock Owner) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{LedgerLabel: "true"}}}
	setOwner(lease, k, lock)
	return lease
}

func setOwner(lease *coordinationv1.Lease, k Key, lock Owner) {
	metav1.SetMetaDataLabel(&lease.ObjectMeta, OwnerLabel, string(lock.UID))
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, BackendAnnotation, k.Backend)
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, StoreAnnotation, k.Store)
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, KeyAnnotation, k.Name)
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, LockAnnotation, lock.String())
	uid := string(lock.UID)
	lease.Spec.HolderIdentity = &uid
}

func ownerOf(lease *coordinationv1.Lease) Owner {
	var o Owner
	if lease.Spec.HolderIdentity != nil {
		o.UID = types.UID(*lease.Spec.HolderIdentity)
	}
	o.Namespace, o.Name, _ = strings.Cut(lease.Annotations[LockAnnotation], "/")
	return o
}
