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

package apirequests

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		method, url string
		want        Request
	}{
		{"GET", "/api/v1/namespaces/ns/pods", Request{"list", "pods", ""}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5", Request{"watch", "pods", ""}},
		{"GET", "/api/v1/pods?watch=1", Request{"watch", "pods", ""}},
		{"GET", "/api/v1/watch/namespaces/ns/pods", Request{"watch", "pods", ""}},
		{"GET", "/api/v1/namespaces/ns/pods/p", Request{"get", "pods", ""}},
		{"PATCH", "/api/v1/namespaces/ns/pods/p", Request{"patch", "pods", ""}},
		{"POST", "/api/v1/namespaces/ns/pods/p/eviction", Request{"create", "pods", "eviction"}},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", Request{"delete", "pods", ""}},
		{"DELETE", "/api/v1/namespaces/ns/pods", Request{"deletecollection", "pods", ""}},
		{"GET", "/api/v1/namespaces/ns", Request{"get", "namespaces", ""}},
		{"PUT", "/api/v1/namespaces/ns/finalize", Request{"update", "namespaces", "finalize"}},
		{"GET", "/api/v1/namespaces", Request{"list", "namespaces", ""}},
		{"GET", "/api/v1/nodes/n1", Request{"get", "nodes", ""}},
		{"PATCH", "/apis/locks.lockwarden.io/v1alpha1/namespaces/ns/lockclaims/c/status",
			Request{"patch", "lockclaims.locks.lockwarden.io", "status"}},
		{"PUT", "/apis/locks.lockwarden.io/v1alpha1/namespaces/ns/distributedlocks/l/status",
			Request{"update", "distributedlocks.locks.lockwarden.io", "status"}},
		{"GET", "/apis/locks.lockwarden.io/v1alpha1/lockbackends?limit=500", Request{"list", "lockbackends.locks.lockwarden.io", ""}},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/sys/leases/lockwarden-session",
			Request{"update", "leases.coordination.k8s.io", ""}},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", Request{"create", "events.events.k8s.io", ""}},
		// A server URL with a path prefix.
		{"GET", "/proxy/cluster/api/v1/namespaces/ns/pods/p", Request{"get", "pods", ""}},
		// Non-resource URLs: discovery, health, version.
		{"GET", "/apis/locks.lockwarden.io/v1alpha1", Request{"get", "", ""}},
		{"GET", "/api", Request{"get", "", ""}},
		{"GET", "/api/v1", Request{"get", "", ""}},
		{"GET", "/healthz", Request{"get", "", ""}},
		{"GET", "/version", Request{"get", "", ""}},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := Classify(c.method, u); got != c.want {
			t.Errorf("Classify(%s %s) = %+v, want %+v", c.method, c.url, got, c.want)
		}
	}
}

type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused")
}

func TestCounterCountsThroughTheWrappedTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			w.WriteHeader(http.StatusConflict)
		}
	}))
	defer srv.Close()
	c := New()
	reg := prometheus.NewRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
	do := func(method, path string) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	claimStatus := "/apis/locks.lockwarden.io/v1alpha1/namespaces/ns/lockclaims/c/status"
	do("PATCH", claimStatus)
	do("PATCH", claimStatus)
	do("GET", "/api/v1/namespaces/ns/pods")
	if _, err := (&http.Client{Transport: c.Wrap(failingTransport{})}).Get(srv.URL + "/api/v1/namespaces/ns/pods/p"); err == nil {
		t.Fatal("the failing transport must fail")
	}

	want := `
# HELP lockwarden_api_requests_total API requests this process sent, by verb, resource (resource.group; bare for the core group; empty for non-resource URLs), subresource and HTTP status code ("error" when no response came).
# TYPE lockwarden_api_requests_total counter
lockwarden_api_requests_total{code="200",resource="pods",subresource="",verb="list"} 1
lockwarden_api_requests_total{code="409",resource="lockclaims.locks.lockwarden.io",subresource="status",verb="patch"} 2
lockwarden_api_requests_total{code="error",resource="pods",subresource="",verb="get"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricName); err != nil {
		t.Error(err)
	}
}
