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

package redistest

import (
	"testing"

	"github.com/lockwarden/lockwarden/internal/testutil/backendfixtures"
)

// ServerName is the DNS name in the server certificates that NewCerts makes (besides 127.0.0.1).
const ServerName = "redis.lockwarden.test"

// Certs is a throwaway PKI for TLS tests (see backendfixtures.Certs).
type Certs = backendfixtures.Certs

// TLS describes a TLS-only test server (see backendfixtures.TLS).
type TLS = backendfixtures.TLS

// Secrets is an in-memory Secret reader for factory tests (see backendfixtures.Secrets).
type Secrets = backendfixtures.Secrets

// NewCerts makes a PKI in a temporary directory for a server named ServerName.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	return backendfixtures.NewCerts(t, ServerName, "redis server")
}
