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

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// Claims carry no finalizer (docs/design.md §3 Release): deleting one is a single write, and the lock
// record is what releases its hold. Each record entry names its claim by name and UID and keeps
// the claim's holder (RecordedHolder). A pass that finds no claim for an entry rebuilds the claim
// the entry describes, a vanished claim, deleted as of the pass, and lets it go through the same
// steps as a claim whose deletion it watched: its holder's fate decides whether the hold ended by
// a release or without one, and a claim deleted with its holder's foreground deletion holds
// until the holder is gone. A vanished claim is never written; the record's write says it all.

// vanishedClaim is the claim that record entry rec names, rebuilt from the record for a pass that
// found it gone: Held with the entry's identity and token, deleted at now, and, like the claims
// that lockctl and the controllers make, controlled by its pod or workload object (so that a
// claim gone with its holder's foreground deletion holds until the holder is gone, the safe
// reading when it might have been deleted by hand in that window).
func vanishedClaim(rec *locksv1alpha1.LockHolder, lock types.NamespacedName, now time.Time) *locksv1alpha1.LockClaim {
	holder, holderUID := holderOfRecord(rec.Holder)
	deleted := metav1.NewTime(now)
	c := &locksv1alpha1.LockClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: lock.Namespace, Name: rec.Claim, UID: rec.ClaimUID, DeletionTimestamp: &deleted},
		Spec:       locksv1alpha1.LockClaimSpec{LockName: lock.Name},
		Status: locksv1alpha1.LockClaimStatus{
			Phase:          locksv1alpha1.ClaimHeld,
			HolderIdentity: rec.Identity,
			FencingToken:   rec.FencingToken,
			AcquireTime:    rec.AcquireTime.DeepCopy(),
			ExpireTime:     rec.ExpireTime.DeepCopy(),
		},
	}
	holder.rebuild(c, holderUID)
	return c
}

// vanishedEntries are the indexes of the record entries whose claim is gone: no claim of the pass
// shares the entry, and none has the UID it names. Entries written before claims lost their
// finalizer name no UID, and an entry whose claim is still there but has ended (its status
// written, the record not) names one that exists: with no claim sharing them, both are released
// as a release, as before.
func vanishedEntries(recs []locksv1alpha1.LockHolder, claims []*locksv1alpha1.LockClaim) []int {
	shared := make([]bool, len(recs))
	exists := map[types.UID]bool{}
	for _, c := range claims {
		exists[c.UID] = true
		if i := recordIndex(recs, c); i >= 0 {
			shared[i] = true
		}
	}
	var out []int
	for i := range recs {
		if !shared[i] && recs[i].ClaimUID != "" && !exists[recs[i].ClaimUID] {
			out = append(out, i)
		}
	}
	return out
}

// loadVanished adds to the pass the claims its lock record names and the cache no longer has,
// with their holders, so that endHolds judges them like the claims it sees deleted.
func (r *Reconciler) loadVanished(ctx context.Context, s *lockScope) error {
	if s.lock == nil {
		return nil
	}
	for _, i := range vanishedEntries(s.lock.Status.Holders, s.claims) {
		c := vanishedClaim(&s.lock.Status.Holders[i], s.name, s.now)
		if s.vanished == nil {
			s.vanished = map[types.UID]bool{}
		}
		s.vanished[c.UID] = true
		s.read[c.UID] = claimView{part: c.DeepCopy()}
		s.claims = append(s.claims, c)
		if err := holderOf(c).load(ctx, r, s, c); err != nil {
			return err
		}
	}
	return nil
}

// fillRecord brings a kept record entry up to the claims that share it: the claim it names (an
// heir of the same identity when the named one let go) with that claim's UID and holder. Entries
// granted before claims lost their finalizer get both here, once.
func (s *lockScope) fillRecord(rec *locksv1alpha1.LockHolder, keep []*locksv1alpha1.LockClaim) {
	named := keep[0]
	for _, c := range keep {
		if c.Name == rec.Claim {
			named = c
			break
		}
	}
	rec.Claim, rec.ClaimUID = named.Name, named.UID
	if rec.Holder == nil {
		rec.Holder = s.recordedHolderOf(named)
	}
}

// recordIndexKeys are the keys under which indexLockRecord files a lock: its record's claims and
// the holders it keeps, as workloads.RefKeyOf spells them ("LockClaim.locks.lockwarden.io/db-web-0",
// "Pod/web-0", "Lease.coordination.k8s.io/worker", "Job.batch/nightly"), so that an event of a
// holder, or the Renewer's news of a claim, still wakes the lock once the claim is gone.
func recordIndexKeys(recs []locksv1alpha1.LockHolder) []string {
	var keys []string
	for i := range recs {
		keys = append(keys, claimRecordKey(recs[i].Claim))
		if rh := recs[i].Holder; rh != nil {
			if key := workloads.RefKeyOf(rh.APIVersion, rh.Kind, rh.Name); key != "" {
				keys = append(keys, key)
			}
		}
	}
	return keys
}

// claimRecordKey, podRecordKey and leaseRecordKey are the indexLockRecord keys of a claim, a pod
// and a heartbeat Lease.
func claimRecordKey(name string) string {
	return workloads.RefKey(locksv1alpha1.GroupVersion.WithKind("LockClaim").GroupKind(), name)
}
func podRecordKey(name string) string { return workloads.RefKey(schema.GroupKind{Kind: "Pod"}, name) }
func leaseRecordKey(name string) string {
	return workloads.RefKey(coordinationv1.SchemeGroupVersion.WithKind("Lease").GroupKind(), name)
}

// shedFinalizers takes the release finalizer off the claims that an earlier lockwarden gave it,
// once the record written in this pass names their hold by claim UID (fillRecord): from then on
// the record releases them. A claim being deleted loses it in writeClaims (removeFinalizer). A
// claim with no status yet keeps it until a pass has written one: its place in the queue is read
// from its resourceVersion until then (stampArrival), and an update of its metadata would move it
// behind the claims that came after it.
func (r *Reconciler) shedFinalizers(ctx context.Context, s *lockScope) (stepResult, error) {
	var shed []*locksv1alpha1.LockClaim
	for _, c := range s.claims {
		if s.vanished[c.UID] || !c.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(c, locksv1alpha1.Finalizer) {
			continue
		}
		if placedByVersion(c) {
			continue // the pass wrote no status: a new lock's first pass only takes its key
		}
		if i := recordIndex(s.lock.Status.Holders, c); i >= 0 && s.lock.Status.Holders[i].ClaimUID == "" {
			continue // its entry is filled in by a later pass (a lock being deleted writes none)
		}
		shed = append(shed, c)
	}
	return stepResult{}, inParallel(shed, claimWriters, func(c *locksv1alpha1.LockClaim) error { return r.shedFinalizer(ctx, s, c) })
}

// shedFinalizer takes the release finalizer off a claim that is not being deleted.
func (r *Reconciler) shedFinalizer(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) error {
	if !controllerutil.RemoveFinalizer(c, locksv1alpha1.Finalizer) {
		return nil
	}
	if err := r.awaitClaim(ctx, s, c); err != nil {
		return err
	}
	if err := r.Update(ctx, c); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.memory.written.note(c)
	return nil
}
