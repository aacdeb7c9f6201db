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

package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// The names by which a pod asks for a lock and learns its fencing token (docs/design.md §3, Pods).
const (
	// PodLockAnnotation on a pod names the DistributedLock, in the pod's namespace, that the pod
	// needs: the controller creates a LockClaim for the pod, owned by it.
	PodLockAnnotation = "locks.lockwarden.io/lock"
	// PodLockModeAnnotation, beside PodLockAnnotation, says how the pod holds the lock: Shared
	// (the default when absent: one of the lock's spec.maxHolders places) or Exclusive (alone).
	// The controller copies it into the claim's spec.mode when it creates the claim; a value that
	// is neither gets no claim and a Warning event InvalidLockModeAnnotation on the pod. A claim's
	// mode is immutable, so a value changed after the claim exists changes nothing: the pod holds
	// or waits in its claim's mode, and a Warning event LockModeChanged on the pod says so. To
	// hold in another mode, the pod is replaced (a new pod makes a new claim).
	PodLockModeAnnotation = "locks.lockwarden.io/lock-mode"
	// LockPriorityAnnotation, beside PodLockAnnotation on a pod or a workload object, is the
	// claim's spec.priority (a whole number; absent means 0). The pod's own spec.priority (its
	// PriorityClass) is not used: it says what the scheduler may preempt and is given by cluster
	// admins for that, not a place in a lock's queue. A value that is not a 32-bit whole number
	// gets no claim and a Warning event InvalidLockPriorityAnnotation. Immutable like the mode: a
	// value changed after the claim exists changes nothing.
	LockPriorityAnnotation = "locks.lockwarden.io/lock-priority"
	// PodSchedulingGate, with PodLockAnnotation, keeps the pod unscheduled until its claim holds
	// the lock. The controller removes it in the same write that adds the token annotation.
	PodSchedulingGate = "locks.lockwarden.io/lock"
	// PodFencingTokenAnnotation carries the pod's fencing token once its claim holds the lock, for
	// a downward-API volume (fieldRef metadata.annotations['locks.lockwarden.io/fencing-token']).
	PodFencingTokenAnnotation = "locks.lockwarden.io/fencing-token"
	// PodHolderAnnotation carries the holder identity of the pod's claim once it holds the lock.
	PodHolderAnnotation = "locks.lockwarden.io/holder"
	// PodLockWaitAnnotation, beside PodLockAnnotation, says how the pod waits for its lock:
	// PodLockWaitGated (the default when absent) or PodLockWaitStandby. Any other value gets a
	// Warning event InvalidLockWaitAnnotation on the pod, which then waits as Gated (the admission
	// policy gates every annotated pod that does not ask for Standby).
	PodLockWaitAnnotation = "locks.lockwarden.io/lock-wait"
	// PodRoleLabel follows the hold on every pod with PodLockAnnotation: PodRoleHolder on the
	// pods whose claim holds the lock (and that are not terminating), PodRoleStandby on the
	// others. A Service that selects it sends traffic only to the holders.
	PodRoleLabel = "locks.lockwarden.io/role"
	// PodClaimLabel on a LockClaim created from a pod annotation names that pod.
	PodClaimLabel = "locks.lockwarden.io/pod"
	// LockWaitTimeoutAnnotation, beside PodLockAnnotation on a workload object, bounds how long
	// its claim waits (the claim's spec.waitTimeoutSeconds; 0 takes the lock only if it is free).
	// A value that is not a whole number of seconds from 0 up gets no claim and a Warning event
	// InvalidLockWaitTimeoutAnnotation.
	LockWaitTimeoutAnnotation = "locks.lockwarden.io/lock-wait-timeout-seconds"
	// WorkloadClaimLabel on a LockClaim created from a workload object's annotation names that
	// object (its name, cut to 63 characters; the claim's spec.holder.object names it in full).
	WorkloadClaimLabel = "locks.lockwarden.io/workload"

	// HeartbeatLabel, with the value "true", marks a coordination.k8s.io Lease that a LockClaim's
	// spec.holder.leaseName may name. The controller caches and watches only Leases with it, so
	// that the cluster's other Leases (node heartbeats renew every 10 s) cost it nothing.
	HeartbeatLabel = "locks.lockwarden.io/heartbeat"
)

// How an annotated pod waits for its lock (PodLockWaitAnnotation).
const (
	// PodLockWaitGated: the pod is not scheduled until it holds the lock (the admission policy
	// adds PodSchedulingGate, the controller lifts it at grant).
	PodLockWaitGated = "Gated"
	// PodLockWaitStandby: the pod runs at once as a hot standby, and PodRoleLabel says whether it
	// holds (leader election for any workload).
	PodLockWaitStandby = "Standby"
)

// The values of PodRoleLabel.
const (
	// PodRoleHolder marks a pod that holds the lock.
	PodRoleHolder = "holder"
	// PodRoleStandby marks a pod that waits for the lock, or held it and no longer does, or is
	// terminating while it still holds (no new traffic should reach it).
	PodRoleStandby = "standby"
)

// PodClaimName is the name of the claim made for pod (with UID uid) and lock, by lockctl in the
// pod or by the controller for the pod's annotation: both make the one claim. It is stable across
// restarts of the pod's containers and different for a replacement pod of the same name.
func PodClaimName(pod string, uid types.UID, lock string) string {
	sum := sha256.Sum256([]byte(string(uid) + "/" + lock))
	suffix := hex.EncodeToString(sum[:])[:10]
	base := pod + "-" + lock
	const maxBase = 253 - 1 - 10
	if len(base) > maxBase {
		base = strings.TrimRight(base[:maxBase], "-.")
	}
	return base + "-" + suffix
}

// WorkloadClaimName is the name of the claim the controller makes for a workload object (name,
// with UID uid) annotated with lock: the pod claim's rule, so that a Job and a pod of the same
// name and lock never share a name (their UIDs differ) and a new run of the same name gets a new
// claim.
func WorkloadClaimName(name string, uid types.UID, lock string) string {
	return PodClaimName(name, uid, lock)
}
