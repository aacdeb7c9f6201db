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
// cmd/manager.
//
// # Changing a LockBackend with locks held
//
// A LockBackend whose spec changes (an address, a credential, a session timeout), or whose
// Secrets change (a rotated password or certificate, found by Refresh), gets a new session, opened
// before the old one is touched. The old session is retired, not closed: it stays open while any
// hold the renewal package keeps still lives on it, and the renewer moves each such hold to the new
// session (the new session acquires the key for the same identity, as a restarted controller
// resumes a hold) at its next renewal. Only then does CloseRetired close the old session. Closing
// first would lose locks on ZooKeeper, whose lock nodes die with the session that created them;
// on every other store it would only leave the holds unrenewed for a while. A new spec that cannot
// be opened at all leaves the old session serving the holds it has (Serving).
package registry

import (
	"context"
	"crypto/sha256"
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
	sessions map[string]*session         // the current session, by LockBackend name
	retired  map[backends.Backend]string // replaced sessions still open, with their LockBackend's name
	onRetire func()
}

type session struct {
	uid        types.UID
	generation int64
	backend    backends.Backend
	// secrets fingerprints every Secret value the session was opened with, so that Refresh can
	// tell a rotated one without keeping the value.
	secrets map[locksv1alpha1.SecretKeySelector][sha256.Size]byte
	// stale is set by Refresh when one of those values changed: the next For opens a new session.
	stale bool
}

// serves tells whether s is the session to use for lb as it is now.
func (s *session) serves(lb *locksv1alpha1.LockBackend) bool {
	return !s.stale && s.uid == lb.UID && s.generation == lb.Generation
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
		retired:   map[backends.Backend]string{},
		wrap:      func(_ string, b backends.Backend) backends.Backend { return b },
	}
	for _, o := range opts {
		o(r)
	}
	r.builtin = r.wrap(locksv1alpha1.BuiltinBackendName, builtin)
	return r
}

// For returns the session for lb, opening one if needed. A nil lb, or one of type Kubernetes,
// gets the built-in backend. When lb's spec changed since its session opened, or a Secret it read
// did, a new session is opened and the old one retired (see the package comment); when the new
// one cannot be opened, the error is returned and the old session stays where it was.
func (r *Registry) For(ctx context.Context, lb *locksv1alpha1.LockBackend) (backends.Backend, error) {
	if lb == nil || lb.Spec.Type == locksv1alpha1.BackendKubernetes {
		return r.builtin, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.sessions[lb.Name]
	if ok && old.serves(lb) {
		return old.backend, nil
	}
	f, ok := r.factories[lb.Spec.Type]
	if !ok {
		return nil, fmt.Errorf("backend type %s is not supported by this build of lockwarden", lb.Spec.Type)
	}
	secrets := &fingerprintingSecrets{read: r.secrets, prints: map[locksv1alpha1.SecretKeySelector][sha256.Size]byte{}}
	if secrets.read == nil {
		secrets.read = noSecrets{}
	}
	b, err := f(ctx, lb.Spec, secrets)
	if err != nil {
		return nil, err
	}
	b = r.wrap(lb.Name, b)
	r.sessions[lb.Name] = &session{uid: lb.UID, generation: lb.Generation, backend: b, secrets: secrets.prints}
	if old != nil {
		r.retired[old.backend] = lb.Name
		if r.onRetire != nil {
			r.onRetire()
		}
	}
	return b, nil
}

// Serving returns the session open for the LockBackend called name, whichever spec it was opened
// for, or nil. The renewer falls back on it when For fails, so that holds are not lost to an edit
// that cannot be opened.
func (r *Registry) Serving(name string) backends.Backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sessions[name]; ok {
		return s.backend
	}
	return nil
}

// OnRetire sets a function called, without blocking, each time a session is retired: the
// renewer, so that it moves the holds off the old session and lets it close.
func (r *Registry) OnRetire(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onRetire = f
}

// CloseRetired closes every retired session that inUse says no hold lives on any more.
func (r *Registry) CloseRetired(ctx context.Context, inUse func(backends.Backend) bool) {
	r.mu.Lock()
	var done []backends.Backend
	for b := range r.retired {
		if !inUse(b) {
			done = append(done, b)
			delete(r.retired, b)
		}
	}
	r.mu.Unlock()
	for _, b := range done {
		_ = b.Close(ctx)
	}
}

// Refresh reads again the Secrets the session of lb was opened with and, when one of them
// changed, makes the next For open a new session with the new values. It reports whether one
// changed. A Secret that cannot be read now changes nothing: the session opened with it goes on
// working until the store refuses it, and the next session to open reports the error.
func (r *Registry) Refresh(ctx context.Context, lb *locksv1alpha1.LockBackend) bool {
	r.mu.Lock()
	s, ok := r.sessions[lb.Name]
	if !ok || !s.serves(lb) || len(s.secrets) == 0 || r.secrets == nil {
		r.mu.Unlock()
		return false
	}
	prints := s.secrets
	r.mu.Unlock()

	changed := false
	for ref, print := range prints {
		value, err := r.secrets.Read(ctx, ref)
		if err == nil && sha256.Sum256(value) != print {
			changed = true
			break
		}
	}
	if !changed {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[lb.Name] == s {
		s.stale = true
	}
	return true
}

// Forget closes the sessions of a LockBackend that was deleted, retired ones included.
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
	for b := range r.retired {
		_ = b.Close(ctx)
		delete(r.retired, b)
	}
	return r.builtin.Close(ctx)
}

func (r *Registry) closeLocked(ctx context.Context, name string) {
	if s, ok := r.sessions[name]; ok {
		delete(r.sessions, name)
		_ = s.backend.Close(ctx)
	}
	for b, of := range r.retired {
		if of == name {
			delete(r.retired, b)
			_ = b.Close(ctx)
		}
	}
}

// fingerprintingSecrets reads Secrets for a factory and keeps a fingerprint of each value read.
type fingerprintingSecrets struct {
	read   SecretReader
	prints map[locksv1alpha1.SecretKeySelector][sha256.Size]byte
}

func (s *fingerprintingSecrets) Read(ctx context.Context, ref locksv1alpha1.SecretKeySelector) ([]byte, error) {
	value, err := s.read.Read(ctx, ref)
	if err == nil {
		s.prints[ref] = sha256.Sum256(value)
	}
	return value, err
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
