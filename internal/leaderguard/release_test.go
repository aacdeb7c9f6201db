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
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// memStore is one leader election record in memory, shared by the replicas' locks.
type memStore struct {
	mu      sync.Mutex
	rec     *resourcelock.LeaderElectionRecord
	updates map[string]int // by identity
}

func (s *memStore) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rec == nil {
		return ""
	}
	return s.rec.HolderIdentity
}

func (s *memStore) set(rec resourcelock.LeaderElectionRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec = &rec
}

func (s *memStore) updatesBy(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates[id]
}

// memLock is one replica's resourcelock.Interface on a memStore.
type memLock struct {
	s  *memStore
	id string
}

func (l memLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.rec == nil {
		return nil, nil, errNotFound
	}
	rec := *l.s.rec
	raw, err := json.Marshal(rec)
	return &rec, raw, err
}

func (l memLock) Create(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	l.s.rec = &ler
	return nil
}

func (l memLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	l.s.rec = &ler
	if l.s.updates == nil {
		l.s.updates = map[string]int{}
	}
	l.s.updates[l.id]++
	return nil
}

func (l memLock) RecordEvent(string) {}
func (l memLock) Identity() string   { return l.id }
func (l memLock) Describe() string   { return "memory/" + l.id }

// errNotFound is what the API server answers for a Lease not created yet: client-go creates it.
var errNotFound = apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "election")

// deposeOnStop runs replica "a" as leader on lock, lets "b" take the record while a still
// believes it leads (as after a's SIGSTOP outlasted its lease), then stops a, whose elector
// releases on cancel. It returns who holds the record after a stopped.
func deposeOnStop(t *testing.T, store *memStore, lock resourcelock.Interface) string {
	t.Helper()
	started := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock,
		// Renewals an hour apart: a renews once on taking the lead, then not before it stops.
		LeaseDuration: 3 * time.Hour, RenewDeadline: 2 * time.Hour, RetryPeriod: time.Hour,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(started) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("a never led")
	}
	deadline := time.Now().Add(10 * time.Second)
	for store.updatesBy("a") == 0 { // its first renewal, after which it waits an hour
		if time.Now().After(deadline) {
			t.Fatal("a never renewed")
		}
		time.Sleep(time.Millisecond)
	}
	now := metav1.NewTime(time.Now())
	store.set(resourcelock.LeaderElectionRecord{HolderIdentity: "b", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now, LeaderTransitions: 1})
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a's elector did not stop")
	}
	return store.holder()
}

func TestReleaseCheckedLockKeepsTheNewLeadersRecord(t *testing.T) {
	// client-go alone: the deposed leader's release clears b's record (why the wrapper exists; if
	// this ever fails, client-go checks the holder it read and the wrapper may go).
	plain := &memStore{}
	if got := deposeOnStop(t, plain, memLock{s: plain, id: "a"}); got != "" {
		t.Fatalf("without the wrapper the record names %q after a's release; want it cleared (client-go's release trusts its memory)", got)
	}

	store := &memStore{}
	guarded := &ReleaseCheckedLock{}
	guarded.Bind(memLock{s: store, id: "a"})
	if got := deposeOnStop(t, store, guarded); got != "b" {
		t.Fatalf("with the wrapper the record names %q after a's release, want b", got)
	}
}

func TestReleaseCheckedLockUpdate(t *testing.T) {
	now := metav1.NewTime(time.Now())
	held := func(id string) resourcelock.LeaderElectionRecord {
		return resourcelock.LeaderElectionRecord{HolderIdentity: id, LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
	}
	release := resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now}
	for name, tc := range map[string]struct {
		stored   *resourcelock.LeaderElectionRecord // what Get reads first; nil: no Get
		write    resourcelock.LeaderElectionRecord
		wantErr  bool
		wantHeld string
	}{
		"a release of its own record":         {stored: ptr(held("a")), write: release, wantHeld: ""},
		"a release of another's record":       {stored: ptr(held("b")), write: release, wantErr: true, wantHeld: "b"},
		"a release before any read":           {write: release, wantErr: true, wantHeld: "b"},
		"a renewal":                           {stored: ptr(held("a")), write: held("a"), wantHeld: "a"},
		"an acquisition of an expired record": {stored: ptr(held("b")), write: held("a"), wantHeld: "a"},
	} {
		t.Run(name, func(t *testing.T) {
			store := &memStore{}
			l := &ReleaseCheckedLock{}
			l.Bind(memLock{s: store, id: "a"})
			if tc.stored != nil {
				store.set(*tc.stored)
				if _, _, err := l.Get(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else {
				store.set(held("b"))
			}
			err := l.Update(context.Background(), tc.write)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrNotHolder)) {
				t.Fatalf("Update: %v, want error %v", err, tc.wantErr)
			}
			if got := store.holder(); got != tc.wantHeld {
				t.Fatalf("record names %q, want %q", got, tc.wantHeld)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
