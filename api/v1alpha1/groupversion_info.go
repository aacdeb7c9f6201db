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

// Package v1alpha1 holds the lockwarden API: LockBackend (where locks live), DistributedLock (one
// named lock) and LockClaim (a request for a lock on behalf of a pod).
// +kubebuilder:object:generate=true
// +groupName=locks.lockwarden.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every lockwarden kind.
	GroupVersion = schema.GroupVersion{Group: "locks.lockwarden.io", Version: "v1alpha1"}

	// SchemeBuilder registers the lockwarden kinds with a runtime.Scheme.
	// The kubebuilder scaffold's builder: every kind's init registers with SchemeBuilder.Register(&T{}),
	// which runtime.SchemeBuilder (funcs) does not take.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion} //nolint:staticcheck // SA1019: see above

	// AddToScheme adds the lockwarden kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
