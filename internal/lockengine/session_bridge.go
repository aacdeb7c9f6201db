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
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/renewal"
)

// sessionBridge keeps the built-in backend's sessions alive from the moment this manager leads
// until its lock passes have resumed every hold the lock records show, and the Renewer renews
// them.
//
// A hold of the built-in backend lives while its session Lease is renewed. The old leader's last
// renewal can be up to a renewal.Interval old when it dies, the election takes up to the leader
// lease, and the new leader's controllers start only once each has seen every object of the
// cluster: at 10,000 pods on two busy cores, its first lock pass came 8 to 9 s after the old
// leader was killed, and a session renewed last just before the kill had lapsed by then, at a
// 10 s lease, for every hold at once (docs/scale.md). The bridge renews the session at once, and
// again every renewal.Interval of the shortest lease among the holds not yet resumed, until none
// is left.
//
// It never revives a hold that lapsed: a renewal after a gap of a lease records the gap in the
// session, and HoldAlive then reports every hold granted before it as lapsed, as it would have
// without the bridge. Nor does it keep a hold that should end: the lock record still names it,
// so nobody else can be granted the lock, and the lock's first pass ends it as before.
type sessionBridge struct {
	client   client.Reader
	backends *registry.Resolver
	renewer  *renewal.Renewer
	clock    clock.Clock
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the leader renews.
func (b *sessionBridge) NeedLeaderElection() bool { return true }

// Start bridges until no recorded hold is left that the Renewer does not renew.
func (b *sessionBridge) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("session-bridge")
	for {
		wait := b.bridge(ctrl.LoggerInto(ctx, log))
		if wait == 0 {
			log.Info("The Renewer renews every recorded hold: the session bridge stops")
			return nil
		}
		t := b.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// bridgedSession is a session some recorded, not yet resumed hold lives on.
type bridgedSession struct {
	keeper backends.RecordKeeper
	// ttl is the shortest lease among those holds.
	ttl time.Duration
	// holds counts them.
	holds int
}

// bridge renews, once, every record-mode session that a recorded hold not yet tracked by the
// Renewer lives on, and says when to look again (0: no such hold is left).
func (b *sessionBridge) bridge(ctx context.Context) time.Duration {
	log := ctrl.LoggerFrom(ctx)
	list := &locksv1alpha1.DistributedLockList{}
	if err := b.client.List(ctx, list); err != nil {
		log.Error(err, "Listing locks")
		return time.Second
	}
	sessions := map[string]*bridgedSession{}
	for i := range list.Items {
		lock := &list.Items[i]
		recs := lock.Status.CurrentHolders()
		if len(recs) == 0 {
			continue
		}
		use, err := b.backends.ForLock(ctx, lock)
		if err != nil {
			continue // an unusable backend: the lock's pass reports it
		}
		keeper, ok := backends.AsRecordKeeper(use.Session)
		if !ok {
			// A hold on another backend is a key of its own, with the lease as its TTL: renewing
			// it takes the lease a pass resumes, so it is not bridged (docs/how-locks-work.md).
			continue
		}
		for i := range recs {
			k := renewal.HoldKey{Backend: use.Name, Key: lock.BackendKey(use.KeyPolicy), Identity: recordBackendIdentity(&recs[i])}
			if _, tracked := b.renewer.Lookup(k); tracked {
				continue
			}
			s := sessions[use.Name]
			if s == nil {
				s = &bridgedSession{keeper: keeper}
				sessions[use.Name] = s
			}
			s.ttl = shorterTTL(s.ttl, time.Duration(lock.Spec.LeaseDurationSeconds)*time.Second)
			s.holds++
		}
	}
	var wait time.Duration
	for name, s := range sessions {
		err := s.keeper.KeepSession(ctx)
		if err != nil {
			log.Error(err, "Keeping the session alive for holds not resumed yet", "backend", name, "holds", s.holds)
		} else {
			log.V(1).Info("Kept the session alive for holds not resumed yet", "backend", name, "holds", s.holds)
		}
		wait = soonest(wait, bridgeInterval(s.ttl, err != nil))
	}
	return wait
}

// shorterTTL keeps the shorter of two leases, zero meaning none yet.
func shorterTTL(a, b time.Duration) time.Duration {
	if a == 0 || b > 0 && b < a {
		return b
	}
	return a
}

// bridgeInterval is when the bridge renews again a session whose shortest unresumed hold has
// lease ttl: a renewal.Interval later, as the Renewer does, but no sooner than a second; and a
// second after a renewal that failed, since waiting a whole interval again could let them lapse.
func bridgeInterval(ttl time.Duration, failed bool) time.Duration {
	if failed {
		return time.Second
	}
	return max(renewal.Interval(ttl), time.Second)
}
