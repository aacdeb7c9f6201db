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

package main

import (
	"crypto/tls"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsServerOptions turns the metrics flags into the manager's metrics server options.
//
// By default the server speaks HTTPS and lets a request through only when the API server accepts
// its bearer token (TokenReview) and authorizes that user to get /metrics (SubjectAccessReview),
// so the manager's ServiceAccount needs config/rbac/metrics_auth_role.yaml and a scraper needs
// metrics_reader_role.yaml. The certificate comes from --metrics-cert-path when given, through the
// returned watcher, which the caller must run with the manager so that a renewed certificate is
// picked up; otherwise controller-runtime generates a self-signed one at start. With
// --metrics-secure=false the server speaks plain HTTP and checks nothing.
func metricsServerOptions(o options) (metricsserver.Options, *certwatcher.CertWatcher, error) {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if !o.metricsSecure || o.metricsAddr == "0" {
		return opts, nil, nil
	}
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	if !o.enableHTTP2 {
		// HTTP/2 stream resets let a client that need not authenticate first exhaust the server
		// (CVE-2023-44487, CVE-2023-39325); a scraper loses nothing with HTTP/1.1.
		opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	if o.metricsCertPath == "" {
		return opts, nil, nil
	}
	cert, key := filepath.Join(o.metricsCertPath, o.metricsCertName), filepath.Join(o.metricsCertPath, o.metricsCertKey)
	w, err := certwatcher.New(cert, key)
	if err != nil {
		return opts, nil, fmt.Errorf("loading the metrics certificate %s and key %s: %w", cert, key, err)
	}
	opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = w.GetCertificate })
	return opts, w, nil
}
