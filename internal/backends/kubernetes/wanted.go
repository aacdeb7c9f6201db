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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// wantedLocks remembers, per lock Lease, the holder this Backend was last asked to acquire or
// renew it for, and when. Renew keeps alive through the session only the locks asked for within
// their TTL (see "Session semantics" in the package documentation).
type wantedLocks struct {
	// since is when the Backend was made: a lock it was never asked for is wanted for one TTL
	// from then, the time a new leader has to resume the holds of its predecessor.
	since time.Time

	mu    sync.Mutex
	asked map[string]askedLock // by lock Lease name
}

type askedLock struct {
	identity string
	at       time.Time
}

// note records that identity asked for the lock of key at.
func (w *wantedLocks) note(key, identity string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.asked == nil {
		w.asked = map[string]askedLock{}
	}
	name := LeaseName(key)
	if prev, ok := w.asked[name]; ok && prev.identity == identity && prev.at.After(at) {
		return
	}
	w.asked[name] = askedLock{identity: identity, at: at}
}

// wants says whether lock, held by someone, was asked for by its holder within its TTL of now.
func (w *wantedLocks) wants(lock *coordinationv1.Lease, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.since
	if a, ok := w.asked[lock.Name]; ok && a.identity == holderOf(lock) && a.at.After(last) {
		last = a.at
	}
	ttl := time.Duration(ptr.Deref(lock.Spec.LeaseDurationSeconds, 0)) * time.Second
	return now.Before(last.Add(ttl))
}

// forgetAllBut drops what it remembers of locks that are not in session, except those asked for
// at or after listed (the time session was read: a lock created since is not in it yet).
func (w *wantedLocks) forgetAllBut(session map[string]bool, listed time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, a := range w.asked {
		if !session[name] && a.at.Before(listed) {
			delete(w.asked, name)
		}
	}
}
