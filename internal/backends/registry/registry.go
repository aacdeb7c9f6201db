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

// Package registry builds Backend sessions from LockBackend objects and hands them to the
// reconcilers, which never see a driver. Factories for each store type are registered by
// cmd/manager; a LockBackend whose spec changes gets a new session and the old one is closed.
package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
)

// Factory opens a session with the store that spec describes. Credentials come from secrets.
type Factory func(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets SecretReader) (backends.Backend, error)

// SecretReader reads one key of a Secret named by a LockBackend.
type SecretReader interface {
	Read(ctx context.Context, ref locksv1alpha1.SecretKeySelector) ([]byte, error)
}

// ErrSecret marks errors about a Secret a LockBackend names (missing, lacking the key, or outside
// the controller's Secret namespace), so that conditions can say SecretNotFound.
var ErrSecret = errors.New("secret unavailable")

// Registry hands out one Backend session per LockBackend. It is safe for concurrent use.
type Registry struct {
	builtin   backends.Backend
	factories map[locksv1alpha1.BackendType]Factory
	secrets   SecretReader
	wrap      func(name string, b backends.Backend) backends.Backend

	mu       sync.Mutex
	sessions map[string]*session // by LockBackend name
}

type session struct {
	uid        types.UID
	generation int64
	backend    backends.Backend
}

// Option configures a Registry.
type Option func(*Registry)

// WithFactory registers the factory for one backend type. Types without a factory are reported
// as unavailable in this build.
func WithFactory(t locksv1alpha1.BackendType, f Factory) Option {
	return func(r *Registry) { r.factories[t] = f }
}

// WithSecrets sets where credentials come from; without it, LockBackends that name a Secret fail.
func WithSecrets(s SecretReader) Option { return func(r *Registry) { r.secrets = s } }

// WithWrapper wraps every backend handed out (metrics instrumentation); name is the LockBackend's.
func WithWrapper(w func(name string, b backends.Backend) backends.Backend) Option {
	return func(r *Registry) { r.wrap = w }
}

// New returns a Registry whose built-in backend (type Kubernetes) is builtin.
func New(builtin backends.Backend, opts ...Option) *Registry {
	r := &Registry{
		factories: map[locksv1alpha1.BackendType]Factory{},
		sessions:  map[string]*session{},
		wrap:      func(_ string, b backends.Backend) backends.Backend { return b },
	}
	for _, o := range opts {
		o(r)
	}
	r.builtin = r.wrap(locksv1alpha1.BuiltinBackendName, builtin)
	return r
}

// For returns the session for lb, opening one if needed. A nil lb, or one of type Kubernetes,
// gets the built-in backend.
func (r *Registry) For(ctx context.Context, lb *locksv1alpha1.LockBackend) (backends.Backend, error) {
	if lb == nil || lb.Spec.Type == locksv1alpha1.BackendKubernetes {
		return r.builtin, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sessions[lb.Name]; ok {
		if s.uid == lb.UID && s.generation == lb.Generation {
			return s.backend, nil
		}
		r.closeLocked(ctx, lb.Name)
	}
	f, ok := r.factories[lb.Spec.Type]
	if !ok {
		return nil, fmt.Errorf("backend type %s is not supported by this build of lockwarden", lb.Spec.Type)
	}
	secrets := r.secrets
	if secrets == nil {
		secrets = noSecrets{}
	}
	b, err := f(ctx, lb.Spec, secrets)
	if err != nil {
		return nil, err
	}
	b = r.wrap(lb.Name, b)
	r.sessions[lb.Name] = &session{uid: lb.UID, generation: lb.Generation, backend: b}
	return b, nil
}

// Forget closes the session of a LockBackend that was deleted.
func (r *Registry) Forget(ctx context.Context, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeLocked(ctx, name)
}

// Close ends every session, the built-in one included.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range r.sessions {
		r.closeLocked(ctx, name)
	}
	return r.builtin.Close(ctx)
}

func (r *Registry) closeLocked(ctx context.Context, name string) {
	if s, ok := r.sessions[name]; ok {
		delete(r.sessions, name)
		_ = s.backend.Close(ctx) // its locks expire by TTL or are resumed by the new session
	}
}

type noSecrets struct{}

func (noSecrets) Read(_ context.Context, ref locksv1alpha1.SecretKeySelector) ([]byte, error) {
	return nil, fmt.Errorf("%w: Secret %s/%s cannot be read: the controller has no Secret access configured", ErrSecret, ref.Namespace, ref.Name)
}

// NamespacedSecrets reads Secrets only in Namespace, the controller's Secret namespace, so that a
// LockBackend can never make the controller read a Secret elsewhere.
type NamespacedSecrets struct {
	// Reader reads Secrets. The manager passes an uncached reader (its API reader): a Secret is
	// read only when a backend session opens, so a cache would buy nothing, and it would need
	// list and watch on every Secret in the namespace where the shipped Role grants get alone.
	Reader client.Reader
	// Namespace is the only namespace Secrets are read from.
	Namespace string
}

// Read returns the value of ref's key. Errors name the Secret and key, never the value.
func (s NamespacedSecrets) Read(ctx context.Context, ref locksv1alpha1.SecretKeySelector) ([]byte, error) {
	if ref.Namespace != s.Namespace {
		return nil, fmt.Errorf("%w: Secret %s/%s is outside the controller's Secret namespace %q; move it there",
			ErrSecret, ref.Namespace, ref.Name, s.Namespace)
	}
	secret := &corev1.Secret{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s/%s not found", ErrSecret, ref.Namespace, ref.Name)
		}
		return nil, fmt.Errorf("%w: reading Secret %s/%s: %v", ErrSecret, ref.Namespace, ref.Name, err)
	}
	value, ok := secret.Data[ref.Key]
	if !ok {
		return nil, fmt.Errorf("%w: Secret %s/%s has no key %q", ErrSecret, ref.Namespace, ref.Name, ref.Key)
	}
	return value, nil
}

// FactoryOf makes a Factory from a backend package's two halves: configFromSpec reads a
// LockBackend's spec (and the Secrets it names) into the package's Config, and open starts a
// session from that Config.
func FactoryOf[C any, B backends.Backend](
	configFromSpec func(context.Context, locksv1alpha1.LockBackendSpec, SecretReader) (C, error),
	open func(C) (B, error),
) Factory {
	return func(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets SecretReader) (backends.Backend, error) {
		cfg, err := configFromSpec(ctx, spec, secrets)
		if err != nil {
			return nil, err
		}
		b, err := open(cfg)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return b, nil
	}
}
