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
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
)

// seams are the points where the reliability harness's deliberate bugs (package mutant) enter the
// engine: each is a decision or a call the pass makes through this table instead of directly. A
// build with the mutants tag swaps in broken ones (mutants.go) for the bugs LOCKWARDEN_MUTANT
// names; every other build keeps these, and no decision holds a branch for a bug.
var seams = struct {
	// planGrants says how many claims a pass tries to grant (decide.go).
	planGrants func(queue []waiterSlot, holds []holdSlot, maxHolders int32) int
	// grantDelay says how long a lock must still wait before it grants (decide.go).
	grantDelay func(until *time.Time, now time.Time) time.Duration
	// holderEnding says how a recorded holder's part in its hold ends (decide.go).
	holderEnding func(holderFacts) *ending
	// issueTokens issues the fencing tokens of a grant write (write.go).
	issueTokens func(lock *locksv1alpha1.DistributedLock, n int) ([]int64, error)
	// acquired is the backend's answer to an acquire as the pass takes it: as it is. asked is
	// the hold the claim asked for, from now for a lease.
	acquired func(lease backends.Lease, err error, asked backends.Lease) (backends.Lease, error)
	// claimPatch is the patch of a claim's status write: preconditioned on the resourceVersion
	// the pass read (writeClaim says why).
	claimPatch func(before client.Object) client.Patch
	// passDone runs once a pass has written what it decided: nothing.
	passDone func(ctx context.Context, s *lockScope)
	// resumeFound is the backend's answer to the Inspect with which a pass resumes a hold after
	// a restart or a leader change, as the pass takes it: as it is (holds.go). identity is the
	// hold's.
	resumeFound func(current backends.Lease, err error, identity string) (backends.Lease, error)
	// resumeAlive is the record keeper's answer to whether a resumed hold lives, as the pass
	// takes it: as it is (holds.go).
	resumeAlive func(expire time.Time, alive bool, err error) (time.Time, bool, error)
	// holdToJoin is the recorded hold a waiting claim may join (reentrancy): the one of its own
	// identity and its own holder, or nil (queue.go).
	holdToJoin func(s *lockScope, c *locksv1alpha1.LockClaim) *locksv1alpha1.LockHolder
	// jointOthers are the locks a joint grant takes besides the home lock: all of the claim's
	// others (joint.go).
	jointOthers func(c *locksv1alpha1.LockClaim) []string
}{
	planGrants:   planGrants,
	grantDelay:   grantDelay,
	holderEnding: holderEnding,
	issueTokens:  issueTokens,
	acquired: func(lease backends.Lease, err error, _ backends.Lease) (backends.Lease, error) {
		return lease, err
	},
	claimPatch: func(before client.Object) client.Patch {
		return client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	},
	passDone: func(context.Context, *lockScope) {},
	resumeFound: func(current backends.Lease, err error, _ string) (backends.Lease, error) {
		return current, err
	},
	resumeAlive: func(expire time.Time, alive bool, err error) (time.Time, bool, error) {
		return expire, alive, err
	},
	holdToJoin:  holdToJoin,
	jointOthers: func(c *locksv1alpha1.LockClaim) []string { return claimLocks(c)[1:] },
}
