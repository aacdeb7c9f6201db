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

package leaderguard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrNotHolder is what ReleaseCheckedLock's Update returns for a release of a record that the
// lock's last read showed held by someone else.
var ErrNotHolder = errors.New("the leader election record names another holder: not releasing it")

// ReleaseCheckedLock wraps the leader election's resource lock so that a release clears the
// record only when the read just before it shows this replica holding it.
//
// A manager that stops gives its election Lease up at once (ReleaseOnCancel), so that a standby
// need not wait for it to expire. client-go's release reads the Lease first, but then asks its
// memory, not what it read, whether it leads. (The read was added so that a release would not
// fail on a stale resourceVersion, kubernetes/client-go#1289; it also removed the
// compare-and-swap that used to refuse a deposed leader's release.) A leader deposed while it was stopped (SIGSTOP, a VM
// pause: the Guard's case) still remembers leading when it wakes, the Guard stops it, and its
// release clears the record of the replica that took over: the new leader's next renewal is
// refused, and any replica may take the Lease while the new leader still acts until its renew
// deadline. The reliability harness's audit log caught a deposed leader's accepted Lease write
// (kubernetes/deposed-leader, a clean-clone CI run, seed 799924003).
type ReleaseCheckedLock struct {
	mu    sync.Mutex
	inner resourcelock.Interface
	// holder is whom the last successful Get found holding the record; read says there was one.
	holder string
	read   bool
}

// Bind sets the lock that ReleaseCheckedLock guards; it must be called before the leader
// election starts (the manager takes the lock at creation, and the lock needs the manager's
// event recorder).
func (l *ReleaseCheckedLock) Bind(inner resourcelock.Interface) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inner = inner
}

func (l *ReleaseCheckedLock) bound() resourcelock.Interface {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inner == nil {
		panic("leaderguard: ReleaseCheckedLock used before Bind")
	}
	return l.inner
}

// Get reads the record and remembers its holder.
func (l *ReleaseCheckedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.bound().Get(ctx)
	if err == nil && rec != nil {
		l.mu.Lock()
		l.holder, l.read = rec.HolderIdentity, true
		l.mu.Unlock()
	}
	return rec, raw, err
}

// Create creates the record.
func (l *ReleaseCheckedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.bound().Create(ctx, ler)
}

// Update writes the record. A release (a record without a holder) goes through only when the
// last read showed this replica holding the record; an acquisition or a renewal is unchanged.
func (l *ReleaseCheckedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	inner := l.bound()
	if ler.HolderIdentity == "" {
		l.mu.Lock()
		holder, read := l.holder, l.read
		l.mu.Unlock()
		if !read || holder != inner.Identity() {
			return fmt.Errorf("%w (it names %q)", ErrNotHolder, holder)
		}
	}
	return inner.Update(ctx, ler)
}

// RecordEvent records an event on the lock's object.
func (l *ReleaseCheckedLock) RecordEvent(s string) { l.bound().RecordEvent(s) }

// Identity is this replica's identity in the record.
func (l *ReleaseCheckedLock) Identity() string { return l.bound().Identity() }

// Describe names the lock's object.
func (l *ReleaseCheckedLock) Describe() string { return l.bound().Describe() }
