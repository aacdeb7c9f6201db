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
	"slices"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// This file is the holder half of a pass: which claims share the lock's recorded hold, which of
// them let go and why, the backend release once none is left, resuming a hold after a leader
// change, and keeping status.expireTime ahead of now.

// endHolds decides for every claim that holds, or says it holds, whether it goes on holding,
// and releases each backend hold once no claim shares it.
func (r *Reconciler) endHolds(ctx context.Context, s *lockScope) (stepResult, error) {
	recs := s.lock.Status.Holders
	fates, res := r.endHolders(s)
	var kept []locksv1alpha1.LockHolder
	for i := range recs {
		rec, f := &recs[i], fates[i]
		if f.setAside && len(f.keep) == 0 {
			// Left by a grant that stopped half way: kept, unrenewed, until the claim lists it.
			kept = append(kept, *rec)
			continue
		}
		if len(f.keep) == 0 {
			if err := r.releaseRecord(ctx, s, rec, f.ended); err != nil {
				return res, err
			}
			if f.unreleased {
				s.startLockDelay()
			}
			continue
		}
		s.fillRecord(rec, f.keep) // an heir of the same identity keeps the entry
		lost, wake, err := r.keepRecord(ctx, s, rec, f.keep)
		if err != nil {
			return res, err
		}
		res = res.wakeIn(wake)
		if !lost {
			kept = append(kept, *rec)
		}
	}
	s.lock.Status.Holders = kept
	return res, nil
}

// recordFate is what becomes of one record entry's hold: the claims that go on sharing it, those
// that let go of it, and whether one of them let go without a release (its holder died).
type recordFate struct {
	keep, ended []*locksv1alpha1.LockClaim
	unreleased  bool
	// setAside: a grant that stopped half way left the entry (settleParts), kept unrenewed.
	setAside bool
}

// endHolders judges every claim that holds or says it holds by its holder (holderEnding), ends
// those that let go, and sorts the rest by the record entry they share. A claim Held by its status
// but named by no entry lost its hold in a pass whose claim write did not land, or to a newer grant.
func (r *Reconciler) endHolders(s *lockScope) ([]recordFate, stepResult) {
	var res stepResult
	recs := s.lock.Status.Holders
	fates := make([]recordFate, len(recs))
	for _, c := range s.claims {
		i := recordIndex(recs, c)
		aside, settled := s.settled[c.UID]
		switch {
		case settled:
			fates[i].setAside = fates[i].setAside || aside
		case i >= 0:
			alive, wake := s.holdVerdict(c)
			res = res.wakeIn(wake)
			end := seams.holderEnding(holderFacts{
				deleting: !c.DeletionTimestamp.IsZero(), lockDeleting: !s.lock.DeletionTimestamp.IsZero(),
				lockName: s.lock.Name, holder: alive, deletedWithHolder: holderOf(c).deletedWith(s, c),
			})
			if end == nil {
				fates[i].keep = append(fates[i].keep, c)
				continue
			}
			r.endClaim(s, c, end)
			fates[i].ended = append(fates[i].ended, c)
			fates[i].unreleased = fates[i].unreleased || end.unreleased
		case isHeld(c):
			alive, _ := s.holdVerdict(c)
			end := holderEnding(holderFacts{deleting: !c.DeletionTimestamp.IsZero(), lockName: s.lock.Name, holder: alive})
			if end == nil {
				end = lostEnding("The lock was granted again since this claim's grant")
			}
			r.Renewer.Untrack(s.holdKey(c.Status.HolderIdentity), client.ObjectKeyFromObject(c))
			r.endClaim(s, c, end)
		}
	}
	return fates, res
}

// endClaim ends c's hold or wait in its status, and stops renewing it for c.
func (r *Reconciler) endClaim(s *lockScope, c *locksv1alpha1.LockClaim, end *ending) {
	if isHeld(c) {
		r.Renewer.Untrack(s.holdKey(c.Status.HolderIdentity), client.ObjectKeyFromObject(c))
		if t := c.Status.AcquireTime; t != nil {
			r.Metrics.HoldSeconds.WithLabelValues(s.use.name).Observe(s.now.Sub(t.Time).Seconds())
		}
		if end.phase == locksv1alpha1.ClaimLost {
			r.Metrics.Losses.WithLabelValues(s.use.name, end.reason).Inc()
		}
	}
	markEnded(c, end.phase, end.reason, end.message, s.now)
}

