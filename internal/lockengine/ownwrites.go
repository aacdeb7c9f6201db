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
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownWrites remembers the resourceVersion of this process's last write to each lock and claim.
// A pass that reads them from a cache which has not caught up with those writes yet must not act
// on what it read: a lock record from before its own grant would make the claim it just granted
// look like a stale holder. Such a pass stops, and the watch event that brings the cache up to
// that write starts the next one, even an event the lock's predicates would otherwise drop (a
// queue position). Writes are compare-and-swaps, so this guards decisions, not the store.
type ownWrites struct {
	mu sync.Mutex
	rv map[types.UID]int64
	// awaited are the objects a pass found behind, whose catching up must start a pass.
	awaited map[types.UID]bool
}

func newOwnWrites() *ownWrites {
	return &ownWrites{rv: map[types.UID]int64{}, awaited: map[types.UID]bool{}}
}

// note records that obj was just written and is now at its resourceVersion.
func (w *ownWrites) note(obj client.Object) {
	rv, ok := parseRV(obj.GetResourceVersion())
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if rv > w.rv[obj.GetUID()] {
		w.rv[obj.GetUID()] = rv
	}
}

// behind says whether obj, as read, is older than this process's last write of it. An object
// whose resourceVersion is not an integer cannot be compared and counts as behind; that does not
// happen on the Kubernetes versions lockwarden needs (1.35 and later: integer resourceVersions,
// which its fencing tokens rely on too).
func (w *ownWrites) behind(obj client.Object) bool {
	rv, ok := parseRV(obj.GetResourceVersion())
	w.mu.Lock()
	defer w.mu.Unlock()
	last, written := w.rv[obj.GetUID()]
	if written && (!ok || rv < last) {
		w.awaited[obj.GetUID()] = true
		return true
	}
	return false
}

// caughtUp says whether obj, as the cache now has it, is an object a pass found behind and has
// caught up with this process's last write of it; each such object says so once.
func (w *ownWrites) caughtUp(obj client.Object) bool {
	rv, ok := parseRV(obj.GetResourceVersion())
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.awaited[obj.GetUID()] || !ok || rv < w.rv[obj.GetUID()] {
		return false
	}
	delete(w.awaited, obj.GetUID())
	return true
}

// isLast says whether obj, as an event brings it, is this process's last write of it.
func (w *ownWrites) isLast(obj client.Object) bool {
	rv, ok := parseRV(obj.GetResourceVersion())
	w.mu.Lock()
	defer w.mu.Unlock()
	last, written := w.rv[obj.GetUID()]
	return ok && written && rv == last
}

// forget drops what is remembered of an object that is gone or will not be written again.
func (w *ownWrites) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, uid)
	delete(w.awaited, uid)
}

func parseRV(s string) (int64, bool) {
	rv, err := strconv.ParseInt(s, 10, 64)
	return rv, err == nil
}
