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

package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
)

var _ registry.Factory = Factory

// Factory opens a session with the ensemble that a LockBackend of type ZooKeeper describes, with
// the default options. Register it with registry.WithFactory(locksv1alpha1.BackendZooKeeper,
// zookeeper.Factory).
func Factory(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (backends.Backend, error) {
	return NewFactory()(ctx, spec, secrets)
}

// NewFactory returns a Factory whose sessions get opts (e.g. WithClock).
func NewFactory(opts ...Option) registry.Factory {
	return registry.FactoryOf(ConfigFromSpec, func(cfg Config) (*Backend, error) { return New(cfg, opts...) })
}

// ConfigFromSpec reads the zookeeper member of spec, and the digest credentials from the Secret
// it names, into a Config. Root is DefaultRoot. Errors about Secrets wrap registry.ErrSecret.
func ConfigFromSpec(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (Config, error) {
	z := spec.ZooKeeper
	if z == nil {
		return Config{}, errors.New("zookeeper backend: spec.zookeeper is not set")
	}
	cfg := Config{SessionTimeout: time.Duration(z.SessionTimeoutSeconds) * time.Second}
	for _, s := range z.Servers {
		cfg.Servers = append(cfg.Servers, string(s))
	}
	if ref := z.DigestAuthSecretRef; ref != nil {
		if secrets == nil {
			return Config{}, fmt.Errorf("zookeeper backend: spec.zookeeper.digestAuthSecretRef: no secret reader: %w", registry.ErrSecret)
		}
		v, err := secrets.Read(ctx, *ref)
		if err != nil {
			return Config{}, fmt.Errorf("zookeeper backend: spec.zookeeper.digestAuthSecretRef: %w", err)
		}
		auth := strings.TrimRight(string(v), "\r\n")
		if user, _, ok := strings.Cut(auth, ":"); !ok || user == "" {
			return Config{}, errors.New("zookeeper backend: spec.zookeeper.digestAuthSecretRef: the value must have the form user:password")
		}
		cfg.DigestAuth = auth
	}
	return cfg, nil
}
