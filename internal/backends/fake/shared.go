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

package fake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// OpTryAcquireShared and OpHolders name the Sharer calls in Calls.
const (
	OpTryAcquireShared = "TryAcquireShared"
	OpHolders          = "Holders"
)

// TryAcquireShared implements backends.Sharer.
func (b *Backend) TryAcquireShared(ctx context.Context, key, identity string, ttl time.Duration, places int) (backends.Lease, error) {
	if err := b.begin(ctx, OpTryAcquireShared); err != nil {
		return backends.Lease{}, err
	}
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	if places < 1 {
		return backends.Lease{}, fmt.Errorf("fake backend: places must be at least 1, got %d", places)
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if cur, ok := s.holds[key]; ok && cur.heldAt(now) {
		return backends.Lease{}, &backends.LockedError{Key: key, Holder: cur.identity, ExpireTime: cur.expireTime}
	}
	live := s.livePlaces(key, now)
	next := hold{identity: identity, ttl: ttl, acquireTime: now, expireTime: now.Add(ttl), version: s.nextVersion(), shared: true}
	if cur, ok := live[identity]; ok {
		// The identity holds a place already: it continues, whatever the limit is now.
		next.acquireTime = cur.acquireTime
	} else if len(live) >= places {
		first := s.firstPlace(key, now)
		return backends.Lease{}, &backends.LockedError{Key: key, Holder: first.identity, ExpireTime: first.expireTime}
	}
	live[identity] = next
	s.places[key] = live
	return next.lease(key), nil
}

// Holders implements backends.Sharer.
func (b *Backend) Holders(ctx context.Context, key string) ([]backends.Lease, error) {
	if err := b.begin(ctx, OpHolders); err != nil {
		return nil, err
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if cur, ok := s.holds[key]; ok && cur.heldAt(now) {
		return []backends.Lease{cur.lease(key)}, nil
	}
	holders := []backends.Lease{}
	for _, p := range s.livePlaces(key, now) {
		holders = append(holders, p.lease(key))
	}
	slices.SortFunc(holders, func(a, b backends.Lease) int { return strings.Compare(a.Identity, b.Identity) })
	return holders, nil
}

// livePlaces returns key's places still in force at now, dropping the expired ones. The caller
// holds s.mu.
func (s *store) livePlaces(key string, now time.Time) map[string]hold {
	live := map[string]hold{}
	for id, p := range s.places[key] {
		if p.heldAt(now) {
			live[id] = p
		}
	}
	if len(live) == 0 {
		delete(s.places, key)
	} else {
		s.places[key] = live
	}
	return live
}

// livePlace returns one of key's places in force at now, if any. The caller holds s.mu.
func (s *store) livePlace(key string, now time.Time) (hold, bool) {
	p := s.firstPlace(key, now)
	return p, p.identity != ""
}

// firstPlace returns the live place of key with the lowest identity (so that errors are
// repeatable), or the zero hold. The caller holds s.mu.
func (s *store) firstPlace(key string, now time.Time) hold {
	var first hold
	for _, p := range s.livePlaces(key, now) {
		if first.identity == "" || p.identity < first.identity {
			first = p
		}
	}
	return first
}

// renewPlace extends the place of l.Identity if it is still in force. The caller holds s.mu.
func (s *store) renewPlace(l backends.Lease, ttl time.Duration, now time.Time) (backends.Lease, bool) {
	live := s.livePlaces(l.Key, now)
	cur, ok := live[l.Identity]
	if !ok {
		return backends.Lease{}, false
	}
	cur.ttl = ttl
	cur.expireTime = now.Add(ttl)
	live[l.Identity] = cur
	return cur.lease(l.Key), true
}

// releasePlace frees the place of lease.Identity, if it holds one. The caller holds s.mu.
func (s *store) releasePlace(lease backends.Lease) {
	live := s.livePlaces(lease.Key, s.clock.Now())
	delete(live, lease.Identity)
	if len(live) == 0 {
		delete(s.places, lease.Key)
	}
}
