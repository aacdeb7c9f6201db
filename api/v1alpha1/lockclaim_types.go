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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ClaimHolder says on whose behalf a lock is held.
// +kubebuilder:validation:XValidation:rule="!(has(self.podName) && has(self.leaseName))",message="holder.podName and holder.leaseName cannot both be set: a pod's own liveness is its heartbeat"
// +kubebuilder:validation:XValidation:rule="!(has(self.object) && (has(self.podName) || has(self.leaseName)))",message="holder.object cannot be set with holder.podName or holder.leaseName: a claim has one holder"
type ClaimHolder struct {
	// podName is the pod, in the claim's namespace, that holds the lock. The controller releases
	// the lock as soon as that pod is gone, replaced (another UID) or finished. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="podName must be a pod name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="holder.podName is immutable; create a new LockClaim for another pod"
	PodName string `json:"podName,omitempty"`

	// leaseName names a coordination.k8s.io Lease, in the claim's namespace, that the claimant
	// renews as its heartbeat: the liveness of a detached claim's holder, as a pod's is for a pod
	// claim (the two cannot both be set). The Lease must carry the label
	// locks.lockwarden.io/heartbeat: "true" (the controller watches only such Leases) and set
	// spec.leaseDurationSeconds. Expiry is judged by when the controller saw the Lease change,
	// never by comparing spec.renewTime with the controller's clock, so that clock skew between
	// the claimant and the controller cannot release a live holder early: a Lease that the
	// controller has not seen change for its leaseDurationSeconds, or that was deleted, ends the
	// claim like a dead pod (phase Released, reason HolderTerminated) and the next claim is
	// granted. A waiting claim whose Lease does not exist yet keeps its place, with reason
	// HeartbeatNotFound, and is granted only while its Lease is renewed. lockctl run outside a
	// pod, and lockclient with Request.Heartbeat, create and renew it. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="leaseName must be a Lease name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="holder.leaseName is immutable; create a new LockClaim for another heartbeat"
	LeaseName string `json:"leaseName,omitempty"`

	// object is a workload object in the claim's namespace (a batch/v1 Job, a Tekton PipelineRun
	// or TaskRun, an Argo Workflow, or another kind the install lists in its workload kinds) that
	// holds the lock: the hold lasts while the object exists and has not finished. A Job finishes
	// with its Complete or Failed condition, a PipelineRun or TaskRun when its Succeeded condition
	// leaves Unknown, a Workflow in phase Succeeded, Failed or Error; other kinds only when they
	// are deleted. A run that failed ends its hold without a release (the lock's lockDelaySeconds
	// applies). A kind the install does not list fails the claim with reason
	// WorkloadKindNotWatched. Immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="holder.object is immutable; create a new LockClaim for another object"
	Object *HolderObject `json:"object,omitempty"`

	// identity is the holder's identity on the backend; the pod's UID by default, else the
	// workload object's UID, else the claim's UID. Claims on one lock with the same identity share the hold (reentrancy): they get
	// the same fencing token and the lock is released when the last of them goes. Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[!-~]+$')`,message="identity must be printable ASCII without spaces"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="holder.identity is immutable; create a new LockClaim instead"
	Identity string `json:"identity,omitempty"`
}

// HolderObject names a workload object in the claim's namespace.
type HolderObject struct {
	// apiVersion is the object's group and version, as in its manifest (batch/v1,
	// tekton.dev/v1, argoproj.io/v1alpha1). Only the group must match the install's listed kind:
	// the controller reads the object through the version the install lists.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`

	// kind is the object's kind (Job, PipelineRun, TaskRun, Workflow).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z][A-Za-z0-9]*$')",message="kind must be a Kubernetes kind: letters and digits, starting with a capital (Job, PipelineRun, Workflow)"
	Kind string `json:"kind"`

	// name is the object's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="object.name must be an object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`
}

