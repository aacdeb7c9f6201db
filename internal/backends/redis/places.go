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

package redis

// Shared locks (backends.Sharer).
//
// While a lock is held in shared places, its key is a sorted set with one member per holder
// identity, scored with the place's expiry by the server's clock; "lockwarden-places:" + key is a
// hash of the places' records (when each began, and its hold id); both keys expire with the last
// place. Each acquire, renewal and release is one Lua script, so that the server decides on the
// key's type and on the live places with no other command in between: a shared acquire refuses
// while the key is a string (held exclusively, by lockwarden or by any client that uses SET NX),
// and SET NX, ours or anyone's, fails while the sorted set exists, that is while a place is live.
// The package redisnode describes the scripts.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/internal/redisnode"
)

// TryAcquireShared takes one of key's places for identity, or extends the place identity holds
// (keeping when it began), in one script run. While the key is held exclusively, or places other
// identities hold live places, the error is a *backends.LockedError naming the exclusive holder,
// or the place that expires first.
func (b *Backend) TryAcquireShared(ctx context.Context, key, identity string, ttl time.Duration, places int) (backends.Lease, error) {
	if err := b.usable(); err != nil {
		return backends.Lease{}, err
	}
	if err := checkArgs(key, identity, ttl); err != nil {
		return backends.Lease{}, err
	}
	if places < 1 {
		return backends.Lease{}, fmt.Errorf("redis backend: places must be at least 1, got %d", places)
	}
	start := b.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	res, err := b.node.AcquireShared(ctx, key, ttl, places, redisnode.NewRecord(start, identity))
	return b.leaseOf(res, err, key, identity, ttl, start, true)
}

// Holders lists key's exclusive hold, or its live places by identity, in one script run. Expiry
// times are the session's clock plus the time the server says each hold has left.
func (b *Backend) Holders(ctx context.Context, key string) ([]backends.Lease, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, errors.New("redis backend: key must not be empty")
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	h, err := b.node.Inspect(ctx, key)
	if err != nil {
		return nil, err
	}
	return b.leases(key, h), nil
}
