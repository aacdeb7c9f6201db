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
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/podliveness"
)

// A claim's holder is one of four kinds, each judged its own way: a pod (and, where the lock says
// so, the pod's Node), a heartbeat Lease, a workload object, or none (a detached claim, which
// holds until it is deleted). The steps ask every holder the same questions through the holder
// interface; each kind answers them in its own file (holder_pod.go, holder_lease.go,
// holder_object.go, holder_detached.go). A new kind of holder is one such file, a case in
// holderOf and holderOfRecord, and its field index.

// holder is the holder of one claim, as a pass judges it. Its methods read the scope and the
// claim and write neither.
type holder interface {
	// load reads from the cache what the pass judges this holder by, into the scope's read part.
	load(ctx context.Context, r *Reconciler, s *lockScope, c *locksv1alpha1.LockClaim) error
	// waitVerdict judges the holder of waiting claim c: its wait ends for good (the holder died,
	// or can never hold), it waits aside (the holder does not exist yet), or it waits on.
	waitVerdict(s *lockScope, c *locksv1alpha1.LockClaim) waiterVerdict
	// holdVerdict is the liveness of the holder of c, a claim that holds, and how soon the pass
	// must look again when nothing but time would change it (0: never).
	holdVerdict(s *lockScope, c *locksv1alpha1.LockClaim) (podliveness.Verdict, time.Duration)
	// deletedWith says whether c goes with its holder's foreground deletion, under which the
	// hold lasts until the holder itself is gone.
	deletedWith(s *lockScope, c *locksv1alpha1.LockClaim) bool
	// uid is the holder's UID as the pass knows it: recorded in c's status, else read from the
	// cache; empty when the holder has none or was never seen.
	uid(s *lockScope, c *locksv1alpha1.LockClaim) types.UID
	// noteUID records in c's status the UID of its holder, first seen while c waits, so that a
	// holder of the same name created later is not taken for it.
	noteUID(c *locksv1alpha1.LockClaim, uid types.UID)
	// record is the holder as the lock record keeps it (RecordedHolder), with its UID; nil for none.
	record(uid types.UID) *locksv1alpha1.RecordedHolder
	// rebuild makes vanished claim c name this holder again, from its record (vanished.go): its
	// spec.holder, the UID in its status, and, for a holder that owns its claims, the owner
	// reference that lets a foreground deletion keep the hold.
	rebuild(c *locksv1alpha1.LockClaim, uid types.UID)
	// indexKey is the field index that files claims by this holder, and the key it files c under;
	// empty for none.
	indexKey() (index, key string)
}

// holderOf is the holder that claim c names in spec.holder.
func holderOf(c *locksv1alpha1.LockClaim) holder {
	h := c.Spec.Holder
	switch {
	case h == nil:
		return detachedHolder{}
	case h.PodName != "":
		return podHolder{name: h.PodName}
	case h.LeaseName != "":
		return leaseHolder{name: h.LeaseName}
	case h.Object != nil:
		return objectHolder{ref: *h.Object}
	}
	return detachedHolder{}
}

// holderOfRecord is the holder a record entry's RecordedHolder names, and its UID.
func holderOfRecord(rh *locksv1alpha1.RecordedHolder) (holder, types.UID) {
	switch {
	case rh == nil:
		return detachedHolder{}, ""
	case rh.APIVersion == "v1" && rh.Kind == "Pod":
		return podHolder{name: rh.Name}, rh.UID
	case rh.APIVersion == coordinationv1.SchemeGroupVersion.String() && rh.Kind == "Lease":
		return leaseHolder{name: rh.Name}, ""
	}
	return objectHolder{ref: locksv1alpha1.HolderObject{APIVersion: rh.APIVersion, Kind: rh.Kind, Name: rh.Name}}, rh.UID
}

// sameHolder says whether two recorded holders are one: both detached, or the same kind and name
// with the same UID (a pod or object of that name with another UID, or one whose UID is not known,
// is not the same; a Lease has none).
func sameHolder(a, b *locksv1alpha1.RecordedHolder) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.APIVersion != b.APIVersion || a.Kind != b.Kind || a.Name != b.Name || a.UID != b.UID {
		return false
	}
	h, _ := holderOfRecord(a)
	_, isLease := h.(leaseHolder)
	return isLease || a.UID != ""
}

// judgeWaiting is what becomes of waiting claim c before the queue is served: its wait ends when
// the lock is being deleted, else its holder decides (holder.waitVerdict). It writes nothing; the
// queue step applies the verdict (applyWaitVerdict).
func (s *lockScope) judgeWaiting(c *locksv1alpha1.LockClaim) waiterVerdict {
	if v := judgeWaiter(waiterFacts{lockDeleting: !s.lock.DeletionTimestamp.IsZero(), lockName: s.lock.Name}); v.end != nil {
		return v
	}
	return holderOf(c).waitVerdict(s, c)
}

// holdVerdict is the liveness of the holder of c, a claim that holds, and when to look again.
func (s *lockScope) holdVerdict(c *locksv1alpha1.LockClaim) (podliveness.Verdict, time.Duration) {
	return holderOf(c).holdVerdict(s, c)
}

// recordedHolderOf is the holder of c as the lock record keeps it, with the UID the pass knows.
func (s *lockScope) recordedHolderOf(c *locksv1alpha1.LockClaim) *locksv1alpha1.RecordedHolder {
	h := holderOf(c)
	return h.record(h.uid(s, c))
}

// controllerRef is an owner reference to the controller of a claim.
func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	controller := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &controller}
}