// LockClaimSpec asks for a lock.
// +kubebuilder:validation:XValidation:rule="(has(self.holder) && has(self.holder.object)) == (has(oldSelf.holder) && has(oldSelf.holder.object))",message="holder.object is immutable; create a new LockClaim for another object"
// +kubebuilder:validation:XValidation:rule="(has(self.holder) && has(self.holder.podName)) == (has(oldSelf.holder) && has(oldSelf.holder.podName))",message="holder.podName is immutable; create a new LockClaim for another pod"
// +kubebuilder:validation:XValidation:rule="(has(self.holder) && has(self.holder.leaseName)) == (has(oldSelf.holder) && has(oldSelf.holder.leaseName))",message="holder.leaseName is immutable; create a new LockClaim for another heartbeat"
// +kubebuilder:validation:XValidation:rule="(has(self.holder) && has(self.holder.identity)) == (has(oldSelf.holder) && has(oldSelf.holder.identity))",message="holder.identity is immutable; create a new LockClaim instead"
// +kubebuilder:validation:XValidation:rule="has(self.lockName) != has(self.lockNames)",message="set exactly one of lockName (one lock) and lockNames (2 to 8 locks held together)"
// +kubebuilder:validation:XValidation:rule="has(self.lockNames) == has(oldSelf.lockNames)",message="lockNames is immutable; create a new LockClaim for other locks"
type LockClaimSpec struct {
	// lockName is the DistributedLock, in the claim's namespace, that this claim asks for.
	// Exactly one of lockName and lockNames is set. Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="lockName must be the name of a DistributedLock: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="lockName is immutable; create a new LockClaim for another lock"
	LockName string `json:"lockName,omitempty"`

	// lockNames are 2 to 8 DistributedLocks of the claim's namespace, all on one LockBackend, that
	// this claim holds together: it is Held only while it holds every one of them, each with a
	// fencing token of its own (status.locks); it holds none of them while it waits. Exactly one
	// of lockName and lockNames is set. Immutable.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(n, !format.dns1123Subdomain().validate(n).hasValue())",message="lockNames must be names of DistributedLocks: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="lockNames is immutable; create a new LockClaim for other locks"
	LockNames []string `json:"lockNames,omitempty"`

	// holder says on whose behalf the lock is held. Without a podName the claim is detached: it
	// holds the lock until it is deleted, or, with a leaseName, until its heartbeat Lease expires.
	// +optional
	Holder *ClaimHolder `json:"holder,omitempty"`

	// mode is how the claim holds the lock. Shared, the default, takes one of the lock's
	// maxHolders places beside other Shared holders; Exclusive holds the lock alone, whatever
	// maxHolders is, and waits until every holder has left. On a lock of one place (maxHolders 1,
	// a mutex) both hold it alone. A read/write lock: maxHolders above 1, readers Shared, writers
	// Exclusive. Claims are granted in order across modes: a waiting Exclusive claim keeps the
	// Shared claims behind it waiting, so that readers cannot starve a writer. Immutable.
	// +optional
	// +kubebuilder:default=Shared
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="mode is immutable; create a new LockClaim to hold the lock in another mode"
	Mode LockMode `json:"mode,omitempty"`

	// waitTimeoutSeconds bounds how long the claim waits for the lock before it gives up with
	// phase TimedOut; 0 tries once. Absent means wait forever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	WaitTimeoutSeconds *int32 `json:"waitTimeoutSeconds,omitempty"`

	// priority places the claim in its lock's queue: a claim of a higher priority is granted
	// before every waiting claim of a lower one, whenever it arrived; claims of one priority are
	// granted in the order they arrived. It never ends a hold: a claim waits for the holders
	// whatever its priority. Shared claims still wait behind an Exclusive claim of their own or a
	// higher priority that waits before them. Default 0; negative values wait behind the default.
	// Immutable.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="priority is immutable; create a new LockClaim to wait at another priority"
	Priority int32 `json:"priority,omitempty"`
}

// LockMode is how a claim holds a lock: beside other holders, or alone.
// +kubebuilder:validation:Enum=Shared;Exclusive
type LockMode string

// The lock modes.
const (
	// LockModeShared takes one of the lock's places beside other Shared holders.
	LockModeShared LockMode = "Shared"
	// LockModeExclusive holds the lock alone.
	LockModeExclusive LockMode = "Exclusive"
)

// IsValid says whether m is one of the lock modes, spelled as the API spells them. The empty
// mode is not: in a claim it stands for the default, Shared.
func (m LockMode) IsValid() bool {
	return m == LockModeShared || m == LockModeExclusive
}

// ClaimPhase is a one-word summary of a claim for humans and columns. Programs should read the
// conditions.
// +kubebuilder:validation:Enum=Pending;Held;Released;Lost;TimedOut;Failed
type ClaimPhase string

// The claim phases. Held is the only phase in which the claim holds the lock; Released, Lost,
// TimedOut and Failed are final.
const (
	ClaimPending  ClaimPhase = "Pending"
	ClaimHeld     ClaimPhase = "Held"
	ClaimReleased ClaimPhase = "Released"
	ClaimLost     ClaimPhase = "Lost"
	ClaimTimedOut ClaimPhase = "TimedOut"
	ClaimFailed   ClaimPhase = "Failed"
)

