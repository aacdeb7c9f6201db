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
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestPassLocksSerializeOneLockOnly(t *testing.T) {
	p := newPassLocks()
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}

	unlockA := p.lock(a)
	// Another lock's pass is not held back.
	done := make(chan struct{})
	go func() {
		p.lock(b)()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a pass of lock b waited for a pass of lock a")
	}

	// A second pass of the same lock waits for the first to end.
	var second atomic.Bool
	entered := make(chan struct{})
	go func() {
		unlock := p.lock(a)
		second.Store(true)
		unlock()
		close(entered)
	}()
	time.Sleep(50 * time.Millisecond)
	if second.Load() {
		t.Fatal("two passes of lock a ran at once")
	}
	unlockA()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the second pass of lock a never ran after the first ended")
	}
	if n := p.serving(); n != 0 {
		t.Fatalf("locks remembered after every pass ended = %d, want 0", n)
	}
}

func TestPassLocksTryLockNeverWaits(t *testing.T) {
	p := newPassLocks()
	a := types.NamespacedName{Namespace: "ns", Name: "a"}

	unlock, ok := p.tryLock(a)
	if !ok {
		t.Fatal("tryLock of a lock no pass serves failed")
	}
	if _, ok := p.tryLock(a); ok {
		t.Fatal("tryLock succeeded while another pass of the lock ran")
	}
	// A waiting pass counts as busy too, and gets the lock when the first ends.
	got := make(chan struct{})
	go func() {
		p.lock(a)()
		close(got)
	}()
	time.Sleep(50 * time.Millisecond)
	unlock()
	<-got
	if _, ok := p.tryLock(a); !ok {
		t.Fatal("tryLock failed once every pass of the lock had ended")
	}
}
