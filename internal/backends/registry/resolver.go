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

package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
)

// Resolver finds the backend session for a DistributedLock: the LockBackend it names (or
// the built-in one), checked against the backend's namespaceSelector and its last probe. It is
// shared by the reconcilers and the renewer, so that all of them see the same sessions.
type Resolver struct {
	// Client reads LockBackends and Namespaces (from the cache).
	Client client.Client
	// Registry opens and caches backend sessions.
	Registry *Registry
}

// UnusableError says why a lock's backend cannot be used now, as a condition reason and message.
type UnusableError struct {
	Reason  string
	Message string
	// Cause is the error behind it, for the controller's log: its details (addresses, driver
	// errors) stay out of Message, which namespaced conditions show.
	Cause error
}

func (e *UnusableError) Error() string { return e.Message }

func (e *UnusableError) Unwrap() error { return e.Cause }

// Use is what a lock's pass needs of its backend: the session (nil when the backend
// cannot be used now), the backend's name, the store it reaches, and where the lock's key lives
// on it.
type Use struct {
	Session backends.Backend
	Name    string
	// Store is the identity of the store the backend reaches (StoreOf), which keys the
	// key ledger: every LockBackend of one store shares its keys (docs/design.md §2).
	Store     string
	KeyPolicy locksv1alpha1.KeyPolicy
}

// ForLock returns lock's backend: its session, name, store and key policy, read from one look at
// the LockBackend. An *UnusableError means the lock cannot be granted now (fail closed); Name,
// Store and KeyPolicy are set then too, so that the pass can still name the lock's key. Other
// errors are transient API errors.
func (r *Resolver) ForLock(ctx context.Context, lock *locksv1alpha1.DistributedLock) (Use, error) {
	use := Use{Name: lock.BackendName(), KeyPolicy: locksv1alpha1.KeyPolicyNamespaced}
	lb, err := r.lockBackend(ctx, use.Name)
	if err != nil {
		// No such backend (an *UnusableError): nothing is granted on it, Namespaced is the key
		// its locks had, and its store is known only by its name, which no other backend shares.
		use.Store = MissingStore(use.Name)
		return use, err
	}
	use.Store, use.KeyPolicy = StoreOf(lb), keyPolicyOf(lb)
	if lb != nil && lb.Spec.NamespaceSelector != nil {
		if err := r.admits(ctx, lb, lock.Namespace); err != nil {
			return use, err
		}
	}
	if lb != nil {
		ready := meta.FindStatusCondition(lb.Status.Conditions, locksv1alpha1.ConditionReady)
		switch {
		case ready == nil || ready.ObservedGeneration != lb.Generation:
			return use, &UnusableError{Reason: locksv1alpha1.ReasonBackendUnreachable,
				Message: fmt.Sprintf("LockBackend %s has not been probed yet", use.Name)}
		case ready.Status != metav1.ConditionTrue:
			// Its Ready message (a probe's error: host:port, TLS, driver details) is for whoever
			// may read the cluster-scoped LockBackend, not for every namespace that uses it.
			return use, &UnusableError{Reason: ready.Reason,
				Message: fmt.Sprintf("LockBackend %s is not ready (%s); its Ready condition says why", use.Name, ready.Reason)}
		}
	}
	b, err := r.Registry.For(ctx, lb)
	if err != nil {
		return use, &UnusableError{Reason: locksv1alpha1.ReasonBackendUnreachable,
			Message: fmt.Sprintf("LockBackend %s cannot be used now; its Ready condition says why", use.Name), Cause: err}
	}
	use.Session = b
	return use, nil
}

// keyPolicyOf is the key policy of lb (nil: the built-in backend).
func keyPolicyOf(lb *locksv1alpha1.LockBackend) locksv1alpha1.KeyPolicy {
	if lb == nil || lb.Spec.Type == locksv1alpha1.BackendKubernetes || lb.Spec.KeyPolicy != locksv1alpha1.KeyPolicyVerbatim {
		return locksv1alpha1.KeyPolicyNamespaced
	}
	return locksv1alpha1.KeyPolicyVerbatim
}

// ByName returns the session for a backend name without the namespace and readiness checks: the
// renewer keeps renewing what was granted, and lets the backend itself say whether it answers.
// When the LockBackend's spec was edited into one that cannot be opened, it returns the session
// still open for the spec before, whose holds can go on being renewed.
func (r *Resolver) ByName(ctx context.Context, name string) (backends.Backend, error) {
	lb, err := r.lockBackend(ctx, name)
	if err != nil {
		return nil, err
	}
	b, err := r.Registry.For(ctx, lb)
	if err != nil {
		if serving := r.Registry.Serving(name); serving != nil {
			return serving, nil
		}
	}
	return b, err
}

// lockBackend returns the LockBackend called name, or nil for the built-in backend when no object
// of that name exists.
func (r *Resolver) lockBackend(ctx context.Context, name string) (*locksv1alpha1.LockBackend, error) {
	lb := &locksv1alpha1.LockBackend{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: name}, lb)
	switch {
	case apierrors.IsNotFound(err) && name == locksv1alpha1.BuiltinBackendName:
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, &UnusableError{Reason: locksv1alpha1.ReasonBackendNotFound,
			Message: fmt.Sprintf("LockBackend %s does not exist; ask a cluster admin to create it or fix spec.backendRef", name)}
	case err != nil:
		return nil, err
	}
	return lb, nil
}

func (r *Resolver) admits(ctx context.Context, lb *locksv1alpha1.LockBackend, namespace string) error {
	selector, err := metav1.LabelSelectorAsSelector(lb.Spec.NamespaceSelector)
	if err != nil {
		return &UnusableError{Reason: locksv1alpha1.ReasonNamespaceNotAllowed,
			Message: fmt.Sprintf("LockBackend %s has an invalid namespaceSelector: %v", lb.Name, err)}
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return err
	}
	if !selector.Matches(labels.Set(ns.Labels)) {
		return &UnusableError{Reason: locksv1alpha1.ReasonNamespaceNotAllowed,
			Message: fmt.Sprintf("LockBackend %s does not admit namespace %s (see its spec.namespaceSelector)", lb.Name, namespace)}
	}
	return nil
}
