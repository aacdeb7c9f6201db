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

	"github.com/lockwarden/lockwarden/internal/backends"
)

const (
	// GapsAnnotation lists, on a record-mode session Lease, the gaps between its renewals that
	// were long enough to let a hold lapse (see history).
	GapsAnnotation = "locks.lockwarden.io/renewal-gaps"
	// CompleteSinceAnnotation says from when GapsAnnotation lists every such gap.
	CompleteSinceAnnotation = "locks.lockwarden.io/renewal-gaps-complete-since"
)

// Records is the built-in backend in record mode: a lock's holds live in the DistributedLock's
// own status, and the controller's compare-and-swap of that status is what excludes. So a grant,
// a handoff and a release cost no request here: TryAcquire and Release only describe the hold.
// What Records keeps is the session: one Lease whose renewal keeps every hold of the session
// alive (Renew costs one read and one write however many holds it renews), and the history of
// its renewals, from which HoldAlive tells a controller that resumes holds (after a restart or a
// leader change) whether a hold lapsed while nobody renewed it.
//
// The keys of record-mode locks cannot be shared with clients outside lockwarden (there is no
// object to share): Backend, with a Lease per key, is for that.
type Records struct {
	b *Backend
}

var (
	_ backends.Backend      = (*Records)(nil)
	_ backends.RecordKeeper = (*Records)(nil)
)

// NewRecords returns a record-mode session that keeps its session Lease in cfg.Namespace.
func NewRecords(cfg Config, opts ...Option) (*Records, error) {
	b, err := New(cfg, opts...)
	if err != nil {
		return nil, err
	}
	return &Records{b: b}, nil
}

// KeepsHoldsInLockRecords implements backends.RecordKeeper.
func (r *Records) KeepsHoldsInLockRecords() {}

// TryAcquire implements backends.Backend. It sends nothing: the caller records the hold in the
// lock's status by a compare-and-swap, which is what excludes other holders.
func (r *Records) TryAcquire(_ context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	if err := r.b.usable(); err != nil {
		return backends.Lease{}, err
	}
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	now := r.b.clock.Now()
	return backends.Lease{Key: key, Identity: identity, TTL: ttl, AcquireTime: now, ExpireTime: now.Add(ttl)}, nil
}

// Release implements backends.Backend. It sends nothing: the caller clears the hold from the
// lock's status.
func (r *Records) Release(context.Context, backends.Lease) error { return r.b.usable() }

// Inspect implements backends.Backend. Holds are in the lock records, which only the controller
// reads: Inspect knows of none.
func (r *Records) Inspect(_ context.Context, key string) (backends.Lease, error) {
	return backends.Lease{}, fmt.Errorf("inspect %q: holds of the built-in backend are in the DistributedLock's status: %w", key, backends.ErrNotHeld)
}

// Ping implements backends.Backend: it lists and writes the session Lease.
func (r *Records) Ping(ctx context.Context) error { return r.b.Ping(ctx) }

// Close implements backends.Backend.
func (r *Records) Close(ctx context.Context) error { return r.b.Close(ctx) }

// RoundTrips returns how many API requests the session has sent.
func (r *Records) RoundTrips() int64 { return r.b.RoundTrips() }

// HoldAlive implements backends.RecordKeeper: it reads the session Lease and judges by its
// renewal history whether a hold granted at acquired with ttl still lives.
func (r *Records) HoldAlive(ctx context.Context, acquired time.Time, ttl time.Duration) (time.Time, bool, error) {
	if err := r.b.usable(); err != nil {
		return time.Time{}, false, err
	}
	now := r.b.clock.Now()
	session, err := r.b.get(ctx, r.b.session)
	if err != nil {
		return time.Time{}, false, err
	}
	h, err := historyOf(session)
	if err != nil {
		return time.Time{}, false, err
	}
	expire, alive := h.alive(acquired, ttl, now)
	return expire, alive, nil
}

