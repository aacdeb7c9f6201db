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
	"sync"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// backendKey names a key on one backend.
type backendKey struct{ backend, key string }

// freeWatches is the hub of backends.FreeWatcher watches: one pending watch per contended key,
// and the locks to wake when it fires. A lock whose head is contended by a client outside
// lockwarden is woken by the backend's news of the key's release rather than by polling, which is
// the only way to learn soon that such a client let the key go.
type freeWatches struct {
	// wake queues a pass of a lock.
	wake func(types.NamespacedName)

	mu sync.Mutex
	// waiters holds, per key with a pending watch, the locks to wake when it fires.
	waiters map[backendKey]map[types.NamespacedName]struct{}
}

func newFreeWatches(wake func(types.NamespacedName)) *freeWatches {
	return &freeWatches{wake: wake, waiters: map[backendKey]map[types.NamespacedName]struct{}{}}
}

// watch asks b, when it can, to say when key is freed, and tells whether it will.
func (f *freeWatches) watch(ctx context.Context, b backends.Backend, k backendKey, lock types.NamespacedName) bool {
	w, ok := backends.AsFreeWatcher(b)
	if !ok {
		return false
	}
	f.mu.Lock()
	waiters, pending := f.waiters[k]
	if !pending {
		waiters = map[types.NamespacedName]struct{}{}
		f.waiters[k] = waiters
	}
	waiters[lock] = struct{}{}
	f.mu.Unlock()
	if pending {
		return true
	}
	if err := w.WatchFree(ctx, k.key, func() { f.fired(k) }); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Cannot watch the contended key; polling instead", "key", k.key, "error", err.Error())
		// Locks that joined meanwhile rely on this watch: wake them to set their own.
		for _, other := range f.take(k) {
			if other != lock {
				f.wake(other)
			}
		}
		return false
	}
	return true
}

// fired wakes the locks waiting for k. It is the backends.FreeWatcher callback.
func (f *freeWatches) fired(k backendKey) {
	for _, l := range f.take(k) {
		f.wake(l)
	}
}

func (f *freeWatches) take(k backendKey) []types.NamespacedName {
	f.mu.Lock()
	defer f.mu.Unlock()
	waiters := f.waiters[k]
	delete(f.waiters, k)
	out := make([]types.NamespacedName, 0, len(waiters))
	for l := range waiters {
		out = append(out, l)
	}
	return out
}
