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

package metrics

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Family describes one metric family that Register adds.
type Family struct {
	// Name is the family's name. A histogram's series are <Name>_bucket, <Name>_sum and
	// <Name>_count.
	Name string
	// Type is "counter", "gauge" or "histogram".
	Type string
	// Labels are the family's label names, in the order the collector declares them; a
	// histogram's _bucket series also have le.
	Labels []string
}

// Families lists the metric families Register adds, read from the collectors themselves, so that
// what names them outside Go (the Helm chart's alerts and dashboard, the docs) can be checked
// against what the manager exports.
func (m *Metrics) Families() ([]Family, error) {
	var fams []Family
	for _, c := range m.collectors() {
		typ, err := familyType(c)
		if err != nil {
			return nil, err
		}
		ch := make(chan *prometheus.Desc)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			name, labels, err := parseDesc(d)
			if err != nil {
				return nil, err
			}
			fams = append(fams, Family{Name: name, Type: typ, Labels: labels})
		}
	}
	return fams, nil
}

func familyType(c prometheus.Collector) (string, error) {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter", nil
	case *prometheus.GaugeVec, *stateCollector:
		return "gauge", nil
	case *prometheus.HistogramVec, prometheus.Histogram:
		return "histogram", nil
	}
	return "", fmt.Errorf("metrics: no family type known for collector %T", c)
}

// descPattern reads a prometheus.Desc's String(), the only way client_golang offers to read a
// description's name and labels: `Desc{fqName: "...", help: "...", ..., variableLabels: {a,b}}`.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([a-zA-Z_:][a-zA-Z0-9_:]*)", .*variableLabels: \{([^}]*)\}\}$`)

func parseDesc(d *prometheus.Desc) (string, []string, error) {
	if err := d.Err(); err != nil {
		return "", nil, err
	}
	m := descPattern.FindStringSubmatch(d.String())
	if m == nil {
		return "", nil, fmt.Errorf("metrics: cannot read the name and labels of %s", d)
	}
	var labels []string
	for _, l := range strings.Split(m[2], ",") {
		if l = strings.TrimSpace(l); l != "" {
			// A label with a constraint prints as c(name).
			labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"))
		}
	}
	return m[1], labels, nil
}
