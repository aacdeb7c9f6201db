//go:build mutants

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
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/fencing"
	"github.com/lockwarden/lockwarden/internal/mutant"
)

// In a build with the mutants tag, the engine's seams (seams.go) take the deliberate bugs that
// LOCKWARDEN_MUTANT lists. docs/reliability.md says which checker catches each.
func init() {
	mutateGrants()
	mutateHolds()
	mutateTokens()
	mutateWrites()
}

// mutateGrants: bugs in who is granted what.
func mutateGrants() {
	if mutant.Active(mutant.GrantOneByOne) {
		seams.jointOthers = func(*locksv1alpha1.LockClaim) []string { return nil } // Held with the first lock alone
	}
	if mutant.Active(mutant.IgnorePlaces) {
		next := seams.planGrants
		seams.planGrants = func(queue []waiterSlot, holds []holdSlot, maxHolders int32) int {
			if maxHolders > 1 {
				maxHolders = fencing.PerWrite // every Shared claim at the head, whatever the places
			}
			return next(queue, holds, maxHolders)
		}
	}
	if mutant.Active(mutant.WriterBesideReaders) {
		next := seams.planGrants
		seams.planGrants = func(queue []waiterSlot, holds []holdSlot, maxHolders int32) int {
			if len(queue) > 0 && queue[0].mode == grantExclusive {
				holds = nil // the holders are overlooked when a writer is at the head
			}
			return next(queue, holds, maxHolders)
		}
	}
	if mutant.Active(mutant.IgnoreLockDelay) {
		seams.grantDelay = func(*time.Time, time.Time) time.Duration { return 0 }
	}
	if mutant.Active(mutant.GrantUnacquired) {
		seams.acquired = func(lease backends.Lease, err error, asked backends.Lease) (backends.Lease, error) {
			if errors.Is(err, backends.ErrLocked) {
				return asked, nil // granted although the backend refused the key
			}
			return lease, err
		}
	}
}

// mutateHolds: bugs in which holds go on.
func mutateHolds() {
	if mutant.Active(mutant.ResumeLapsed) {
		// A hold the backend let go while no controller renewed it is taken for alive: the pass
		// takes the key again for it and it goes on with its old token (etcd #11456's class).
		seams.resumeFound = func(current backends.Lease, err error, identity string) (backends.Lease, error) {
			if errors.Is(err, backends.ErrNotHeld) {
				return backends.Lease{Identity: identity}, nil
			}
			return current, err
		}
		seams.resumeAlive = func(expire time.Time, _ bool, err error) (time.Time, bool, error) {
			return expire, err == nil, err
		}
	}
	if mutant.Active(mutant.JoinAnyHold) {
		next := seams.holdToJoin
		seams.holdToJoin = func(s *lockScope, c *locksv1alpha1.LockClaim) *locksv1alpha1.LockHolder {
			if rec := next(s, c); rec != nil {
				return rec
			}
			if len(s.lock.Status.Holders) > 0 {
				return &s.lock.Status.Holders[0] // the lock's first hold, whoever holds it
			}
			return nil
		}
	}
	if mutant.Active(mutant.KeepDeadHolder) {
		seams.holderEnding = func(f holderFacts) *ending {
			if end := holderEnding(f); end != nil && end.reason != locksv1alpha1.ReasonHolderTerminated {
				return end
			}
			return nil
		}
	}
}

// mutateTokens: bugs in the fencing tokens a grant issues.
func mutateTokens() {
	if mutant.Active(mutant.TokenReuse) || mutant.Active(mutant.TokenLower) {
		seams.issueTokens = func(lock *locksv1alpha1.DistributedLock, n int) ([]int64, error) {
			tokens, err := issueTokens(lock, n)
			if err != nil {
				return nil, err
			}
			switch last := lock.Status.FencingToken; {
			case last > 0 && mutant.Active(mutant.TokenReuse):
				tokens[0] = last
			case last > fencing.Offset+1 && mutant.Active(mutant.TokenLower):
				tokens[0] = last - 1
			}
			return tokens, nil
		}
	}
}

// mutateWrites: bugs in what the pass writes and releases.
func mutateWrites() {
	if mutant.Active(mutant.BlindStatus) {
		seams.claimPatch = func(before client.Object) client.Patch { return client.MergeFrom(before) }
	}
	if mutant.Active(mutant.ReleaseUnchecked) {
		seams.passDone = func(ctx context.Context, s *lockScope) {
			// A lock its record shows free is released on the backend as it is, whoever holds
			// the key: a client outside lockwarden included.
			if s.use.session == nil || len(s.lock.Status.Holders) > 0 {
				return
			}
			if cur, err := s.use.session.Inspect(ctx, s.use.key); err == nil {
				_ = s.use.session.Release(ctx, cur)
			}
		}
	}
}
