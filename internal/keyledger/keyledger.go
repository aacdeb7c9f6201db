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

// Package keyledger records which DistributedLock owns each backend key, so that two locks
// that resolve to one key never both grant it.
//
// Two DistributedLocks can name one key: two locks of a namespace with the same spec.key, or two
// namespaces' locks on a Verbatim backend. On an external store the store itself excludes, but
// each lock would issue its own fencing tokens, which could then go backwards between holders;
// on the built-in backend each lock's own record is the hold, so both would grant. The ledger
// makes one of them the owner: one Lease per (backend, key) in the controller's namespace, named
// after a hash of the two, created by the first lock that uses the key. Creation is the
// API server's compare-and-swap, so the first lock to get there wins even when both were
// created at once; a later lock finds the Lease and reports the conflict. The Lease is deleted
// with its lock, and a lock that finds it owned by a lock that no longer exists (its finalizer
// was removed by hand) takes it over, again by a preconditioned write.
//
// The ledger costs one create in a lock's life and one delete at its end: a lock's ownership is
// remembered in memory once confirmed, since only the owner's deletion can end it.
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
	// BackendAnnotation, KeyAnnotation and LockAnnotation say, for people, which backend and key
	// a ledger Lease is for and which lock (namespace/name) owns it; the owner's UID is the
	// Lease's holderIdentity.
	BackendAnnotation = "locks.lockwarden.io/backend"
	KeyAnnotation     = "locks.lockwarden.io/key"
	LockAnnotation    = "locks.lockwarden.io/lock"
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

// LeaseName is the name of the ledger Lease of key on backend.
func LeaseName(backend, key string) string {
	sum := sha256.Sum256([]byte(backend + "\x00" + key))
	return "lockwarden-key-" + hex.EncodeToString(sum[:20])
}

// Take makes lock the owner of key on backend unless another live lock owns it, and returns the
// owner: lock itself, or the other lock. taken says that the key passed to lock in this call
// (it was free, or its owner was gone): the lock's tokens must then continue above every token
// an earlier owner of the key issued, which the caller sees to.
func (l *Ledger) Take(ctx context.Context, backend, key string, lock Owner) (owner Owner, taken bool, err error) {
	name := LeaseName(backend, key)
	if l.remembered(name, lock.UID) {
		return lock, false, nil
	}
	for range maxAttempts {
		lease := &coordinationv1.Lease{}
		err := l.reader.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: name}, lease)
		switch {
		case apierrors.IsNotFound(err):
			err = l.writer.Create(ctx, newLease(l.namespace, name, backend, key, lock))
			if apierrors.IsAlreadyExists(err) {
				continue // another lock created it first: read whose it is
			}
			if err != nil {
				return Owner{}, false, fmt.Errorf("recording lock %s as the owner of key %q: %w", lock, key, err)
			}
			l.remember(name, lock)
			return lock, true, nil
		case err != nil:
			return Owner{}, false, fmt.Errorf("reading the owner of key %q: %w", key, err)
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
		setOwner(lease, backend, key, lock)
		switch err := l.writer.Update(ctx, lease); {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			continue
		case err != nil:
			return Owner{}, false, fmt.Errorf("taking over key %q from lock %s, which no longer exists: %w", key, owner, err)
		}
		l.remember(name, lock)
		return lock, true, nil
	}
	return Owner{}, false, fmt.Errorf("recording the owner of key %q: other writers kept changing it", key)
}

// Release lets key on backend go if lock owns it, and wakes the locks that waited for it.
func (l *Ledger) Release(ctx context.Context, backend, key string, lock Owner) error {
	name := LeaseName(backend, key)
	lease := &coordinationv1.Lease{}
	switch err := l.reader.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: name}, lease); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading the owner of key %q: %w", key, err)
	case ownerOf(lease).UID == lock.UID:
		err := l.writer.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("letting key %q go: %w", key, err)
		}
	}
	l.mu.Lock()
	if l.owned[name] == lock.UID {
		delete(l.owned, name)
	}
	waiting := l.waiting[name]
	delete(l.waiting, name)
	wake := l.wake
	l.mu.Unlock()
	for w := range waiting {
		wake(w)
	}
	return nil
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

func newLease(namespace, name, backend, key string, lock Owner) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{LedgerLabel: "true"}}}
	setOwner(lease, backend, key, lock)
	return lease
}

func setOwner(lease *coordinationv1.Lease, backend, key string, lock Owner) {
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, BackendAnnotation, backend)
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, KeyAnnotation, key)
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
