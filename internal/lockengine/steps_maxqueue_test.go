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

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestStepMaxQueue: a lock with maxQueue 1 grants a, queues b, and ends c at once (Failed,
// QueueFull) instead of queueing it; once b holds, the next newcomer finds room.
func TestStepMaxQueue(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db", func(l *locksv1alpha1.DistributedLock) { l.Spec.MaxQueue = ptr.To[int32](1) })
	e.claim("a", "db")
	e.mustPass("db") // takes the key
	e.mustPass("db") // grants a
	e.claim("b", "db")
	e.claim("c", "db")
	e.mustPass("db")

	if b := e.getClaim("b"); b.Status.Phase != locksv1alpha1.ClaimPending {
		t.Fatalf("claim b: phase %q, want Pending", b.Status.Phase)
	}
	c := e.getClaim("c")
	cond := meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionAcquired)
	if c.Status.Phase != locksv1alpha1.ClaimFailed || cond == nil || cond.Reason != locksv1alpha1.ReasonQueueFull {
		t.Fatalf("claim c: phase %q, condition %+v; want Failed with reason %s", c.Status.Phase, cond, locksv1alpha1.ReasonQueueFull)
	}
	t.Logf("claim c: %s", cond.Message)

	e.remove(e.getClaim("a"))
	e.mustPass("db") // grants b
	e.claim("d", "db")
	e.mustPass("db")
	if b := e.getClaim("b"); b.Status.Phase != locksv1alpha1.ClaimHeld {
		t.Fatalf("claim b: phase %q, want Held", b.Status.Phase)
	}
	if d := e.getClaim("d"); d.Status.Phase != locksv1alpha1.ClaimPending {
		t.Fatalf("claim d: phase %q, want Pending (the queue had room again)", d.Status.Phase)
	}
}
