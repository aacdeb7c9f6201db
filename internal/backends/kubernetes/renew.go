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
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// Renew implements backends.Backend. In the steady state it sends two requests whatever the
// number of leases: a LIST of this session's Leases and an UPDATE of the session Lease's
// renewTime. Leases held by the same identity under another session (a previous controller's)
// are moved into this one with one compare-and-swap UPDATE each, once; a lease whose TTL changed
// costs one UPDATE too. When some lease is missing from the session, one more LIST of all of
// lockwarden's Leases tells lost locks from locks held under another session.
//
// No lock comes back to life: expired lock Leases of this session are deleted before the session
// write, and a lock that expired while the write was in flight is reported lost and deleted.
func (b *Backend) Renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) (renewed, lost []backends.Lease, err error) {
	if err := b.usable(); err != nil {
		return nil, nil, err
	}
	if len(leases) == 0 {
		return nil, nil, nil
	}
	if err := checkTTL(ttl); err != nil {
		return nil, nil, err
	}
	renewed, lost, err = b.renew(ctx, leases, ttl)
	if err != nil {
		return nil, nil, fmt.Errorf("renew: %w", err)
	}
	return renewed, lost, nil
}

// pending is a lease still held when the renewal began.
type pending struct {
	// lease is the lease as the caller gave it.
	lease backends.Lease
	// lock is its lock Lease as listed.
	lock *coordinationv1.Lease
	// expire is when it expires unless this renewal extends it.
	expire time.Time
}

func (b *Backend) renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) (renewed, lost []backends.Lease, err error) {
	start := b.clock.Now()
	asked := map[string]bool{}
	for _, l := range leases {
		b.wanted.note(l.Key, l.Identity, start)
		asked[LeaseName(l.Key)] = true
	}
	seen, err := b.view(ctx, client.MatchingLabels{SessionLabel: b.session})
	if err != nil {
		return nil, nil, err
	}
	for _, l := range leases {
		if seen.locks[LeaseName(l.Key)] == nil {
			// Lost, or held under another session: only the wider list tells.
			if seen, err = b.view(ctx, client.MatchingLabels{ManagedByLabel: ManagedByValue}); err != nil {
				return nil, nil, err
			}
			break
		}
	}

	want := durationSeconds(ttl)
	var bySession, byLock []pending
	for _, l := range leases {
		lock := seen.locks[LeaseName(l.Key)]
		if lock == nil || lock.Annotations[KeyAnnotation] != l.Key || holderOf(lock) != l.Identity {
			lost = append(lost, l)
			continue
		}
		p := pending{lease: l, lock: lock, expire: seen.expireTime(lock)}
		switch {
		case !start.Before(p.expire):
			lost = append(lost, l) // deleted below if it is this session's
		case lock.Labels[SessionLabel] != b.session || ptr.Deref(lock.Spec.LeaseDurationSeconds, 0) != want:
			byLock = append(byLock, p)
		default:
			bySession = append(bySession, p)
		}
	}

	// Delete this session's expired locks, asked about or not, before the session write below
	// could revive them.
	ours := seen.sessionLocks(b.session)
	inSession := map[string]bool{}
	for _, lock := range ours {
		inSession[lock.Name] = true
		if !start.Before(seen.expireTime(lock)) {
			if err := b.remove(ctx, lock); err != nil && !lostRace(err) {
				return nil, nil, err
			}
		}
	}
	// Nor must it extend, for ever, a held lock that nobody asks for any more.
	for _, lock := range ours {
		if expire := seen.expireTime(lock); !asked[lock.Name] && start.Before(expire) && !b.wanted.wants(lock, start) {
			b.detach(ctx, lock, expire)
		}
	}
	b.wanted.forgetAllBut(inSession, start)

	for _, p := range byLock {
		l, held, err := b.refresh(ctx, p, ttl)
		if err != nil {
			return nil, nil, err
		}
		if held {
			renewed = append(renewed, l)
		} else {
			lost = append(lost, p.lease)
		}
	}

	if len(bySession) == 0 {
		return renewed, lost, nil
	}
	renewTime, err := b.renewSession(ctx, seen.sessions[b.session])
	if err != nil {
		return nil, nil, err
	}
	// A lock that expired before the write returned may have been taken meanwhile (a takeover
	// does not see the session write), and if not, the write revived it: either way it is lost.
	after := b.clock.Now()
	for _, p := range bySession {
		if !after.Before(p.expire) {
			lost = append(lost, p.lease)
			continue
		}
		expire := maxTime(microTime(p.lock.Spec.RenewTime), renewTime).Add(time.Duration(want) * time.Second)
		renewed = append(renewed, leaseOf(p.lease.Key, p.lock, expire, ttl))
	}
	for _, lock := range ours {
		if expire := seen.expireTime(lock); start.Before(expire) && !after.Before(expire) {
			// Best effort: the lock is reported lost (or not asked about) either way, and a
			// failure here leaves it held until its TTL, never held by two.
			if err := b.remove(ctx, lock); err != nil && !lostRace(err) {
				logf.FromContext(ctx).Error(err, "Could not delete a lock Lease that expired during renewal", "lease", klog.KObj(lock))
			}
		}
	}
	return renewed, lost, nil
}

