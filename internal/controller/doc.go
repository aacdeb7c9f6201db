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

// Package controller holds one reconciler per lockwarden kind.
//
// The RBAC markers below are the controller's whole permission set; controller-gen turns them into
// config/rbac/role.yaml. Each line says why it is needed.
package controller

// The three lockwarden kinds: read and watch them, write their status, manage the finalizer.
// +kubebuilder:rbac:groups=locks.lockwarden.io,resources=lockbackends;distributedlocks;lockclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=locks.lockwarden.io,resources=lockbackends/status;distributedlocks/status;lockclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=locks.lockwarden.io,resources=lockbackends/finalizers;distributedlocks/finalizers;lockclaims/finalizers,verbs=update

// Holder liveness comes from a Pod watch; annotated pods get their scheduling gate lifted and the
// fencing token written as an annotation.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;update;patch

// LockBackend namespaceSelectors are matched against namespace labels.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Events on transitions (Acquired, Released, Lost, BackendRecovered).
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// The built-in kubernetes backend keeps lock state in coordination.k8s.io Leases, in the
// controller's own namespace only: that rule, with the Secrets one, is in a Role there
// (config/rbac/namespace_role.yaml), not in this ClusterRole.