// releaseRecord frees the backend hold of a record entry once no claim shares it, owner-checked;
// the caller drops the entry. An entry of a hold granted before claims lost their finalizer whose
// claims are all gone is released the same way.
func (r *Reconciler) releaseRecord(ctx context.Context, s *lockScope, rec *locksv1alpha1.LockHolder, ended []*locksv1alpha1.LockClaim) error {
	hold := s.holdKey(rec.Identity)
	h, tracked := r.Renewer.Lookup(hold)
	// No claim shares the record any more (vanished ones included): the hold is not renewed
	// again, whichever claims the Renewer still counts.
	r.Renewer.Drop(hold)
	switch {
	case tracked && h.Lost:
		// Nothing of ours is left on the backend.
	case s.use.session == nil:
		if judgeExpiry(holdExpiry(rec, ended), s.now) == expiryPassed {
			break // expired anyway: nothing to release
		}
		return fmt.Errorf("cannot release %s until its backend is usable: %s", s.use.key, s.use.unusable.Message)
	default:
		lease := backends.Lease{Key: s.use.key, Identity: recordBackendIdentity(rec), TTL: s.use.ttl, Shared: recordShared(rec)}
		if tracked {
			lease = h.Lease
		}
		if err := s.use.session.Release(ctx, lease); err != nil && !errors.Is(err, backends.ErrNotHeld) {
			return fmt.Errorf("releasing %s: %w", s.use.key, err)
		}
	}
	return nil
}

// keepRecord looks after a hold that goes on: it reports a hold the backend lost, resumes one the
// Renewer does not know (after a restart or a leader change), and marks Held the claims of the
// entry whose grant's status write never landed. It says whether the hold was lost, in which case
// the caller drops the entry; and how soon to look again when it cannot tell now.
func (r *Reconciler) keepRecord(ctx context.Context, s *lockScope, rec *locksv1alpha1.LockHolder, keep []*locksv1alpha1.LockClaim) (lost bool, wake time.Duration, err error) {
	hold := s.holdKey(rec.Identity)
	h, tracked := r.Renewer.Lookup(hold)
	switch {
	case tracked && h.Lost:
		msg := "The backend no longer holds the lock for this holder"
		if h.LastError != nil {
			msg = fmt.Sprintf("The lock expired without a successful renewal: %v", h.LastError)
		}
		r.loseRecord(s, hold, keep, msg)
		return true, 0, nil
	case !tracked:
		v, err := r.resume(ctx, s, rec, keep)
		switch {
		case err != nil:
			return false, 0, err
		case v.lost != "":
			r.loseRecord(s, hold, keep, v.lost)
			return true, 0, nil
		case v.lease == nil:
			// Cannot resume now: the claims hold on meanwhile, and the pass looks again.
			s.holders = append(s.holders, keep...)
			return false, v.retryIn, nil
		}
		h = renewal.Hold{Lease: *v.lease, RenewTime: s.now}
	}
	for _, c := range keep {
		r.Renewer.Track(s.use.name, s.use.session, h.Lease, client.ObjectKeyFromObject(c)) // idempotent; records sharers
		if !isHeld(c) {
			markHeld(c, rec.Identity, h.Lease, rec.FencingToken, rec.AcquireTime.Time)
		}
	}
	s.holders = append(s.holders, keep...)
	return false, 0, nil
}

// loseRecord ends every held claim of a hold the backend no longer has. A claim the entry names
// whose grant never reached its status (a leader stopped in between, and the hold expired before
// the next one resumed it) was never told it held anything: it queues again.
func (r *Reconciler) loseRecord(s *lockScope, hold renewal.HoldKey, keep []*locksv1alpha1.LockClaim, msg string) {
	for _, c := range keep {
		r.Renewer.Untrack(hold, client.ObjectKeyFromObject(c))
		if isHeld(c) {
			r.endClaim(s, c, lostEnding(msg))
		}
	}
	s.startLockDelay()
}

// resumed is what resume found of a hold: the refreshed lease; or why the hold is lost; or
// neither, when it cannot tell now (the backend is unusable and the hold has not expired yet),
// and then how soon to look again.
type resumed struct {
	lease   *backends.Lease
	lost    string
	retryIn time.Duration
}

// lostHold is a resume verdict that the hold is lost, for why.
func lostHold(why string) resumed { return resumed{lost: why} }

