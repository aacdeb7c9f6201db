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

package sqlbackend

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
)

var _ registry.Factory = Factory

// Factory opens a session with the database that a LockBackend of type SQL describes, with the
// default options. Register it with registry.WithFactory(locksv1alpha1.BackendSQL,
// sqlbackend.Factory).
func Factory(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (backends.Backend, error) {
	return NewFactory()(ctx, spec, secrets)
}

// NewFactory returns a Factory whose sessions get opts (e.g. WithCallTimeout).
func NewFactory(opts ...Option) registry.Factory {
	return registry.FactoryOf(ConfigFromSpec, func(cfg Config) (*Backend, error) { return New(cfg, opts...) })
}

// ConfigFromSpec reads the sql member of spec, and the DSN from the Secret it names, into a
// Config. Errors about the Secret wrap registry.ErrSecret; no error contains the DSN.
func ConfigFromSpec(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (Config, error) {
	s := spec.SQL
	if s == nil {
		return Config{}, errors.New("sql backend: spec.sql is not set")
	}
	dsn, err := secrets.Read(ctx, s.DSNSecretRef)
	if err != nil {
		return Config{}, fmt.Errorf("sql backend: spec.sql.dsnSecretRef: %w", err)
	}
	// A Secret made from a file often ends in a newline.
	dsn = bytes.TrimSpace(dsn)
	if len(dsn) == 0 {
		ref := s.DSNSecretRef
		return Config{}, fmt.Errorf("sql backend: spec.sql.dsnSecretRef: %w: key %q of Secret %s/%s is empty",
			registry.ErrSecret, ref.Key, ref.Namespace, ref.Name)
	}
	return Config{Driver: string(s.Driver), DSN: string(dsn), Table: s.Table}, nil
}
