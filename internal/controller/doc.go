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

// Package controller holds the reconcilers around the lock engine (package lockengine, the
// per-lock pass that grants, renews and releases): pods that ask for a lock by annotation (their
// claims, scheduling gates and role labels), workload objects that ask for one (their claims and
// resumption), the eviction of holders that lost their lock, and the LockBackend probe; and
// Setup, which wires them and the engine into a manager.
//
// The RBAC markers below are the controller's whole cluster-wide permission set; controller-gen
// turns them into config/rbac/role.yaml and hack/chartgen copies that into the Helm chart. They
// grant only the verbs the manager sends, which test/rbac proves both ways: it runs the manager
// under these rules through a whole story and fails on any forbidden request, and it fails on any
// granted verb that the story never used. Each line says why the verbs are needed.
//
// Reads of every kind below go through the manager's informer cache, which sends list and watch
// and never get, with one exception: a DistributedLock that owns a backend key in the key ledger
// but is missing from the cache is looked up on the API server itself (lockengine's lockAlive), since a cache
// that lags must never let another lock take a live owner's key. (Against an API server that
// streams lists, informers need watch alone; list is for servers that do not.)
package controller

// LockBackends: read through the cache; the probe result is written to status by a merge patch.
// No create, update or delete: cluster admins own LockBackends, and the controller puts no
// finalizer on them.
// +kubebuilder:rbac:groups=locks.lockwarden.io,resources=lockbackends,verbs=list;watch
// +kubebuilder:rbac:groups=locks.lockwarden.io,resources=lockbackends/status,verbs=patch

// DistributedLocks: read through the cache; get only when the key ledger names an owner the
// cache does not have (a lock re-created after its finalizer was removed by hand, a forced
// namespace deletion): without it, every pass of the new lock failed Forbidden for ever; update
// adds and removes the release finalizer; the lock record (holders, token, conditions) is written
// by a status update whose resourceVersion is the compare-and-swap a grant needs. No create or
// delete: users own their locks.
// +kubebuilder:rbac:groups=locks.lockwarden.io,resources=distributedlocks,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=locks.lockwarden.io,resources=distributedlocks/status,verbs=update

// LockClaims: read through the cache; create is the claim of a pod that asks for a lock by
// annotation; update takes off the release finalizer that earlier builds put on claims (claims
// carry none now: the lock record releases a deleted claim); status is written by a merge patch
// with a resourceVersion precondition. delete replaces the ended claim of a Standby or
// still-gated pod (podlock_requeue.go), or of a Workflow run again (workload_rerun.go), with a
// new one, preconditioned on the ended claim's UID;
// the controller deletes no other claim: a pod's claim goes with its pod (garbage collection),
// and other claims belong to their users.
// +kubebuilder:rbac:groups=locks.lockwarden.io,resources=lockclaims,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups=locks.lockwarden.io,resources=lockclaims/status,verbs=patch

// No */finalizers subresource: the finalizer is written with the object itself. That subresource
// is checked only by the OwnerReferencesPermissionEnforcement admission plugin, for owner
// references with blockOwnerDeletion, which the controller never sets.

// Pods: a cache-fed watch tells holders' liveness; patch is needed for one write only, on pods
// that ask for a lock by annotation: once their claim holds the lock, one UID-preconditioned strategic
// merge patch adds the fencing-token and holder annotations and deletes the lockwarden scheduling
// gate.
// Nothing else on pods: no update (the patch is enough), no create or delete.
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;patch

// Pod evictions: under lossPolicy Evict, the holder pod of a lost hold is evicted through the
// Eviction API (a UID-preconditioned eviction, so that PodDisruptionBudgets are honoured): never a
// plain delete.
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

// Subject access reviews: before it makes the claim that an annotated pod or workload asks for,
// the controller asks the API server whether the service account that pod (or the workload's
// pods) runs as may create LockClaims in its namespace (claimrights; --check-claim-rights), so that
// the annotation gives no one a lock their RBAC does not. Reviews read nothing and change nothing.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Nodes: read through the cache, which keeps of each only its name and Ready condition: a lock
// that sets holderNodeLossSeconds ends the hold of a pod whose node has not been Ready that long,
// and a change of a node's Ready condition wakes the locks of the pods on it. Nothing else on
// nodes.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch

// Workload objects (spec.holder.object): the cache watches each kind of --workload-kinds, keeping
// of each object only what says whether it waits suspended and how far it has run; a claim's hold
// ends when its object finishes or is deleted. patch is needed for one write only, on objects that
// ask for a lock by annotation and wait suspended: once their claim holds, one UID-preconditioned
// merge patch adds the fencing-token and holder annotations and lets the run start. Jobs are the
// default kind; the chart grants the other kinds it is told to list (Tekton, Argo Workflows,
// others) in rules of its own.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=list;watch;patch

// Namespaces: a LockBackend's namespaceSelector is matched against namespace labels, read through
// the cache (the informer starts the first time a backend with a selector is used).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// Events on transitions (Acquired, Released, Lost, BackendRecovered) and on annotated pods, sent
// through the events.k8s.io API: create, and patch when an event repeats and becomes a series.
// (The only core/v1 events, leader election's, are granted in the leader election Role.)
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Leases: detached claims' heartbeat Leases (spec.holder.leaseName), read through the cache,
// which keeps only Leases labelled locks.lockwarden.io/heartbeat: "true". Nothing else: the
// claimant creates, renews and deletes its own Lease.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=list;watch

// The built-in kubernetes backend keeps its session in a coordination.k8s.io Lease, and
// LockBackends name Secrets, both in the controller's own namespace only: those rules are in a
// Role there (config/rbac/namespace_role.yaml), not in this ClusterRole.
