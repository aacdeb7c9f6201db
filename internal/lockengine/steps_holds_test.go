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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// withLockDelay sets a lock's lockDelaySeconds.
func withLockDelay(seconds int32) func(*locksv1alpha1.DistributedLock) {
	return func(l *locksv1alpha1.DistributedLock) { l.Spec.LockDelaySeconds = seconds }
}

// heldBy runs passes until claim holds lock, and fails the test if it does not.
func (e *stepEnv) heldBy(lock, claim string) {
	e.t.Helper()
	for range 3 {
		e.mustPass(lock)
		if e.getClaim(claim).Status.Phase == locksv1alpha1.ClaimHeld {
			return
		}
	}
	e.t.Fatalf("claim %s never held lock %s", claim, lock)
}

// TestStepDeadHolderWithDeletedClaim: the holder pod is gone and garbage collection has deleted
// its claim by the time the pass looks: the hold ended without a release, so the lock delay
// applies. Before, the claim's deletion won and the next claim was granted at once, skipping the
// delay that exists for exactly this case (issue 37, bug 3).
func TestStepDeadHolderWithDeletedClaim(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db", withLockDelay(30))
	pod := e.pod("web-0")
	e.claim("a", "db", ownedBy(pod))
	e.claim("b", "db")
	e.heldBy("db", "a")

	e.remove(pod)
	e.remove(e.getClaim("a"))
	e.mustPass("db")

	if b := e.getClaim("b"); b.Status.Phase == locksv1alpha1.ClaimHeld {
		t.Fatalf("claim b granted at once after a holder died: the lock delay was skipped")
	}
	lock := e.getLock("db")
	if lock.Status.LockDelayUntil == nil || !lock.Status.LockDelayUntil.Time.Equal(e.clock.Now().Add(30*time.Second)) {
		t.Fatalf("lockDelayUntil %v, want now + 30 s", lock.Status.LockDelayUntil)
	}
	if len(lock.Status.Holders) != 0 {
		t.Fatalf("the dead holder is still recorded: %+v", lock.Status.Holders)
	}
	e.clock.Step(30 * time.Second)
	e.heldBy("db", "b")
}

// TestStepForegroundDeletedHolder: a holder pod deleted in the foreground has its claim deleted
// by Kubernetes while the pod still terminates (its containers may still run): the pod keeps the
// lock until it is gone, and then the hold ends without a release. Before, the claim's deletion
// released the lock while the pod was still Terminating (issue 37, bug 3).
func TestStepForegroundDeletedHolder(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db", withLockDelay(10))
	pod := e.pod("web-0", func(p *corev1.Pod) { p.Finalizers = []string{metav1.FinalizerDeleteDependents} })
	e.claim("a", "db", ownedBy(pod))
	e.claim("b", "db")
	e.heldBy("db", "a")

	e.remove(pod) // the finalizer keeps it, Terminating, as the garbage collector would
	e.remove(e.getClaim("a"))
	e.mustPass("db")
	if holders := e.getLock("db").Status.Holders; len(holders) != 1 || holders[0].Claim != "a" {
		t.Fatalf("lock record %+v while the holder pod terminates, want claim a still holding", holders)
	}
	if b := e.getClaim("b"); b.Status.Phase == locksv1alpha1.ClaimHeld {
		t.Fatalf("claim b granted while the holder pod still terminates")
	}

	// The pod is gone once its dependents are: the garbage collector removes its finalizer.
	gone := &corev1.Pod{}
	if err := e.client.Get(e.ctx(), clientKey(pod), gone); err != nil {
		t.Fatal(err)
	}
	gone.Finalizers = nil
	if err := e.client.Update(e.ctx(), gone); err != nil {
		t.Fatal(err)
	}
	e.mustPass("db")
	lock := e.getLock("db")
	if len(lock.Status.Holders) != 0 || lock.Status.LockDelayUntil == nil {
		t.Fatalf("after the pod is gone: holders %+v, lockDelayUntil %v; want none, and a lock delay", lock.Status.Holders, lock.Status.LockDelayUntil)
	}
	e.clock.Step(10 * time.Second)
	e.heldBy("db", "b")
}
