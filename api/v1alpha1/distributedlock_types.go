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

// BackendReference names a LockBackend.
type BackendReference struct {
	// name of the LockBackend. kubernetes is the built-in backend that keeps lock state in the
	// Kubernetes API.
	// +optional
	// +kubebuilder:default=kubernetes
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// DistributedLockSpec describes one named lock.
// +kubebuilder:validation:XValidation:rule="has(self.key) == has(oldSelf.key)",message="key is immutable; create a new DistributedLock to use another key"
type DistributedLockSpec struct {
	// backendRef names the LockBackend that holds this lock; the built-in kubernetes backend when
	// omitted. Immutable: a lock cannot move between stores while it may be held.
	// +optional
	// +kubebuilder:default={name: "kubernetes"}
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="backendRef is immutable; create a new DistributedLock to use another backend"
	BackendRef BackendReference `json:"backendRef,omitempty"`

	// key is the lock's key on the backend. Under the backend's default keyPolicy, Namespaced,
	// it is placed under lockwarden/<namespace>/ (so the backend key is
	// lockwarden/<namespace>/<key>); under Verbatim it is used as written. When omitted the
	// backend key is lockwarden/<namespace>/<name> under either policy. Other clients of the
	// backend that take the same backend key with the backend's standard protocol are excluded
	// too. Two DistributedLocks whose keys resolve to one backend key conflict: the one that took
	// the key first keeps it, the other reports Ready=False, reason KeyConflict. Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[!-~]+$')`,message="key must be printable ASCII without spaces"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="key is immutable; create a new DistributedLock to use another key"
	Key string `json:"key,omitempty"`

	// leaseDurationSeconds is the lock's time to live on the backend. The controller renews every
	// sixth of it while the holder lives; a holder whose renewals stop loses the lock after it.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=3600
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds,omitempty"`

	// maxHolders is how many claims may hold the lock at once. 1, the default, makes a mutex. N
	// makes a semaphore of N places: each Shared claim takes one, and an Exclusive claim holds
	// the lock alone (a read/write lock: readers Shared, writers Exclusive). Raising it takes
	// effect at once, with one exception: a lock of one place that is held when it is raised
	// grants beside its holder only once that hold has ended, since that holder holds the lock
	// exclusively. Lowering it takes effect as holders leave: no hold is taken away, and nothing
	// is granted while the lock has as many holders as places or more.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxHolders int32 `json:"maxHolders,omitempty"`

	// maxQueue is how many claims may wait for the lock at once. A new claim that would wait
	// beyond it ends at once, phase Failed with reason QueueFull, instead of joining a queue
	// that would not reach it for a long time (and that every handoff pays for). Claims already
	// waiting keep their places when it is lowered. Unset: no limit.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxQueue *int32 `json:"maxQueue,omitempty"`

	// lockDelaySeconds is how long the lock stays free after a hold ends without a release: its
	// holder pod died or was replaced, its heartbeat Lease expired, or the hold was lost. Nothing
	// is granted until then (status.lockDelayUntil says when), so that a holder that may still be
	// running cannot overlap with the next one on a resource that cannot check fencing tokens. A
	// release (the claim deleted) and a holder pod that succeeded free the lock at once. 0, the
	// default, grants at once in every case. A change applies to holds that end after it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	LockDelaySeconds int32 `json:"lockDelaySeconds,omitempty"`

	// lossPolicy says what the controller does when a holder loses the lock (a renewal failed or
	// the backend gave the key to someone else). Notify, the default: the claim becomes Lost with
	// a Warning event, and lockctl run signals its command. Evict: also evict the holder pod
	// through the Eviction API, so that a pod that still runs with a stale token stops and its
	// controller creates a new one that queues again. A PodDisruptionBudget that refuses the
	// eviction is reported on the claim (condition Evicted) and retried; it is never bypassed.
	// Claims without a holder pod are only notified.
	// +optional
	// +kubebuilder:default=Notify
	LossPolicy LossPolicy `json:"lossPolicy,omitempty"`

	// holderNodeLossSeconds ends the hold of a holder pod whose Node has had its Ready condition
	// Unknown or False for this long, as if the pod had died: the claim becomes Released with
	// reason HolderTerminated and a message naming the node, lockDelaySeconds and lossPolicy
	// apply (under Evict the pod is evicted, so that its controller can replace it), and the next
	// claim is granted. A holder pod whose Node object no longer exists is treated as dead at
	// once. Absent, the default: the hold lasts until the pod object is gone; on a lost node
	// Kubernetes marks the pod for deletion after about six minutes (the node's grace period,
	// then its taint-based eviction), and a terminating pod holds until the node comes back or
	// its Node object is deleted. Set it for leader election with standby pods, where the fencing
	// token and the moved role label keep a cut-off holder harmless and a standby should take
	// over within seconds; leave it unset where a holder that may still run must never overlap
	// with the next one. Kubernetes marks a node Unknown only after its node-monitor grace
	// period (about 50 s) without a heartbeat, so the cut-off comes that long plus this much
	// after the node was lost. Only holders are judged: waiting claims are not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	HolderNodeLossSeconds *int32 `json:"holderNodeLossSeconds,omitempty"`
}

// LossPolicy is what the controller does when a holder loses its lock.
// +kubebuilder:validation:Enum=Notify;Evict
type LossPolicy string

// The loss policies.
const (
	// LossPolicyNotify reports the loss on the claim (phase Lost, a Warning event).
	LossPolicyNotify LossPolicy = "Notify"
	// LossPolicyEvict reports the loss and evicts the holder pod.
	LossPolicyEvict LossPolicy = "Evict"
)

// LockHolder describes one current holder of a lock.
type LockHolder struct {
	// claim is the name of the LockClaim that holds the lock.
	// +required
	Claim string `json:"claim"`

	// claimUID is the UID of that LockClaim. The record, not a finalizer on the claim, is what
	// releases the lock: a pass that finds no claim of this name and UID (deleted, or deleted and
	// created again) releases the hold. Absent on holds granted before claims lost their
	// finalizer; the next pass fills it in.
	// +optional
	ClaimUID types.UID `json:"claimUID,omitempty"`

	// holder is the claim's holder at grant (its pod, heartbeat Lease or workload object, with
	// the pod's or object's UID): how the hold ends once its claim is gone depends on it. A
	// holder that died (pod gone or failed, heartbeat expired, run failed) ends it without a
	// release, so lockDelaySeconds and lossPolicy apply, even when garbage collection deleted
	// the claim at the same moment; a claim deleted while its holder lives is a release; a claim
	// deleted with its holder's foreground deletion holds until the holder is gone. Absent for a
	// detached claim.
	// +optional
	Holder *RecordedHolder `json:"holder,omitempty"`

	// mode is how the holder holds the lock: Exclusive (alone: an Exclusive claim, or any claim
	// on a lock of one place) or Shared (one of the lock's places). Holds recorded before locks
	// had places omit it and are Exclusive.
	// +optional
	Mode LockMode `json:"mode,omitempty"`

	// identity is the holder identity on the backend (the pod's UID, or the claim's for a
	// detached claim, unless the claim sets one).
	// +required
	Identity string `json:"identity"`

	// backendIdentity is the value lockwarden wrote to the backend for this hold: derived from
	// the lock's UID and identity, so that it never equals a value another client or another
	// lock wrote. Absent on holds granted before lockwarden derived it (the backend then holds
	// identity itself).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	BackendIdentity string `json:"backendIdentity,omitempty"`

	// fencingToken is the token issued at this grant.
	// +required
	FencingToken int64 `json:"fencingToken"`

	// acquireTime is when the lock was granted.
	// +required
	AcquireTime metav1.MicroTime `json:"acquireTime"`

	// expireTime is when the hold would have expired, as of its grant, unless renewed. Renewal
	// does not rewrite the lock: the holder claim's status.expireTime follows it.
	// +optional
	ExpireTime *metav1.MicroTime `json:"expireTime,omitempty"`
}

// RecordedHolder is a claim's holder as the lock record keeps it: a Pod (apiVersion v1), a
// heartbeat Lease (coordination.k8s.io/v1) or a workload object, in the lock's namespace.
type RecordedHolder struct {
	// apiVersion is the holder's group and version: v1 for a Pod, coordination.k8s.io/v1 for a
	// heartbeat Lease, the object's own for a workload object.
	// +required
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`

	// kind is the holder's kind: Pod, Lease, or the workload object's kind.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// name is the holder's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// uid is the pod's or workload object's UID at grant: an object of that name with another
	// UID is not the holder. Absent for a Lease.
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// DistributedLockStatus is the observed state of a DistributedLock.
type DistributedLockStatus struct {
	// holders are the current holders, in the order they were granted: at most one Exclusive
	// holder, or up to spec.maxHolders Shared ones (more only while a lowered maxHolders waits for
	// holders to leave). Empty while the lock is free.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Holders []LockHolder `json:"holders,omitempty"`

	// holding is the number of holders, for the printer columns.
	// +optional
	Holding int32 `json:"holding,omitempty"`

	// holder is where lockwarden before shared locks recorded the one holder. The controller moves
	// it into holders the first time it reconciles the lock, and never writes it.
	//
	// Deprecated: read status.holders.
	// +optional
	Holder *LockHolder `json:"holder,omitempty"`

	// fencingToken is the last token issued for this lock. Tokens strictly increase across
	// holders, controller restarts, re-creation of the lock and locks that take a key over from
	// another (it then moves up by one when the lock takes the key, a floor its next token is
	// above); the resource a lock protects should reject writes carrying a token lower than one
	// it has seen.
	// +optional
	FencingToken int64 `json:"fencingToken,omitempty"`

	// lockDelayUntil is when the lock may be granted again after the last hold ended without a
	// release (spec.lockDelaySeconds). A time in the past means no delay.
	// +optional
	LockDelayUntil *metav1.MicroTime `json:"lockDelayUntil,omitempty"`

	// waiting is the number of claims queued for the lock.
	// +optional
	Waiting int32 `json:"waiting,omitempty"`

	// conditions: BackendReady reports whether the backend can be used; Ready summarises.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec that the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// DistributedLock is one named lock on a backend. Pods ask for it with LockClaims; the controller
// grants them in FIFO order, one at a time or up to spec.maxHolders at once, and issues a fencing
// token at each grant.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dlock,categories=locks
// +kubebuilder:printcolumn:name="Backend",type=string,JSONPath=`.spec.backendRef.name`
// +kubebuilder:printcolumn:name="Holders",type=integer,JSONPath=`.status.holding`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxHolders`
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.status.holders[0].claim`,description="The first holder's claim"
// +kubebuilder:printcolumn:name="Token",type=integer,JSONPath=`.status.fencingToken`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waiting`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DistributedLock struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the lock.
	// +optional
	// +kubebuilder:default={}
	Spec DistributedLockSpec `json:"spec,omitempty"`

	// status is the observed state.
	// +optional
	Status DistributedLockStatus `json:"status,omitempty"`
}

// BackendKey is the key under which this lock is kept on a backend whose key policy is policy
// (an empty policy is Namespaced, the default).
func (l *DistributedLock) BackendKey(policy KeyPolicy) string {
	switch {
	case l.Spec.Key == "":
		return NamespacedKeyPrefix(l.Namespace) + l.Name
	case policy == KeyPolicyVerbatim:
		return l.Spec.Key
	}
	return NamespacedKeyPrefix(l.Namespace) + l.Spec.Key
}

// NamespacedKeyPrefix is the prefix of every backend key of namespace's locks under the
// Namespaced key policy.
func NamespacedKeyPrefix(namespace string) string {
	return "lockwarden/" + namespace + "/"
}

// BackendName is the name of the LockBackend that holds this lock.
func (l *DistributedLock) BackendName() string {
	if l.Spec.BackendRef.Name != "" {
		return l.Spec.BackendRef.Name
	}
	return BuiltinBackendName
}

// DistributedLockList is a list of DistributedLocks.
// +kubebuilder:object:root=true
type DistributedLockList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DistributedLock `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DistributedLock{}, &DistributedLockList{})
}

// CurrentHolders returns the lock's holders: status.holders, or, on a lock that a lockwarden
// before shared locks last wrote, its one status.holder (which held exclusively).
func (st *DistributedLockStatus) CurrentHolders() []LockHolder {
	if len(st.Holders) > 0 || st.Holder == nil {
		return st.Holders
	}
	h := *st.Holder
	if h.Mode == "" {
		h.Mode = LockModeExclusive
	}
	return []LockHolder{h}
}
