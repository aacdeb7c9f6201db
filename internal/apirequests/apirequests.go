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

// Package apirequests counts the requests a process sends to the Kubernetes API server by verb,
// resource and subresource, named as the API server names them in its audit log (get, list,
// watch, create, update, patch, delete, deletecollection; "lockclaims.locks.lockwarden.io",
// "status"). client-go's own rest_client_requests_total has only the HTTP method and host, which
// cannot tell a claim status patch from a pod patch, nor a list from a get.
//
// A Counter wraps the transport of a rest.Config (rest.Config.Wrap), so that every client built
// from that config is counted: the manager's cache and client, the built-in backend's direct
// client, leader election and events. Each request is counted once, when its response headers
// arrive (a watch when it is established), with its status code, or "error" when no response
// came.
package apirequests

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricName is the counter's name.
const MetricName = "lockwarden_api_requests_total"

// Counter counts API requests. Create it with New, register it once and wrap transports with it.
type Counter struct {
	requests *prometheus.CounterVec
}

// New returns a Counter.
func New() *Counter {
	return &Counter{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricName,
		Help: "API requests this process sent, by verb, resource (resource.group; bare for the core group; empty for non-resource URLs), subresource and HTTP status code (\"error\" when no response came).",
	}, []string{"verb", "resource", "subresource", "code"})}
}

// Register registers the counter with reg.
func (c *Counter) Register(reg prometheus.Registerer) error { return reg.Register(c.requests) }

// Wrap returns rt wrapped so that every request through it is counted; it has the signature of
// rest.Config.Wrap's argument.
func (c *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{next: rt, c: c}
}

type roundTripper struct {
	next http.RoundTripper
	c    *Counter
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	r := Classify(req.Method, req.URL)
	t.c.requests.WithLabelValues(r.Verb, r.Resource, r.Subresource, code).Inc()
	return resp, err
}

// Request is what Classify makes of a request.
type Request struct {
	// Verb is the API server's name for it: get, list, watch, create, update, patch, delete,
	// deletecollection; for a non-resource URL the lower-case HTTP method.
	Verb string
	// Resource is "resource.group", or the bare resource for the core group; empty for
	// non-resource URLs (discovery, /healthz, /version).
	Resource string
	// Subresource is e.g. "status", "eviction"; empty for the object itself.
	Subresource string
}

// Classify names a request as the API server's request info does: /api/v1/... is the core group,
// /apis/<group>/<version>/... any other; then optionally namespaces/<namespace>, the resource, a
// name and a subresource. A path prefix before /api or /apis (a server URL with a path) is
// skipped.
func Classify(method string, u *url.URL) Request {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	// Skip a server path prefix: everything before the first "api" or "apis" segment.
	for i, p := range parts {
		if p == "api" || p == "apis" {
			parts = parts[i:]
			break
		}
	}
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api": // api, v1, ...
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis": // apis, group, version, ...
		group, parts = parts[1], parts[3:]
	default:
		return Request{Verb: strings.ToLower(method)}
	}
	// The legacy /watch/ prefix: GET /api/v1/watch/namespaces/x/pods.
	watchPrefix := false
	if parts[0] == "watch" {
		watchPrefix, parts = true, parts[1:]
	}
	// namespaces/<namespace>/<resource>...; but namespaces/<namespace>, .../status and
	// .../finalize are the namespace object itself and its subresources.
	if len(parts) >= 3 && parts[0] == "namespaces" && parts[2] != "status" && parts[2] != "finalize" {
		parts = parts[2:]
	}
	var r Request
	if len(parts) == 0 || parts[0] == "" {
		return Request{Verb: strings.ToLower(method)}
	}
	r.Resource = parts[0]
	if group != "" {
		r.Resource += "." + group
	}
	named := len(parts) >= 2
	if len(parts) >= 3 {
		r.Subresource = parts[2]
	}
	q := u.Query()
	watching := watchPrefix || q.Get("watch") == "true" || q.Get("watch") == "1"
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watching:
			r.Verb = "watch"
		case named:
			r.Verb = "get"
		default:
			r.Verb = "list"
		}
	case http.MethodPost:
		r.Verb = "create"
	case http.MethodPut:
		r.Verb = "update"
	case http.MethodPatch:
		r.Verb = "patch"
	case http.MethodDelete:
		if named {
			r.Verb = "delete"
		} else {
			r.Verb = "deletecollection"
		}
	default:
		r.Verb = strings.ToLower(method)
	}
	return r
}
