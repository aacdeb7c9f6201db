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
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestFamiliesAreWhatIsGathered gives every collector one series, with as many label values as
// Families says it has labels, and checks that a registry gathers exactly the families Families
// lists: same names, types and label names.
func TestFamiliesAreWhatIsGathered(t *testing.T) {
	g := NewWithT(t)
	// One Pending claim and one held lock: the scrape-time gauges then have a series each.
	m := New(&fakeCache{
		locks:  []*locksv1alpha1.DistributedLock{lock("ns", "a", "", time.Minute)},
		claims: []*locksv1alpha1.LockClaim{claim("ns", "w", "a", locksv1alpha1.ClaimPending, time.Second)},
	})
	reg := prometheus.NewPedanticRegistry()
	g.Expect(m.Register(reg)).To(Succeed())

	fams, err := m.Families()
	g.Expect(err).NotTo(HaveOccurred())
	cs := m.collectors()
	g.Expect(fams).To(HaveLen(len(cs)+2), "each collector describes one family, the scrape-time one three")
	for i, c := range cs {
		values := slices.Repeat([]string{"x"}, len(fams[i].Labels))
		// WithLabelValues panics on a wrong number of values, which fails the test.
		switch v := c.(type) {
		case *prometheus.CounterVec:
			v.WithLabelValues(values...).Inc()
		case *prometheus.GaugeVec:
			v.WithLabelValues(values...).Set(1)
		case *prometheus.HistogramVec:
			v.WithLabelValues(values...).Observe(1)
		case prometheus.Histogram:
			v.Observe(1)
		case *stateCollector: // reports every phase, and the ages of the claim and lock above, when scraped
		default:
			t.Fatalf("no way to give %T a series", c)
		}
	}

	gathered, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var got []Family
	for _, mf := range gathered {
		var labels []string
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, lp.GetName())
		}
		got = append(got, Family{Name: mf.GetName(), Type: strings.ToLower(mf.GetType().String()), Labels: labels})
	}
	want := slices.Clone(fams)
	for i := range want {
		want[i].Labels = slices.Sorted(slices.Values(want[i].Labels)) // a registry sorts labels by name
	}
	g.Expect(got).To(ConsistOf(want))
	g.Expect(fams).To(ContainElement(Family{Name: "lockwarden_backend_ready", Type: "gauge", Labels: []string{"backend"}}))
	g.Expect(fams).To(ContainElement(Family{Name: "lockwarden_claim_oldest_pending_seconds", Type: "gauge", Labels: []string{"backend"}}))
	g.Expect(fams).To(ContainElement(Family{Name: "lockwarden_lock_oldest_held_seconds", Type: "gauge", Labels: []string{"backend"}}))
	for _, f := range fams {
		g.Expect(f.Name).To(HavePrefix("lockwarden_"))
	}
}

func TestFamiliesWithoutACache(t *testing.T) {
	fams, err := New(nil).Families()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"lockwarden_claims", "lockwarden_claim_oldest_pending_seconds", "lockwarden_lock_oldest_held_seconds"} {
		NewWithT(t).Expect(fams).NotTo(ContainElement(HaveField("Name", name)), "Register leaves it out too")
	}
}

// TestDocsListEveryFamily: docs/metrics.md has a row for every family, with its type and labels.
func TestDocsListEveryFamily(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	fams, err := New(&fakeCache{}).Families()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		row := regexp.MustCompile("(?m)^\\| `" + f.Name + "` \\| ([a-z]+) \\| ([^|]*) \\|").FindSubmatch(doc)
		if row == nil {
			t.Errorf("docs/metrics.md has no row for %s", f.Name)
			continue
		}
		if string(row[1]) != f.Type {
			t.Errorf("docs/metrics.md says %s is a %s; it is a %s", f.Name, row[1], f.Type)
		}
		for _, l := range f.Labels {
			if !strings.Contains(string(row[2]), "`"+l+"`") {
				t.Errorf("docs/metrics.md does not give %s its label %s", f.Name, l)
			}
		}
	}
}
