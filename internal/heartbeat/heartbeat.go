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

// Package heartbeat judges the heartbeat Lease of a detached LockClaim (spec.holder.leaseName):
// whether its claimant still renews it.
//
// Expiry is judged by when this process saw the Lease change, plus its
// spec.leaseDurationSeconds, never by comparing the claimant's spec.renewTime with this
// process's clock: a laptop whose clock runs a minute behind the controller's must not lose a
// lock it renews. A Lease first seen (after a restart, say) counts as renewed at that moment, so
// an error can only make a release late, never early.
package heartbeat

import (
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
)

// State is what a Verdict says of a heartbeat.
type State int

const (
	// Alive means the Lease changed less than its duration ago.
	Alive State = iota
	// Missing means the Lease does not exist and was never seen (it may not have been created yet).
	Missing
	// Invalid means the Lease cannot be judged: it has no spec.leaseDurationSeconds.
	Invalid
	// Deleted means the Lease was seen, and is gone.
	Deleted
	// Expired means the Lease was not seen to change for its duration.
	Expired
)

// Verdict is the liveness of one heartbeat Lease.
type Verdict struct {
	State State
	// ExpireAt is when an Alive heartbeat expires unless it changes before.
	ExpireAt time.Time
	// Reason says, unless Alive, what became of the Lease, in words fit for a condition
	// message ("heartbeat Lease x in namespace y was not renewed for 15s").
	Reason string
}

// sighting is what the tracker last saw of one Lease.
type sighting struct {
	// uid and mark identify the Lease's last renewal: a new Lease of the same name, or a new
	// spec.renewTime (else a new resourceVersion), is a renewal.
	uid  types.UID
	mark string
	// at is when this process first saw that renewal.
	at time.Time
	// gone is when this process saw the Lease gone; zero while it exists.
	gone time.Time
}

// forgetAfter is how long a deleted Lease is remembered, so that a claim naming it is told it was
// deleted rather than that it does not exist yet. Far longer than any pass takes to see it.
const forgetAfter = time.Hour

// Tracker remembers when each heartbeat Lease was last seen to change. It is safe for
// concurrent use; passes of different locks share it.
type Tracker struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]*sighting
	// swept is when sweep last ran: at most once a minute, so that a pass costs no walk of
	// every Lease.
	swept time.Time
}

// NewTracker returns an empty Tracker: every Lease it is shown first counts as renewed then.
func NewTracker() *Tracker {
	return &Tracker{seen: map[types.NamespacedName]*sighting{}}
}

// Observe records lease (nil when the Lease named name does not exist, or lacks the heartbeat
// label and so is not seen) as seen at now, and judges it.
func (t *Tracker) Observe(name types.NamespacedName, lease *coordinationv1.Lease, now time.Time) Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	s := t.seen[name]
	if lease == nil {
		if s == nil {
			return Verdict{State: Missing, Reason: fmt.Sprintf("heartbeat Lease %s does not exist in namespace %s", name.Name, name.Namespace)}
		}
		if s.gone.IsZero() {
			s.gone = now
		}
		return Verdict{State: Deleted, Reason: fmt.Sprintf("heartbeat Lease %s in namespace %s was deleted", name.Name, name.Namespace)}
	}
	mark := lease.ResourceVersion
	if rt := lease.Spec.RenewTime; rt != nil {
		mark = rt.UTC().Format(time.RFC3339Nano)
	}
	if s == nil || s.uid != lease.UID || s.mark != mark || !s.gone.IsZero() {
		s = &sighting{uid: lease.UID, mark: mark, at: now}
		t.seen[name] = s
	}
	return judge(name, s.at, lease.Spec.LeaseDurationSeconds, now)
}

// judge says whether a Lease last seen to change at seen, with the given duration, is alive at
// now.
func judge(name types.NamespacedName, seen time.Time, durationSeconds *int32, now time.Time) Verdict {
	if durationSeconds == nil || *durationSeconds <= 0 {
		return Verdict{State: Invalid, Reason: fmt.Sprintf("heartbeat Lease %s in namespace %s has no spec.leaseDurationSeconds", name.Name, name.Namespace)}
	}
	d := time.Duration(*durationSeconds) * time.Second
	expire := seen.Add(d)
	if !now.Before(expire) {
		return Verdict{State: Expired, Reason: fmt.Sprintf("heartbeat Lease %s in namespace %s was not renewed for %s", name.Name, name.Namespace, d)}
	}
	return Verdict{State: Alive, ExpireAt: expire}
}

// sweep forgets Leases seen deleted more than forgetAfter ago. Called with mu held.
func (t *Tracker) sweep(now time.Time) {
	if now.Sub(t.swept) < time.Minute {
		return
	}
	t.swept = now
	for name, s := range t.seen {
		if !s.gone.IsZero() && now.Sub(s.gone) > forgetAfter {
			delete(t.seen, name)
		}
	}
}
