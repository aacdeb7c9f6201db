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

// Condition types. Reasons are grouped below by the condition they explain; an event emitted on
// a transition uses the condition's reason as its own.
const (
	// ConditionReady is True when the object can do its job: a LockBackend answers its probe, a
	// DistributedLock's backend is usable, a LockClaim can be (or is) granted.
	ConditionReady = "Ready"

	// ConditionAcquired, on a LockClaim, is True exactly while the claim holds its lock.
	ConditionAcquired = "Acquired"

	// ConditionEvicted, on a LockClaim that lost its lock under lossPolicy Evict, is True once
	// its holder pod was evicted, False while a PodDisruptionBudget refuses the eviction.
	ConditionEvicted = "Evicted"

	// ConditionBackendReady, on a DistributedLock, is True while its LockBackend exists, admits
	// the lock's namespace and answers its probe.
	ConditionBackendReady = "BackendReady"
)

// Reasons for a LockClaim's Acquired and Ready conditions.
const (
	// ReasonAcquired: the backend holds the lock for this claim and a fencing token was issued.
	ReasonAcquired = "Acquired"
	// ReasonQueued: another claim is ahead of this one in the lock's queue.
	ReasonQueued = "Queued"
	// ReasonContended: the claim is at the head of the queue but a client outside lockwarden
	// holds the key on the backend.
	ReasonContended = "Contended"
	// ReasonBackendUnavailable: the backend cannot be reached or refused the request.
	ReasonBackendUnavailable = "BackendUnavailable"
	// ReasonLockNotFound: the DistributedLock named by spec.lockName does not exist.
	ReasonLockNotFound = "LockNotFound"
	// ReasonPodNotFound: the pod named by spec.holder.podName does not exist.
	ReasonPodNotFound = "PodNotFound"
	// ReasonHeartbeatNotFound: the heartbeat Lease named by spec.holder.leaseName does not exist
	// (or lacks the label HeartbeatLabel, or spec.leaseDurationSeconds); the claim keeps its place
	// and waits for it.
	ReasonHeartbeatNotFound = "HeartbeatNotFound"
	// ReasonWorkloadNotFound: the workload object named by spec.holder.object does not exist; the
	// claim waits aside for it, as for a pod.
	ReasonWorkloadNotFound = "WorkloadNotFound"
	// ReasonWorkloadKindNotWatched: spec.holder.object names a kind that the install does not list
	// among its workload kinds (the manager's --workload-kinds, the chart's workloads values), so
	// the controller cannot tell when that object finishes: the claim fails.
	ReasonWorkloadKindNotWatched = "WorkloadKindNotWatched"
	// ReasonHolderTerminated: the holder pod is gone, replaced or finished, the holder's
	// heartbeat Lease was deleted or not renewed in time, or the holder workload object finished,
	// was deleted or replaced, so the lock was released.
	ReasonHolderTerminated = "HolderTerminated"
	// ReasonClaimDeleted: the claim is being deleted and the lock was released.
	ReasonClaimDeleted = "ClaimDeleted"
	// ReasonRenewFailed: a renewal found the lock expired or owned by someone else.
	ReasonRenewFailed = "RenewFailed"
	// ReasonWaitTimedOut: spec.waitTimeoutSeconds passed before the lock was granted.
	ReasonWaitTimedOut = "WaitTimedOut"
	// ReasonLockDelay: the claim is at the head of the queue, and the lock waits out its
	// lockDelaySeconds after a hold that ended without a release.
	ReasonLockDelay = "LockDelay"
	// ReasonQueueFull: the lock already had spec.maxQueue claims waiting when the claim came;
	// it ended Failed without waiting.
	ReasonQueueFull = "QueueFull"
	// ReasonWaitingForLocks: a claim with spec.lockNames is first in line on some of its locks
	// and waits for the others; it holds none of them meanwhile (the message names them).
	ReasonWaitingForLocks = "WaitingForLocks"
	// ReasonPartialGrant: a grant of a claim with spec.lockNames stopped half way (a controller
	// restarted, a write failed), leaving holds on some of its locks; status.locks lists them
	// while the controller gives them back, and the claim goes on waiting for all its locks.
	ReasonPartialGrant = "PartialGrant"
	// ReasonMixedBackends: the locks of a claim's spec.lockNames are not all on one LockBackend;
	// the claim waits, Ready=False, holding none of them. (One that does not exist: LockNotFound.)
	ReasonMixedBackends = "MixedBackends"
)

// Reasons for a LockClaim's Evicted condition (lossPolicy Evict), also the reasons of its events.
const (
	// ReasonHolderEvicted: the holder pod of a lost hold was evicted.
	ReasonHolderEvicted = "HolderEvicted"
	// ReasonEvictionBlocked: the Eviction API refused to evict the holder pod (a
	// PodDisruptionBudget allows no disruption now); the controller retries.
	ReasonEvictionBlocked = "EvictionBlocked"
)

// Reasons for a LockBackend's Ready condition and a DistributedLock's BackendReady and Ready
// conditions.
const (
	// ReasonBackendReachable: the last probe connected, authenticated and wrote.
	ReasonBackendReachable = "BackendReachable"
	// ReasonBackendDegraded: the last probe succeeded with less redundancy than configured (a
	// Redlock node down while a majority answers): Ready stays True, the message names what
	// failed.
	ReasonBackendDegraded = "BackendDegraded"
	// ReasonBackendUnreachable: the last probe failed; the message carries the error.
	ReasonBackendUnreachable = "BackendUnreachable"
	// ReasonSecretNotFound: a Secret the backend names is missing, lacks the key, or lies outside
	// the controller's Secret namespace.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonBackendRecovered: the backend answers again after a failure (event reason).
	ReasonBackendRecovered = "BackendRecovered"
	// ReasonSecretRotated: a Secret the backend reads changed, and a new session opened with it
	// takes over the held locks (event reason).
	ReasonSecretRotated = "SecretRotated"
	// ReasonBackendNotFound: the DistributedLock names a LockBackend that does not exist.
	ReasonBackendNotFound = "BackendNotFound"
	// ReasonNamespaceNotAllowed: the backend's namespaceSelector does not admit the lock's
	// namespace.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonKeyConflict: another DistributedLock on the same backend resolves to the same backend
	// key and took it first; this lock grants nothing until that one is gone (a DistributedLock's
	// Ready condition and its claims' Ready condition).
	ReasonKeyConflict = "KeyConflict"
)

// Finalizer is set on DistributedLocks, so that the controller releases a lock's holder and its
// backend key before the lock goes away. LockClaims carry none: the lock record releases a
// deleted claim's hold. Earlier builds set it on claims too; the controller takes it off them.
const Finalizer = "locks.lockwarden.io/release"