// LockClaimStatus is the observed state of a LockClaim.
type LockClaimStatus struct {
	// phase summarises the claim.
	// +optional
	Phase ClaimPhase `json:"phase,omitempty"`

	// conditions: Acquired is True exactly while the claim holds the lock
	// (kubectl wait --for=condition=Acquired); Ready is False when the claim cannot proceed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// holderIdentity is the identity under which the lock is (or was) held on the backend.
	// +optional
	HolderIdentity string `json:"holderIdentity,omitempty"`

	// podUID is the UID of the holder pod when the controller first saw it. A pod of the same name
	// with another UID is a replacement, so the lock is not held for it.
	// +optional
	PodUID types.UID `json:"podUID,omitempty"`

	// objectUID is the UID of the holder workload object (spec.holder.object) when the controller
	// first saw it. An object of the same name with another UID is a new run, so the lock is not
	// held for it.
	// +optional
	ObjectUID types.UID `json:"objectUID,omitempty"`

	// fencingToken is the token issued when this claim was granted. Pass it to the resource the
	// lock protects.
	// +optional
	FencingToken int64 `json:"fencingToken,omitempty"`

	// acquireTime is when the lock was granted to this claim.
	// +optional
	AcquireTime *metav1.MicroTime `json:"acquireTime,omitempty"`

	// renewTime is when the lock was last renewed for this claim.
	// +optional
	RenewTime *metav1.MicroTime `json:"renewTime,omitempty"`

	// expireTime is when the lock expires on the backend unless renewed.
	// +optional
	ExpireTime *metav1.MicroTime `json:"expireTime,omitempty"`

	// leaseDurationSeconds is the lease duration in force at the grant.
	// +optional
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds,omitempty"`

	// queuePosition is the claim's place in the lock's queue while it waits; 1 is next. It is
	// exact when the claim is first queued; after that it is rewritten only when the place moves
	// into another band (1, 2-3, 4-7, 8-15, ...), at most once a minute, so that a handoff costs no
	// write per waiting claim: a claim that shows 6 is 4th to 7th in line, as of up to a minute ago.
	// +optional
	QueuePosition int32 `json:"queuePosition,omitempty"`

	// releaseTime is when the claim stopped holding the lock.
	// +optional
	ReleaseTime *metav1.MicroTime `json:"releaseTime,omitempty"`

	// observedGeneration is the generation of the spec that the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// arrival is the claim's place in time among the claims of its lock: the resourceVersion the
	// API server gave the claim when the controller first wrote its status, which is its creation's
	// unless something changed the claim before. Claims of one priority are granted in arrival
	// order (creationTimestamp has whole seconds). Recorded once, so that a new leader keeps the
	// order.
	// +optional
	Arrival int64 `json:"arrival,omitempty"`

	// locks, for a claim with spec.lockNames, are its locks and the fencing token and expiry of
	// each hold, while it holds them all (phase Held; status.fencingToken is then unset, and
	// status.expireTime is the earliest of theirs). A resource guarded by several of them checks
	// each token. While the claim waits with reason PartialGrant, they are the holds that a grant
	// which stopped half way left, which the controller is giving back.
	// +optional
	// +listType=map
	// +listMapKey=lockName
	// +kubebuilder:validation:MaxItems=8
	Locks []ClaimLock `json:"locks,omitempty"`
}

// ClaimLock is one lock of a claim with spec.lockNames and the token of its hold.
type ClaimLock struct {
	// lockName is the DistributedLock.
	// +required
	LockName string `json:"lockName"`

	// fencingToken is the token of the claim's hold on this lock.
	// +optional
	FencingToken int64 `json:"fencingToken,omitempty"`

	// expireTime is when the hold of this lock lapses unless the controller renews it.
	// +optional
	ExpireTime *metav1.MicroTime `json:"expireTime,omitempty"`
}

// LockClaim asks for a DistributedLock on behalf of a pod (or of itself, when detached). Claims
// on one lock are granted in the order they were created: one at a time on a mutex, several at
// once on a lock with places (DistributedLock spec.maxHolders).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lclaim,categories=locks
// +kubebuilder:printcolumn:name="Lock",type=string,JSONPath=`.spec.lockName`
// +kubebuilder:printcolumn:name="Locks",type=string,JSONPath=`.spec.lockNames`,priority=1
// +kubebuilder:selectablefield:JSONPath=`.spec.lockName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.spec.holder.podName`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,priority=1
// +kubebuilder:printcolumn:name="Token",type=integer,JSONPath=`.status.fencingToken`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expireTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LockClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec asks for a lock.
	// +required
	Spec LockClaimSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status LockClaimStatus `json:"status,omitempty"`
}

// LockClaimList is a list of LockClaims.
// +kubebuilder:object:root=true
type LockClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LockClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LockClaim{}, &LockClaimList{})
}
