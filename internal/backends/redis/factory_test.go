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

package redis_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/redis"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

const secretNS = "lockwarden-system"

func secretKey(name, key string) *locksv1alpha1.SecretKeySelector {
	return &locksv1alpha1.SecretKeySelector{SecretReference: locksv1alpha1.SecretReference{Name: name, Namespace: secretNS}, Key: key}
}

// open builds a session with the factory and closes it when the test ends.
func open(t *testing.T, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (backends.Backend, error) {
	t.Helper()
	b, err := redis.Factory(t.Context(), spec, secrets)
	if b != nil {
		t.Cleanup(func() { _ = b.Close(context.Background()) })
	}
	return b, err
}

// A LockBackend with a password Secret and mutual TLS (CA, client certificate, serverName)
// yields a session that works against a redis-server that requires all three.
func TestFactoryPasswordAndMutualTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	certs := redistest.NewCerts(t)
	const password = "factory-Pa55word"
	srv := redistest.Start(t, redistest.Options{Password: password, TLS: certs.ServerTLS(t, true)})
	secrets := redistest.Secrets{
		secretNS + "/redis-auth": {"password": []byte(password)},
		secretNS + "/redis-ca":   {"ca.crt": certs.CAPEM},
		secretNS + "/redis-client": {
			"tls.crt": certs.ClientCertPEM,
			"tls.key": certs.ClientKeyPEM,
		},
	}
	spec := func(mutate func(*locksv1alpha1.RedisBackend)) locksv1alpha1.LockBackendSpec {
		r := &locksv1alpha1.RedisBackend{
			Address:           locksv1alpha1.HostPort(srv.Addr()),
			DB:                3,
			PasswordSecretRef: secretKey("redis-auth", "password"),
			TLS: &locksv1alpha1.TLSConfig{
				CASecretRef:         secretKey("redis-ca", "ca.crt"),
				ClientCertSecretRef: &locksv1alpha1.SecretReference{Name: "redis-client", Namespace: secretNS},
				ServerName:          redistest.ServerName,
			},
		}
		if mutate != nil {
			mutate(r)
		}
		return locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis, Redis: r}
	}

	b, err := open(t, spec(nil), secrets)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Ping(ctx)).To(Succeed())
	l, err := b.TryAcquire(ctx, "app/lock", "a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	c := srv.Client()
	g.Expect(c.Do(ctx, "SELECT", "3").Err()).To(Succeed())
	g.Expect(c.Get(ctx, "app/lock").Val()).To(Equal("a"), "the lock is in database 3")
	g.Expect(b.Release(ctx, l)).To(Succeed())

	t.Run("WrongServerName", func(t *testing.T) {
		g := NewWithT(t)
		b, err := open(t, spec(func(r *locksv1alpha1.RedisBackend) { r.TLS.ServerName = "other.example" }), secrets)
		g.Expect(err).NotTo(HaveOccurred())
		err = b.Ping(ctx)
		g.Expect(err).To(MatchError(ContainSubstring("certificate is not trusted")))
		g.Expect(err.Error()).NotTo(ContainSubstring(password))
	})
	t.Run("SystemRootsDoNotTrustTheTestCA", func(t *testing.T) {
		b, err := open(t, spec(func(r *locksv1alpha1.RedisBackend) { r.TLS.CASecretRef = nil }), secrets)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(b.Ping(ctx)).To(MatchError(ContainSubstring("certificate is not trusted")))
	})
	t.Run("InsecureSkipVerify", func(t *testing.T) {
		b, err := open(t, spec(func(r *locksv1alpha1.RedisBackend) {
			r.TLS.CASecretRef, r.TLS.ServerName, r.TLS.InsecureSkipVerify = nil, "", true
		}), secrets)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(b.Ping(ctx)).To(Succeed())
	})
	t.Run("NoClientCertificate", func(t *testing.T) {
		b, err := open(t, spec(func(r *locksv1alpha1.RedisBackend) { r.TLS.ClientCertSecretRef = nil }), secrets)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		// With TLS 1.3 the server checks the client certificate after the handshake: the client
		// sees either its alert or the reset that follows it.
		NewWithT(t).Expect(b.Ping(ctx)).To(MatchError(MatchRegexp(
			`TLS: the server refused the handshake: remote error: tls: certificate required|does it require a client certificate`)))
	})
	t.Run("NoTLS", func(t *testing.T) {
		b, err := open(t, spec(func(r *locksv1alpha1.RedisBackend) { r.TLS = nil }), secrets)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		err = b.Ping(ctx)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("does it expect TLS? then set tls")))
		NewWithT(t).Expect(err.Error()).To(ContainSubstring(srv.Addr()))
	})
}

