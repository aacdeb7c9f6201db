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
	"io"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lockwarden/lockwarden/internal/apirequests"
)

// metricSet is one scrape of a /metrics endpoint.
type metricSet map[string]*dto.MetricFamily

func parseMetrics(r io.Reader) (metricSet, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	return metricSet(families), err
}

// value is the sum of the gauges, counters or untyped values of the series of name whose labels
// include match, and whether there was any.
func (m metricSet) value(name string, match map[string]string) (float64, bool) {
	f, ok := m[name]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
	for _, s := range f.GetMetric() {
		if !labelsMatch(s.GetLabel(), match) {
			continue
		}
		found = true
		switch {
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Untyped != nil:
			sum += s.GetUntyped().GetValue()
		}
	}
	return sum, found
}

func labelsMatch(labels []*dto.LabelPair, match map[string]string) bool {
	for k, v := range match {
		if !slices.ContainsFunc(labels, func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
			return false
		}
	}
	return true
}

// apiKey names a kind of API request: verb, resource (resource.group) and subresource.
type apiKey struct{ verb, resource, subresource string }

func (k apiKey) String() string {
	s := k.verb + " " + k.resource
	if k.subresource != "" {
		s += "/" + k.subresource
	}
	if k.resource == "" {
		s = k.verb + " (non-resource URLs)"
	}
	return s
}

// isWrite tells whether the verb changes objects.
func (k apiKey) isWrite() bool {
	switch k.verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// apiCounts are request counts (or rates) by kind.
type apiCounts map[apiKey]float64

// apiRequests is lockwarden_api_requests_total summed over status codes.
func (m metricSet) apiRequests() apiCounts { return m.apiRequestsWithCode("") }

// apiRequestsWithCode is lockwarden_api_requests_total of one status code (all codes when
// empty), e.g. "409" for the conflicts of writes with a resourceVersion precondition.
func (m metricSet) apiRequestsWithCode(code string) apiCounts {
	out := apiCounts{}
	f, ok := m[apirequests.MetricName]
	if !ok {
		return out
	}
	for _, s := range f.GetMetric() {
		var k apiKey
		c := ""
		for _, l := range s.GetLabel() {
			switch l.GetName() {
			case "verb":
				k.verb = l.GetValue()
			case "resource":
				k.resource = l.GetValue()
			case "subresource":
				k.subresource = l.GetValue()
			case "code":
				c = l.GetValue()
			}
		}
		if code == "" || c == code {
			out[k] += s.GetCounter().GetValue()
		}
	}
	return out
}

// minus is the requests made between an earlier count and this one.
// restartedSince says whether any count is below its earlier value: the process was restarted in
// between and its counters began again from zero, so that c.minus(earlier) means nothing.
func (c apiCounts) restartedSince(earlier apiCounts) bool {
	for k, v := range earlier {
		if c[k] < v {
			return true
		}
	}
	return false
}

func (c apiCounts) minus(earlier apiCounts) apiCounts {
	out := apiCounts{}
	for k, v := range c {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// scaled divides every count by d (e.g. seconds, to get rates).
func (c apiCounts) scaled(d float64) apiCounts {
	out := apiCounts{}
	for k, v := range c {
		out[k] = v / d
	}
	return out
}

// writesTo sums the writes to a resource (any subresource).
func (c apiCounts) writesTo(resource string) float64 {
	var n float64
	for k, v := range c {
		if k.resource == resource && k.isWrite() {
			n += v
		}
	}
	return n
}

func (c apiCounts) total() float64 {
	var n float64
	for _, v := range c {
		n += v
	}
	return n
}

// sortedKeys orders kinds by resource, subresource, then verb.
func sortedKeys(counts ...apiCounts) []apiKey {
	set := map[apiKey]bool{}
	for _, c := range counts {
		for k := range c {
			set[k] = true
		}
	}
	keys := slices.Collect(maps.Keys(set))
	slices.SortFunc(keys, func(a, b apiKey) int {
		if c := strings.Compare(a.resource, b.resource); c != 0 {
			return c
		}
		if c := strings.Compare(a.subresource, b.subresource); c != 0 {
			return c
		}
		return strings.Compare(a.verb, b.verb)
	})
	return keys
}
