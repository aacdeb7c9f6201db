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

package redlock_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/redlock"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

const secretNS = "lockwarden-system"

func secretKey(name, key string) *locksv1alpha1.SecretKeySelector {
	return &locksv1alpha1.SecretKeySelector{SecretReference: locksv1alpha1.SecretReference{Name: name, Namespace: secretNS}, Key: key}
}

// A LockBackend of type Redlock with a password Secret and mutual TLS yields a session that
// grants locks on three redis-servers requiring both.
func TestFactoryPasswordAndMutualTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	certs := redistest.NewCerts(t)
	const password = "redlock-Pa55word"
	servers := redistest.StartN(t, 3, redistest.Options{Password: password, TLS: certs.ServerTLS(t, true)})
	secrets := redistest.Secrets{
		secretNS + "/redis-auth":   {"password": []byte(password)},
		secretNS + "/redis-ca":     {"ca.crt": certs.CAPEM},
		secretNS + "/redis-client": {"tls.crt": certs.ClientCertPEM, "tls.key": certs.ClientKeyPEM},
	}
	spec := locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedlock, Redlock: &locksv1alpha1.RedlockBackend{
		PasswordSecretRef: secretKey("redis-auth", "password"),
		TLS: &locksv1alpha1.TLSConfig{
			CASecretRef:         secretKey("redis-ca", "ca.crt"),
			ClientCertSecretRef: &locksv1alpha1.SecretReference{Name: "redis-client", Namespace: secretNS},
		},
	}}
	for _, a := range addresses(servers) {
		spec.Redlock.Addresses = append(spec.Redlock.Addresses, locksv1alpha1.HostPort(a))
	}

	b, err := redlock.Factory(ctx, spec, secrets)
	g.Expect(err).NotTo(HaveOccurred())
	defer b.Close(context.Background())
	g.Expect(b.Ping(ctx)).To(Succeed())
	l, err := b.TryAcquire(ctx, "app/lock", "a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders(t, servers, "app/lock")).To(Equal([]string{"a", "a", "a"}))
	g.Expect(b.Release(ctx, l)).To(Succeed())

	// Without the password every node refuses, and the error says so for each, without the
	// password.
	spec.Redlock.PasswordSecretRef = nil
	b2, err := redlock.Factory(ctx, spec, secrets)
	g.Expect(err).NotTo(HaveOccurred())
	defer b2.Close(context.Background())
	err = b2.Ping(ctx)
	g.Expect(err).To(MatchError(redlock.ErrUnavailable))
	g.Expect(err.Error()).To(ContainSubstring("only 0 of 3 nodes passed, 2 needed; 3 failed"))
	for _, s := range servers {
		g.Expect(err.Error()).To(ContainSubstring("redis " + s.Addr() + ": ping: the server requires a password (NOAUTH)"))
	}
}

func TestFactoryErrors(t *testing.T) {
	secrets := redistest.Secrets{}
	addrs := []locksv1alpha1.HostPort{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	for name, tc := range map[string]struct {
		redlock    *locksv1alpha1.RedlockBackend
		want       string
		secretKind bool
	}{
		"no redlock member": {nil, "spec.redlock is not set", false},
		"two nodes": {&locksv1alpha1.RedlockBackend{Addresses: addrs[:2]},
			"needs an odd number of at least 3 independent Redis nodes, got 2", false},
		"missing password secret": {&locksv1alpha1.RedlockBackend{Addresses: addrs, PasswordSecretRef: secretKey("nope", "password")},
			"spec.redlock.passwordSecretRef: secret unavailable: Secret lockwarden-system/nope not found", true},
		"missing CA secret": {&locksv1alpha1.RedlockBackend{Addresses: addrs, TLS: &locksv1alpha1.TLSConfig{CASecretRef: secretKey("ca", "ca.crt")}},
			"spec.redlock.tls.caSecretRef: secret unavailable: Secret lockwarden-system/ca not found", true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := redlock.Factory(t.Context(), locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedlock, Redlock: tc.redlock}, secrets)
			g.Expect(b).To(BeNil())
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			if tc.secretKind {
				g.Expect(err).To(MatchError(registry.ErrSecret))
			}
		})
	}
}