// TLS to a server that speaks plain TCP fails with a message that says so.
func TestFactoryTLSToPlainServer(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	b, err := open(t, locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis, Redis: &locksv1alpha1.RedisBackend{
		Address: locksv1alpha1.HostPort(srv.Addr()),
		TLS:     &locksv1alpha1.TLSConfig{InsecureSkipVerify: true},
	}}, redistest.Secrets{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(b.Ping(t.Context())).To(MatchError(ContainSubstring("or not speak TLS on this port")))
}

// Secrets that are missing or hold garbage fail the factory with errors that name them.
func TestFactorySecretErrors(t *testing.T) {
	certs := redistest.NewCerts(t)
	secrets := redistest.Secrets{
		secretNS + "/auth":    {"password": []byte("pw")},
		secretNS + "/garbage": {"ca.crt": []byte("not a certificate"), "tls.crt": []byte("x"), "tls.key": []byte("y")},
		secretNS + "/half":    {"tls.crt": certs.ClientCertPEM},
	}
	for name, tc := range map[string]struct {
		redis      *locksv1alpha1.RedisBackend
		want       string
		secretKind bool
	}{
		"no redis member": {nil, "spec.redis is not set", false},
		"missing password secret": {&locksv1alpha1.RedisBackend{Address: "127.0.0.1:6379",
			PasswordSecretRef: secretKey("nope", "password")}, "passwordSecretRef: secret unavailable: Secret lockwarden-system/nope not found", true},
		"missing password key": {&locksv1alpha1.RedisBackend{Address: "127.0.0.1:6379",
			PasswordSecretRef: secretKey("auth", "pass")}, `has no key "pass"`, true},
		"garbage CA": {&locksv1alpha1.RedisBackend{Address: "127.0.0.1:6379",
			TLS: &locksv1alpha1.TLSConfig{CASecretRef: secretKey("garbage", "ca.crt")}}, `tls.caSecretRef: key "ca.crt" of Secret lockwarden-system/garbage holds no PEM certificate`, false},
		"garbage client certificate": {&locksv1alpha1.RedisBackend{Address: "127.0.0.1:6379",
			TLS: &locksv1alpha1.TLSConfig{ClientCertSecretRef: &locksv1alpha1.SecretReference{Name: "garbage", Namespace: secretNS}}},
			"tls.clientCertSecretRef: Secret lockwarden-system/garbage: tls.crt and tls.key are not a valid certificate and key", false},
		"client certificate without key": {&locksv1alpha1.RedisBackend{Address: "127.0.0.1:6379",
			TLS: &locksv1alpha1.TLSConfig{ClientCertSecretRef: &locksv1alpha1.SecretReference{Name: "half", Namespace: secretNS}}},
			`tls.clientCertSecretRef: secret unavailable: Secret lockwarden-system/half has no key "tls.key"`, true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := open(t, locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis, Redis: tc.redis}, secrets)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			if tc.secretKind {
				g.Expect(err).To(MatchError(registry.ErrSecret))
			}
		})
	}
}

// The factory connects lazily: a LockBackend pointing at a dead address gets a session whose
// Ping reports the dial error (the LockBackend shows Ready=False with it) and which grants
// nothing.
func TestFactoryDeadAddress(t *testing.T) {
	g := NewWithT(t)
	b, err := open(t, locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis, Redis: &locksv1alpha1.RedisBackend{Address: "127.0.0.1:1"}}, redistest.Secrets{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Ping(t.Context())).To(MatchError(ContainSubstring("redis 127.0.0.1:1: ping: cannot connect: dial tcp 127.0.0.1:1: connect: connection refused")))
	_, err = b.TryAcquire(t.Context(), "app/lock", "a", holdTTL)
	g.Expect(err).To(MatchError(ContainSubstring("cannot connect")))
}
