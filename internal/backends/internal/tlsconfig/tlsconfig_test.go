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

package tlsconfig_test

import (
	"crypto/tls"
	"testing"

	. "github.com/onsi/gomega"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/internal/tlsconfig"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

func ref(name, key string) *locksv1alpha1.SecretKeySelector {
	return &locksv1alpha1.SecretKeySelector{SecretReference: locksv1alpha1.SecretReference{Name: name, Namespace: "ns"}, Key: key}
}

func TestBuild(t *testing.T) {
	certs := redistest.NewCerts(t)
	secrets := redistest.Secrets{
		"ns/ca":     {"ca.crt": certs.CAPEM, "junk": []byte("-----BEGIN NOTHING-----")},
		"ns/client": {"tls.crt": certs.ClientCertPEM, "tls.key": certs.ClientKeyPEM},
		"ns/wrong":  {"tls.crt": certs.ClientCertPEM, "tls.key": certs.ServerKeyPEM},
	}
	ctx := t.Context()

	t.Run("NoTLS", func(t *testing.T) {
		cfg, err := tlsconfig.Build(ctx, nil, secrets)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(cfg).To(BeNil())
	})
	t.Run("SystemRoots", func(t *testing.T) {
		g := NewWithT(t)
		cfg, err := tlsconfig.Build(ctx, &locksv1alpha1.TLSConfig{}, secrets)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.RootCAs).To(BeNil())
		g.Expect(cfg.Certificates).To(BeEmpty())
		g.Expect(cfg.MinVersion).To(BeEquivalentTo(tls.VersionTLS12))
		g.Expect(cfg.InsecureSkipVerify).To(BeFalse())
	})
	t.Run("Everything", func(t *testing.T) {
		g := NewWithT(t)
		cfg, err := tlsconfig.Build(ctx, &locksv1alpha1.TLSConfig{
			CASecretRef:         ref("ca", "ca.crt"),
			ClientCertSecretRef: &locksv1alpha1.SecretReference{Name: "client", Namespace: "ns"},
			ServerName:          "redis.example",
			InsecureSkipVerify:  true,
		}, secrets)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.RootCAs).NotTo(BeNil())
		g.Expect(cfg.Certificates).To(HaveLen(1))
		g.Expect(cfg.ServerName).To(Equal("redis.example"))
		g.Expect(cfg.InsecureSkipVerify).To(BeTrue())
	})
	for name, tc := range map[string]struct {
		spec       *locksv1alpha1.TLSConfig
		want       string
		secretKind bool
	}{
		"CA not PEM": {&locksv1alpha1.TLSConfig{CASecretRef: ref("ca", "junk")},
			`tls.caSecretRef: key "junk" of Secret ns/ca holds no PEM certificate`, false},
		"CA missing": {&locksv1alpha1.TLSConfig{CASecretRef: ref("nope", "ca.crt")},
			"tls.caSecretRef: secret unavailable: Secret ns/nope not found", true},
		"client key mismatch": {&locksv1alpha1.TLSConfig{ClientCertSecretRef: &locksv1alpha1.SecretReference{Name: "wrong", Namespace: "ns"}},
			"tls.clientCertSecretRef: Secret ns/wrong: tls.crt and tls.key are not a valid certificate and key: tls: private key does not match public key", false},
		"client secret missing": {&locksv1alpha1.TLSConfig{ClientCertSecretRef: &locksv1alpha1.SecretReference{Name: "nope", Namespace: "ns"}},
			"tls.clientCertSecretRef: secret unavailable: Secret ns/nope not found", true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := tlsconfig.Build(ctx, tc.spec, secrets)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(err).NotTo(MatchError(ContainSubstring("BEGIN")), "never quotes key material")
			if tc.secretKind {
				g.Expect(err).To(MatchError(registry.ErrSecret))
			}
		})
	}
}
