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

package kubernetes

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// TryAcquire implements backends.Backend: it creates key's Lease, refreshes it for the same
// identity, or takes it over once expired, with a compare-and-swap on its resourceVersion. It
// costs two or three requests.
func (b *Backend) TryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	if err := b.usable(); err != nil {
		return backends.Lease{}, err
	}
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	// Fast path: a free key usually has no Lease at all (release deletes it), so try to create
	// one straight away; an existing Lease makes the create fail and the loop below decides.
	now := b.clock.Now()
	first := b.hold(nil, key, identity, ttl, now, false)
	switch err := b.create(ctx, first); {
	case err == nil:
		b.wanted.note(key, identity, now)
		return leaseOf(key, first, expireTime(first, nil), ttl), nil
	case !apierrors.IsAlreadyExists(err):
		return backends.Lease{}, fmt.Errorf("acquire %q: %w", key, err)
	}
	for range maxAttempts {
		// The time is taken before the reads: a session renewed after we read it could make
		// the lock valid again, but only from a renewal time later than this one.
		now := b.clock.Now()
		lock, expire, err := b.observe(ctx, key)
		if err != nil {
			return backends.Lease{}, fmt.Errorf("acquire %q: %w", key, err)
		}
		holder := holderOf(lock)
		held := holder != "" && now.Before(expire)
		if held && holder != identity {
			return backends.Lease{}, &backends.LockedError{Key: key, Holder: holder, ExpireTime: expire}
		}
		next := b.hold(lock, key, identity, ttl, now, held)
		if lock == nil {
			err = b.create(ctx, next)
		} else {
			err = b.update(ctx, next)
		}
		switch {
		case err == nil:
			b.wanted.note(key, identity, now)
			return leaseOf(key, next, expireTime(next, nil), ttl), nil
		case !lostRace(err):
			return backends.Lease{}, fmt.Errorf("acquire %q: %w", key, err)
		}
		// Someone else wrote the Lease since we read it: look again.
	}
	return backends.Lease{}, fmt.Errorf("acquire %q: other writers kept changing the lock: %w", key, &backends.LockedError{Key: key})
}

// hold returns lock (a new Lease when nil) rewritten so that identity holds key from now on for
// ttl, in this session. continuing says identity holds it already, so the hold keeps its
// acquireTime.
func (b *Backend) hold(lock *coordinationv1.Lease, key, identity string, ttl time.Duration, now time.Time, continuing bool) *coordinationv1.Lease {
	next := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName(key), Namespace: b.namespace}}
	transitions := int32(0)
	if lock != nil {
		next = lock.DeepCopy()
		transitions = ptr.Deref(lock.Spec.LeaseTransitions, 0)
		if holderOf(lock) != identity {
			transitions++
		}
	}
	metav1.SetMetaDataLabel(&next.ObjectMeta, ManagedByLabel, ManagedByValue)
	metav1.SetMetaDataLabel(&next.ObjectMeta, SessionLabel, b.session)
	metav1.SetMetaDataAnnotation(&next.ObjectMeta, KeyAnnotation, key)

	stamp := metav1.NewMicroTime(now)
	spec := &next.Spec
	if !continuing || spec.AcquireTime == nil {
		spec.AcquireTime = &stamp
	}
	spec.RenewTime = &stamp
	spec.HolderIdentity = ptr.To(identity)
	spec.LeaseDurationSeconds = ptr.To(durationSeconds(ttl))
	spec.LeaseTransitions = ptr.To(transitions)
	return next
}

// Release implements backends.Backend: it deletes key's Lease if lease.Identity holds it, with
// its resourceVersion as precondition so that it never deletes a hold it did not see.
func (b *Backend) Release(ctx context.Context, lease backends.Lease) error {
	if err := b.usable(); err != nil {
		return err
	}
	// Fast path: the Lease is still exactly the version this hold last wrote or saw, so it is
	// ours; delete it under that resourceVersion. Any change since (expiry and takeover included)
	// makes the delete fail and the loop below decide.
	if rv, ok := resourceVersionOf(lease.Version, lease.Identity); ok {
		current := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Namespace: b.namespace, Name: LeaseName(lease.Key), ResourceVersion: rv}}
		err := b.call(ctx, fmt.Sprintf("cannot delete Lease %s/%s", b.namespace, current.Name), func(ctx context.Context) error {
			return b.client.Delete(ctx, current, client.Preconditions{ResourceVersion: &rv})
		})
		switch {
		case err == nil:
			return nil
		case !lostRace(err):
			return fmt.Errorf("release %q: %w", lease.Key, err)
		}
	}
	for range maxAttempts {
		now := b.clock.Now()
		lock, expire, err := b.observe(ctx, lease.Key)
		if err != nil {
			return fmt.Errorf("release %q: %w", lease.Key, err)
		}
		holder := holderOf(lock)
		switch {
		case holder == "":
			return nil
		case holder != lease.Identity && !now.Before(expire):
			// Free since it expired; not ours to delete.
			return nil
		case holder != lease.Identity:
			return fmt.Errorf("release %q for %q: held by %q: %w", lease.Key, lease.Identity, holder, backends.ErrNotHeld)
		}
		err = b.remove(ctx, lock)
		switch {
		case err == nil:
			return nil
		case !lostRace(err):
			return fmt.Errorf("release %q: %w", lease.Key, err)
		}
	}
	return fmt.Errorf("release %q: other writers kept changing the lock; try again", lease.Key)
}

// Inspect implements backends.Backend. TTL in the result is the Lease's leaseDurationSeconds.
func (b *Backend) Inspect(ctx context.Context, key string) (backends.Lease, error) {
	if err := b.usable(); err != nil {
		return backends.Lease{}, err
	}
	now := b.clock.Now()
	lock, expire, err := b.observe(ctx, key)
	if err != nil {
		return backends.Lease{}, fmt.Errorf("inspect %q: %w", key, err)
	}
	if holderOf(lock) == "" || !now.Before(expire) {
		return backends.Lease{}, fmt.Errorf("inspect %q: %w", key, backends.ErrNotHeld)
	}
	ttl := time.Duration(ptr.Deref(lock.Spec.LeaseDurationSeconds, 0)) * time.Second
	return leaseOf(key, lock, expire, ttl), nil
}

// observe reads key's lock Lease (nil when there is none) and, when it has a holder, the session
// Lease that may extend it, and returns when the lock expires.
func (b *Backend) observe(ctx context.Context, key string) (*coordinationv1.Lease, time.Time, error) {
	lock, err := b.get(ctx, LeaseName(key))
	if err != nil || lock == nil {
		return nil, time.Time{}, err
	}
	if got := lock.Annotations[KeyAnnotation]; got != key {
		//nolint:staticcheck // ST1005: Lease is the Kubernetes kind's name, capitalised as kubectl prints it.
		return nil, time.Time{}, fmt.Errorf("Lease %s/%s is not the lock of this key (its %s annotation is %q); delete it if nothing else owns it",
			b.namespace, lock.Name, KeyAnnotation, got)
	}
	if holderOf(lock) == "" {
		return lock, time.Time{}, nil
	}
	var session *coordinationv1.Lease
	if name := lock.Labels[SessionLabel]; name != "" {
		if session, err = b.get(ctx, name); err != nil {
			return nil, time.Time{}, err
		}
	}
	return lock, expireTime(lock, session), nil
}
