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

// Package backendfixtures holds what the real-server test helpers (redistest, etcdtest) share:
// a throwaway PKI for TLS tests and an in-memory Secret reader for factory tests.
package backendfixtures

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLS describes a TLS-only test server: its certificate files and the client configuration its
// readiness check uses.
type TLS struct {
	// CertFile and KeyFile are the server's PEM certificate and key.
	CertFile, KeyFile string
	// CAFile is the PEM bundle the server checks client certificates against.
	CAFile string
	// ClientAuth makes the server require a client certificate.
	ClientAuth bool
	// Client is the TLS configuration the readiness check connects with.
	Client *tls.Config
}

// Certs is a throwaway PKI for TLS tests: a CA, a server certificate for 127.0.0.1 and a server
// name, and a client certificate, all signed by the CA. The *PEM fields hold PEM data, the
// *File fields the paths of the same data on disk.
type Certs struct {
	CAPEM, ServerCertPEM, ServerKeyPEM, ClientCertPEM, ClientKeyPEM      []byte
	CAFile, ServerCertFile, ServerKeyFile, ClientCertFile, ClientKeyFile string
}

// NewCerts makes a PKI in a temporary directory whose server certificate names serverName (and
// 127.0.0.1) and has the common name server, e.g. "redis server".
func NewCerts(t testing.TB, serverName, server string) *Certs {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lockwarden test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("backendfixtures: CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("backendfixtures: CA certificate: %v", err)
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage, server bool) (certOut, keyOut []byte) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			tmpl.DNSNames = []string{serverName}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("backendfixtures: %s certificate: %v", name, err)
		}
		return pemBlock("CERTIFICATE", der), keyPEM(t, key)
	}
	c := &Certs{CAPEM: pemBlock("CERTIFICATE", caDER)}
	c.ServerCertPEM, c.ServerKeyPEM = leaf(2, server, x509.ExtKeyUsageServerAuth, true)
	c.ClientCertPEM, c.ClientKeyPEM = leaf(3, "lockwarden", x509.ExtKeyUsageClientAuth, false)
	for _, f := range []struct {
		path *string
		name string
		data []byte
	}{
		{&c.CAFile, "ca.crt", c.CAPEM},
		{&c.ServerCertFile, "server.crt", c.ServerCertPEM},
		{&c.ServerKeyFile, "server.key", c.ServerKeyPEM},
		{&c.ClientCertFile, "client.crt", c.ClientCertPEM},
		{&c.ClientKeyFile, "client.key", c.ClientKeyPEM},
	} {
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, f.data, 0o600); err != nil {
			t.Fatalf("backendfixtures: %v", err)
		}
	}
	return c
}

// ServerTLS returns the TLS options for a server with these certificates; the readiness check
// presents the client certificate.
func (c *Certs) ServerTLS(t testing.TB, clientAuth bool) *TLS {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAPEM)
	cert, err := tls.X509KeyPair(c.ClientCertPEM, c.ClientKeyPEM)
	if err != nil {
		t.Fatalf("backendfixtures: client key pair: %v", err)
	}
	return &TLS{
		CertFile: c.ServerCertFile, KeyFile: c.ServerKeyFile, CAFile: c.CAFile, ClientAuth: clientAuth,
		Client: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("backendfixtures: key: %v", err)
	}
	return key
}

func keyPEM(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("backendfixtures: key: %v", err)
	}
	return pemBlock("PRIVATE KEY", der)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
