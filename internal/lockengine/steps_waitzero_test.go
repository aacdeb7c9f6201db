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

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestStepWaitZeroOnANewLock: a claim with waitTimeoutSeconds 0 on a lock nobody holds, created
// before the lock's first pass. That pass only takes the lock's key (it grants in the next one,
// a tenth of a second later), so it has not tried the claim; it used to end the claim TimedOut
// all the same, since its deadline (its creation) had passed. Seen as a flake of the controller
// suite's "waitTimeoutSeconds 0 takes a free lock" in a clean-clone CI run.
func TestStepWaitZeroOnANewLock(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("free")
	e.claim("once", "free", func(c *locksv1alpha1.LockClaim) { c.Spec.WaitTimeoutSeconds = ptr.To[int32](0) })
	e.mustPass("free") // takes the key
	if c := e.getClaim("once"); c.Status.Phase == locksv1alpha1.ClaimTimedOut {
		t.Fatalf("the pass that only took the key timed the claim out: %+v", c.Status)
	}
	e.mustPass("free")
	if c := e.getClaim("once"); c.Status.Phase != locksv1alpha1.ClaimHeld {
		t.Fatalf("the claim after the pass that grants: phase %q, want Held", c.Status.Phase)
	}
}