// detach takes lock, which expires at expire, out of the session without changing its expiry:
// later session renewals no longer extend it, so it expires unless a holder takes it up again. A
// failure is only logged: the lock stays in the session and the next renewal tries again, and a
// lost race means that someone wrote the lock since, which is asking for it.
func (b *Backend) detach(ctx context.Context, lock *coordinationv1.Lease, expire time.Time) {
	next := lock.DeepCopy()
	delete(next.Labels, SessionLabel)
	last := expire.Add(-time.Duration(ptr.Deref(lock.Spec.LeaseDurationSeconds, 0)) * time.Second)
	next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(last))
	err := b.update(ctx, next)
	log := logf.FromContext(ctx)
	switch {
	case err == nil:
		log.Info("Stopped renewing a lock that nobody asked for within its TTL; it expires unless its holder takes it up again",
			"lease", klog.KObj(lock), "holder", holderOf(lock), "expireTime", expire)
	case !lostRace(err):
		log.Error(err, "Could not take a lock that nobody asks for out of the session; trying again at the next renewal", "lease", klog.KObj(lock))
	}
}

// refresh renews one lease with its own compare-and-swap UPDATE, moving it into this session
// and setting its TTL. held is false when the lock turns out to be no longer the lease's.
func (b *Backend) refresh(ctx context.Context, p pending, ttl time.Duration) (backends.Lease, bool, error) {
	next := b.hold(p.lock, p.lease.Key, p.lease.Identity, ttl, b.clock.Now(), true)
	err := b.update(ctx, next)
	if err == nil {
		return leaseOf(p.lease.Key, next, expireTime(next, nil), ttl), true, nil
	}
	if !lostRace(err) {
		return backends.Lease{}, false, err
	}
	// Changed since the LIST: see who holds it now.
	cur, err := b.Inspect(ctx, p.lease.Key)
	switch {
	case errors.Is(err, backends.ErrNotHeld):
		return backends.Lease{}, false, nil
	case err != nil:
		return backends.Lease{}, false, err
	}
	return cur, cur.Identity == p.lease.Identity, nil
}

// renewSession sets the session Lease's renewTime to now (never back in time, should another
// replica of the same session have written a later one) and returns the time written.
// seen is the session Lease as listed, nil if it did not exist.
func (b *Backend) renewSession(ctx context.Context, seen *coordinationv1.Lease) (time.Time, error) {
	for range maxAttempts {
		now := metav1.NewMicroTime(b.clock.Now())
		var err error
		if seen == nil {
			session := b.newSession()
			session.Spec.AcquireTime, session.Spec.RenewTime = &now, &now
			if err = b.create(ctx, session); err == nil {
				return session.Spec.RenewTime.Time, nil
			}
		} else {
			session := seen.DeepCopy()
			if session.Spec.RenewTime == nil || now.After(session.Spec.RenewTime.Time) {
				session.Spec.RenewTime = &now
			}
			if err = b.update(ctx, session); err == nil {
				return session.Spec.RenewTime.Time, nil
			}
		}
		if !lostRace(err) {
			return time.Time{}, err
		}
		// Another replica of this session wrote it: read it again.
		if seen, err = b.get(ctx, b.session); err != nil {
			return time.Time{}, err
		}
	}
	return time.Time{}, fmt.Errorf("cannot update Lease %s/%s: other writers kept changing it", b.namespace, b.session)
}

// leaseView is a LIST of Leases, sorted into locks and sessions.
type leaseView struct {
	// locks are the lock Leases (those with KeyAnnotation), by name.
	locks map[string]*coordinationv1.Lease
	// sessions are the session Leases, by name.
	sessions map[string]*coordinationv1.Lease
}

// view lists the Leases with labels.
func (b *Backend) view(ctx context.Context, labels client.MatchingLabels) (leaseView, error) {
	items, err := b.list(ctx, labels)
	if err != nil {
		return leaseView{}, err
	}
	v := leaseView{locks: map[string]*coordinationv1.Lease{}, sessions: map[string]*coordinationv1.Lease{}}
	for i := range items {
		lease := &items[i]
		if _, ok := lease.Annotations[KeyAnnotation]; ok {
			v.locks[lease.Name] = lease
		} else {
			v.sessions[lease.Name] = lease
		}
	}
	return v, nil
}

// expireTime is when lock expires, given the sessions in the view.
func (v leaseView) expireTime(lock *coordinationv1.Lease) time.Time {
	return expireTime(lock, v.sessions[lock.Labels[SessionLabel]])
}

// sessionLocks returns the lock Leases that session keeps alive.
func (v leaseView) sessionLocks(session string) []*coordinationv1.Lease {
	var out []*coordinationv1.Lease
	for _, lock := range v.locks {
		if lock.Labels[SessionLabel] == session {
			out = append(out, lock)
		}
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
