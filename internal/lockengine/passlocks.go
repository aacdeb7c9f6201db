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
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// passLocks serializes the passes of each lock. A lock is served from two work queues (its
// passes, and the refresh lane that keeps its held claims' status.expireTime ahead); each queue
// never runs one lock twice at once, but the two could, and every pass assumes it is the lock's
// only writer in this process (docs/design.md §3).
type passLocks struct {
	mu    sync.Mutex
	locks map[types.NamespacedName]*passLock
}

// passLock is one lock's mutex and how many passes hold or wait for it; it is dropped at zero,
// so that the map holds only the locks being served.
type passLock struct {
	sync.Mutex
	users int
}

func newPassLocks() *passLocks {
	return &passLocks{locks: map[types.NamespacedName]*passLock{}}
}

// lock waits until no other pass of name runs, and returns the function that ends this one.
func (p *passLocks) lock(name types.NamespacedName) (unlock func()) {
	p.mu.Lock()
	l, ok := p.locks[name]
	if !ok {
		l = &passLock{}
		p.locks[name] = l
	}
	l.users++
	p.mu.Unlock()

	l.Lock()
	return p.unlocker(name, l)
}

// unlocker returns the function that ends a pass of name holding l.
func (p *passLocks) unlocker(name types.NamespacedName, l *passLock) func() {
	return func() {
		l.Unlock()
		p.mu.Lock()
		defer p.mu.Unlock()
		if l.users--; l.users == 0 {
			delete(p.locks, name)
		}
	}
}

// tryLock starts a pass of name only if no other pass of it runs or waits; ok is false when one
// does. The refresh lane uses it: a lock pass that waits on a backend which does not answer must
// not hold a refresh worker too (and that pass refreshes the lock's claims itself when it goes on).
func (p *passLocks) tryLock(name types.NamespacedName) (unlock func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, busy := p.locks[name]; busy {
		return nil, false
	}
	l := &passLock{users: 1}
	l.Lock()
	p.locks[name] = l
	return p.unlocker(name, l), true
}
