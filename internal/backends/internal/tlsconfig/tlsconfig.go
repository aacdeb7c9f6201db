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

// Package tlsconfig builds the *tls.Config a backend dials with from a LockBackend's tls member
// and the Secrets it names, for every backend that speaks TLS (Redis, Redlock, etcd).
package tlsconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// SecretReader reads one key of a Secret; registry.SecretReader is one.
type SecretReader interface {
	Read(ctx context.Context, ref locksv1alpha1.SecretKeySelector) ([]byte, error)
}

// Build returns the TLS configuration that spec describes; nil when spec is nil (no TLS).
//
//   - caSecretRef: the PEM bundle of authorities trusted for the server's certificate, instead
//     of the system's roots.
//   - clientCertSecretRef: a kubernetes.io/tls Secret whose tls.crt and tls.key are presented
//     to the server (mutual TLS).
//   - serverName: the name checked against the server's certificate; empty means the host of
//     the address dialled.
//   - insecureSkipVerify: no verification at all (tests only).
//
// TLS 1.2 is the minimum. Errors name the Secret and key at fault, never their contents; those
// about reading a Secret wrap the reader's error (registry.ErrSecret).
func Build(ctx context.Context, spec *locksv1alpha1.TLSConfig, secrets SecretReader) (*tls.Config, error) {
	if spec == nil {
		return nil, nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         spec.ServerName,
		InsecureSkipVerify: spec.InsecureSkipVerify, //nolint:gosec // the user's explicit choice, documented as tests only
	}
	if ref := spec.CASecretRef; ref != nil {
		pem, err := secrets.Read(ctx, *ref)
		if err != nil {
			return nil, fmt.Errorf("tls.caSecretRef: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.caSecretRef: key %q of Secret %s/%s holds no PEM certificate",
				ref.Key, ref.Namespace, ref.Name)
		}
		cfg.RootCAs = pool
	}
	if ref := spec.ClientCertSecretRef; ref != nil {
		certPEM, err := secrets.Read(ctx, locksv1alpha1.SecretKeySelector{SecretReference: *ref, Key: corev1.TLSCertKey})
		if err != nil {
			return nil, fmt.Errorf("tls.clientCertSecretRef: %w", err)
		}
		keyPEM, err := secrets.Read(ctx, locksv1alpha1.SecretKeySelector{SecretReference: *ref, Key: corev1.TLSPrivateKeyKey})
		if err != nil {
			return nil, fmt.Errorf("tls.clientCertSecretRef: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// The parser's message says what is wrong with the PEM data without quoting it.
			return nil, fmt.Errorf("tls.clientCertSecretRef: Secret %s/%s: %s and %s are not a valid certificate and key: %v",
				ref.Namespace, ref.Name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