// Renew implements backends.Backend: it renews the session, which renews every hold of it, and
// reports as lost the leases that lapsed before this renewal (the session went their TTL without
// one since they were granted). It costs one read and one write of the session Lease.
func (r *Records) Renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) (renewed, lost []backends.Lease, err error) {
	if err := r.b.usable(); err != nil {
		return nil, nil, err
	}
	if len(leases) == 0 {
		return nil, nil, nil
	}
	if err := checkTTL(ttl); err != nil {
		return nil, nil, err
	}
	after, now, err := r.renewSession(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("renew: %w", err)
	}
	// A hold that lapsed before this write stays lapsed: the write recorded the gap.
	for _, l := range leases {
		if expire, ok := after.alive(l.AcquireTime, ttl, now); ok {
			l.TTL, l.ExpireTime = ttl, expire
			renewed = append(renewed, l)
		} else {
			lost = append(lost, l)
		}
	}
	return renewed, lost, nil
}

// KeepSession implements backends.RecordKeeper: one renewal of the session, as Renew's.
func (r *Records) KeepSession(ctx context.Context) error {
	if err := r.b.usable(); err != nil {
		return err
	}
	if _, _, err := r.renewSession(ctx); err != nil {
		return fmt.Errorf("keeping the session: %w", err)
	}
	return nil
}

// renewSession writes the session Lease as renewed now, its history recording the gap since the
// last renewal if that was long enough to let a hold lapse. It returns the history written and
// the time of the renewal.
func (r *Records) renewSession(ctx context.Context) (history, time.Time, error) {
	for range maxAttempts {
		session, err := r.b.get(ctx, r.b.session)
		if err != nil {
			return history{}, time.Time{}, err
		}
		before, err := historyOf(session)
		if err != nil {
			return history{}, time.Time{}, err
		}
		now := r.b.clock.Now()
		after := before.renewedAt(now)
		if err := r.writeSession(ctx, session, after); err != nil {
			if lostRace(err) {
				continue // another replica of this session wrote it: read it again
			}
			return history{}, time.Time{}, err
		}
		return after, now, nil
	}
	return history{}, time.Time{}, errors.New("other writers kept changing the session Lease")
}

// writeSession writes the session Lease (creating it if session is nil) with h as its history.
func (r *Records) writeSession(ctx context.Context, session *coordinationv1.Lease, h history) error {
	next := session
	if next == nil {
		next = r.b.newSession()
	} else {
		next = session.DeepCopy()
	}
	renewed := metav1.NewMicroTime(h.renewed)
	if next.Spec.AcquireTime == nil {
		next.Spec.AcquireTime = &renewed
	}
	next.Spec.RenewTime = &renewed
	metav1.SetMetaDataAnnotation(&next.ObjectMeta, GapsAnnotation, formatGaps(h.gaps))
	metav1.SetMetaDataAnnotation(&next.ObjectMeta, CompleteSinceAnnotation, h.completeSince.UTC().Format(time.RFC3339Nano))
	if session == nil {
		return r.b.create(ctx, next)
	}
	return r.b.update(ctx, next)
}

// historyOf reads a session Lease's renewal history; nil means a session never renewed.
func historyOf(session *coordinationv1.Lease) (history, error) {
	if session == nil {
		return history{}, nil
	}
	h := history{renewed: microTime(session.Spec.RenewTime)}
	var err error
	if h.gaps, err = parseGaps(session.Annotations[GapsAnnotation]); err != nil {
		return history{}, fmt.Errorf("session Lease %s/%s: annotation %s: %w", session.Namespace, session.Name, GapsAnnotation, err)
	}
	switch s := session.Annotations[CompleteSinceAnnotation]; {
	case s != "":
		if h.completeSince, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return history{}, fmt.Errorf("session Lease %s/%s: annotation %s: %w", session.Namespace, session.Name, CompleteSinceAnnotation, err)
		}
	}
	// A session that a version without record mode renewed has no history: its gaps before
	// its last renewal are taken as none (holds then lived in Leases of their own, and expired
	// there), and the gap from then to the next renewal is recorded as usual.
	return h, nil
}
