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

package lockclient

import (
	"context"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// A waiter learns of its grant from the lock record (docs/design.md §3 Pods): the controller names the
// claim in its DistributedLock's status.holders, by name and UID, with its token, in the write
// that grants it, and writes the claim's own status (Held, Acquired) one write later. The record
// names a claim only after the backend took the lock for it, and a deposed controller's record
// write fails its precondition, so it proves the grant as well as the claim's status does.

// recordedHold is the hold of claim as lock's record names it: matched by the claim's name and
// UID (a claim deleted and created again under its name is another claim); nil when the record
// does not name it.
func recordedHold(claim *locksv1alpha1.LockClaim, lock *locksv1alpha1.DistributedLock) *Result {
	if claim == nil || lock == nil || claim.UID == "" || len(claim.Spec.LockNames) > 0 {
		return nil // a claim of several locks is Held by its own status alone
	}
	for _, h := range lock.Status.CurrentHolders() {
		if h.Claim != claim.Name || h.ClaimUID != claim.UID {
			continue
		}
		r := &Result{Namespace: claim.Namespace, Lock: claim.Spec.LockName, Claim: claim.Name, uid: claim.UID,
			Identity: h.Identity, Mode: claimMode(claim), FencingToken: h.FencingToken, AcquireTime: h.AcquireTime.Time}
		if holder := claim.Spec.Holder; holder != nil {
			r.Pod = holder.PodName
		}
		if h.ExpireTime != nil {
			r.ExpireTime = h.ExpireTime.Time
		}
		return r
	}
	return nil
}

// watchRecord watches claim's DistributedLock until its record names the claim, and returns that
// hold; nil when ctx ends first, or when the lock cannot be watched: a lockctl Role from before
// lockctl watched locks grants get alone, and the claim's own status then tells, one write later.
func (c *Client) watchRecord(ctx context.Context, claim *locksv1alpha1.LockClaim) *Result {
	var res *Result
	_ = watchNamed(ctx, c.kube, "DistributedLock", claim.Namespace, claim.Spec.LockName, &locksv1alpha1.DistributedLockList{},
		func(l *locksv1alpha1.DistributedLockList) *locksv1alpha1.DistributedLock {
			if len(l.Items) == 0 {
				return nil
			}
			return &l.Items[0]
		}, func(lock *locksv1alpha1.DistributedLock) (bool, error) {
			res = recordedHold(claim, lock)
			return res != nil, nil
		})
	return res
}