// resume takes up, after a restart or a leader change, a hold the backend still has for the
// record's identity (resumed says what it found).
// The backend, not status.expireTime, says whether the hold lives: status.expireTime can trail the
// backend's expiry by most of a lease, and a failover can take longer than what it had left.
func (r *Reconciler) resume(ctx context.Context, s *lockScope, rec *locksv1alpha1.LockHolder, keep []*locksv1alpha1.LockClaim) (resumed, error) {
	if s.use.session == nil {
		expire := holdExpiry(rec, keep)
		if judgeExpiry(expire, s.now) != expiryAhead {
			return lostHold("The lock expired while no controller could renew it (its backend is unusable)"), nil
		}
		return resumed{retryIn: min(expire.Sub(s.now), 5*time.Second)}, nil
	}
	if records, ok := backends.AsRecordKeeper(s.use.session); ok {
		// The lock record is the hold: it lives while the session that keeps it was renewed in
		// time since the grant.
		expire, alive, err := seams.resumeAlive(records.HoldAlive(ctx, rec.AcquireTime.Time, s.use.ttl))
		switch {
		case err != nil:
			return resumed{}, fmt.Errorf("resuming hold of %s: %w", s.use.key, err)
		case !alive:
			return lostHold("The lock expired while no controller renewed it: its session went a lease without renewal"), nil
		}
		ctrl.LoggerFrom(ctx).Info("Resumed hold", "key", s.use.key, "fencingToken", rec.FencingToken)
		return resumed{lease: &backends.Lease{Key: s.use.key, Identity: recordBackendIdentity(rec), TTL: s.use.ttl, AcquireTime: rec.AcquireTime.Time, ExpireTime: expire}}, nil
	}
	if recordShared(rec) {
		return r.resumePlace(ctx, s, rec)
	}
	current, err := s.use.session.Inspect(ctx, s.use.key)
	current, err = seams.resumeFound(current, err, recordBackendIdentity(rec))
	switch {
	case errors.Is(err, backends.ErrNotHeld):
		return lostHold("The lock expired while no controller renewed it: the backend no longer holds it for this holder"), nil
	case err != nil:
		return resumed{}, fmt.Errorf("resuming hold of %s: %w", s.use.key, err)
	case current.Identity != recordBackendIdentity(rec):
		return lostHold("Another client took the lock on the backend"), nil
	}
	if err := r.Guard.Check(); err != nil {
		return resumed{}, err
	}
	lease, err := s.use.session.TryAcquire(ctx, s.use.key, recordBackendIdentity(rec), s.use.ttl)
	switch {
	case errors.Is(err, backends.ErrLocked):
		return lostHold("Another client took the lock on the backend"), nil
	case err != nil:
		return resumed{}, fmt.Errorf("resuming hold of %s: %w", s.use.key, err)
	}
	ctrl.LoggerFrom(ctx).Info("Resumed hold", "key", s.use.key, "fencingToken", rec.FencingToken)
	return resumed{lease: &lease}, nil
}

// resumePlace is resume for one place of a shared lock: the place must still be on the backend,
// and is refreshed there. A place is never taken anew on resumption, even if one is free: the
// hold it had may have lapsed in between.
func (r *Reconciler) resumePlace(ctx context.Context, s *lockScope, rec *locksv1alpha1.LockHolder) (resumed, error) {
	sharer, ok := backends.AsSharer(s.use.session)
	if !ok {
		return lostHold("The backend no longer holds shared locks"), nil
	}
	holders, err := sharer.Holders(ctx, s.use.key)
	if err != nil {
		return resumed{}, fmt.Errorf("resuming hold of %s: %w", s.use.key, err)
	}
	if !slices.ContainsFunc(holders, func(l backends.Lease) bool { return l.Shared && l.Identity == recordBackendIdentity(rec) }) {
		return lostHold("The lock expired while no controller renewed it: the backend no longer holds this holder's place"), nil
	}
	if err := r.Guard.Check(); err != nil {
		return resumed{}, err
	}
	lease, err := sharer.TryAcquireShared(ctx, s.use.key, recordBackendIdentity(rec), s.use.ttl, int(s.maxHolders()))
	switch {
	case errors.Is(err, backends.ErrLocked):
		return lostHold("Another client took the lock on the backend"), nil
	case err != nil:
		return resumed{}, fmt.Errorf("resuming hold of %s: %w", s.use.key, err)
	}
	ctrl.LoggerFrom(ctx).Info("Resumed place", "key", s.use.key, "fencingToken", rec.FencingToken)
	return resumed{lease: &lease}, nil
}

// refreshHolds keeps each held claim's status.expireTime ahead of now, from the Renewer's latest
// confirmations: when its refresh is due, every lock it holds at once (heldParts). The next
// refresh is the refresh lane's (nextRefresh, refresh.go).
func (r *Reconciler) refreshHolds(_ context.Context, s *lockScope) (stepResult, error) {
	for _, c := range s.holders {
		parts, earliest := s.heldParts(c)
		if !refreshDue(earliest, s.use.ttl, s.now) {
			continue
		}
		for _, p := range parts {
			h, tracked := r.Renewer.Lookup(p.key)
			if !tracked || h.Lost || (p.expire != nil && !h.Lease.ExpireTime.After(*p.expire)) {
				continue
			}
			p.renewed(h)
		}
	}
	return stepResult{}, nil
}
