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

package etcd

import (
	"context"
	"errors"
	"fmt"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/internal/tlsconfig"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
)

var _ registry.Factory = Factory

// Factory opens a session with the etcd cluster that a LockBackend of type Etcd describes, with
// the default options. Register it with registry.WithFactory(locksv1alpha1.BackendEtcd,
// etcd.Factory).
func Factory(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (backends.Backend, error) {
	return NewFactory()(ctx, spec, secrets)
}

// NewFactory returns a Factory whose sessions get opts (e.g. WithClock).
func NewFactory(opts ...Option) registry.Factory {
	return registry.FactoryOf(ConfigFromSpec, func(cfg Config) (*Backend, error) { return New(cfg, opts...) })
}

// ConfigFromSpec reads the etcd member of spec, and the credentials and TLS material from the
// Secrets it names, into a Config. Errors about Secrets wrap registry.ErrSecret.
func ConfigFromSpec(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (Config, error) {
	e := spec.Etcd
	if e == nil {
		return Config{}, errors.New("etcd backend: spec.etcd is not set")
	}
	cfg := Config{}
	for _, ep := range e.Endpoints {
		cfg.Endpoints = append(cfg.Endpoints, string(ep))
	}
	if ref := e.UsernameSecretRef; ref != nil {
		v, err := secrets.Read(ctx, *ref)
		if err != nil {
			return Config{}, fmt.Errorf("etcd backend: spec.etcd.usernameSecretRef: %w", err)
		}
		cfg.Username = string(v)
	}
	if ref := e.PasswordSecretRef; ref != nil {
		v, err := secrets.Read(ctx, *ref)
		if err != nil {
			return Config{}, fmt.Errorf("etcd backend: spec.etcd.passwordSecretRef: %w", err)
		}
		cfg.Password = string(v)
	}
	if cfg.Password != "" && cfg.Username == "" {
		return Config{}, errors.New("etcd backend: spec.etcd.passwordSecretRef needs usernameSecretRef")
	}
	tlsCfg, err := tlsconfig.Build(ctx, e.TLS, secrets)
	if err != nil {
		return Config{}, fmt.Errorf("etcd backend: spec.etcd.%w", err)
	}
	cfg.TLS = tlsCfg
	return cfg, nil
}
