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

package charts_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/metrics"
)

// The chart's alerts and dashboard may only name series the manager exports, with labels those
// series have: the families come from the metrics package itself, and every PromQL expression is
// parsed with Prometheus's own parser and walked.

// series is one series name a query may select: a family's own name, or a histogram's _bucket,
// _sum or _count.
type series struct {
	family  metrics.Family
	labels  map[string]bool
	counter bool // rate and increase apply
}

// exportedSeries lists every series name the manager exports, from the metrics package.
func exportedSeries(t *testing.T) map[string]series {
	t.Helper()
	m := metrics.New(describeOnly{})
	fams, err := m.Families()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]series{}
	for _, f := range fams {
		ls := map[string]bool{}
		for _, l := range f.Labels {
			ls[l] = true
		}
		switch f.Type {
		case "histogram":
			out[f.Name+"_bucket"] = series{family: f, labels: with(ls, "le"), counter: true}
			out[f.Name+"_sum"] = series{family: f, labels: ls, counter: true}
			out[f.Name+"_count"] = series{family: f, labels: ls, counter: true}
		case "counter":
			out[f.Name] = series{family: f, labels: ls, counter: true}
		default:
			out[f.Name] = series{family: f, labels: ls}
		}
	}
	return out
}

// describeOnly stands in for the informer cache, so that Families includes the scrape-time
// gauges; describing them reads nothing.
type describeOnly struct{ metrics.InformerSource }

func with(set map[string]bool, l string) map[string]bool {
	out := map[string]bool{l: true}
	for k := range set {
		out[k] = true
	}
	return out
}

// knownValues are the values the manager gives these labels; a query that matches another value
// selects nothing, for ever.
var knownValues = map[string][]string{
	"result": {metrics.ResultAcquired, metrics.ResultLocked, metrics.ResultRenewed, metrics.ResultLost, metrics.ResultError},
	"phase": {string(locksv1alpha1.ClaimPending), string(locksv1alpha1.ClaimHeld), string(locksv1alpha1.ClaimReleased),
		string(locksv1alpha1.ClaimLost), string(locksv1alpha1.ClaimTimedOut), string(locksv1alpha1.ClaimFailed)},
}

// checkQuery parses expr and reports, as errors of t, every series it selects that the manager
// does not export, every label it matches, groups or joins on that its series do not have, rate or
// increase over a gauge, and a histogram_quantile that does not keep le. It returns the parsed
// expression (nil when it does not parse).
func checkQuery(t *testing.T, where, expr string, exported map[string]series) parser.Expr {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	fail := func(format string, args ...any) { t.Errorf("%s: %s: %s", where, expr, fmt.Sprintf(format, args...)) }
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			s, ok := exported[n.Name]
			if !ok {
				fail("selects %q, which the manager does not export", n.Name)
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					continue
				}
				if !s.labels[m.Name] {
					fail("matches label %q, which %s does not have (it has %v)", m.Name, n.Name, s.family.Labels)
				}
				if vs, ok := knownValues[m.Name]; ok && m.Type == labels.MatchEqual && !slices.Contains(vs, m.Value) {
					fail("matches %s=%q, a value the manager never gives it (%v)", m.Name, m.Value, vs)
				}
			}
		case *parser.AggregateExpr:
			have := labelsIn(n.Expr, exported)
			for _, l := range n.Grouping {
				if !have[l] {
					fail("groups by %q, which none of %s's series has", l, n.Expr)
				}
			}
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				have := labelsIn(n.LHS, exported)
				for l := range labelsIn(n.RHS, exported) {
					have[l] = true
				}
				for _, l := range append(slices.Clone(n.VectorMatching.MatchingLabels), n.VectorMatching.Include...) {
					if !have[l] {
						fail("matches on %q, which neither side has", l)
					}
				}
			}
		case *parser.Call:
			switch n.Func.Name {
			case "rate", "irate", "increase":
				for _, name := range selectorsIn(n.Args) {
					if s, ok := exported[name]; ok && !s.counter {
						fail("takes %s of %s, a gauge", n.Func.Name, name)
					}
				}
			case "histogram_quantile":
				for _, name := range selectorsIn(n.Args[1]) {
					if !strings.HasSuffix(name, "_bucket") {
						fail("histogram_quantile over %s, not a _bucket series", name)
					}
				}
				parser.Inspect(n.Args[1], func(inner parser.Node, _ []parser.Node) error {
					if agg, ok := inner.(*parser.AggregateExpr); ok && (agg.Without || !slices.Contains(agg.Grouping, "le")) {
						fail("histogram_quantile over %s, which drops le", agg)
					}
					return nil
				})
			}
		}
		return nil
	})
	return e
}

// selectorsIn returns the series names selected anywhere in n.
func selectorsIn(n parser.Node) []string {
	var names []string
	if n == nil {
		return nil
	}
	parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// labelsIn returns the labels of every exported series selected anywhere in n.
func labelsIn(n parser.Node, exported map[string]series) map[string]bool {
	out := map[string]bool{}
	for _, name := range selectorsIn(n) {
		for l := range exported[name].labels {
			out[l] = true
		}
	}
	return out
}

// alertRule is one rule of the chart's PrometheusRule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alertRules returns the rules of the PrometheusRule in objs, or nil when there is none.
func alertRules(t *testing.T, objs objects) []alertRule {
	t.Helper()
	keys := objs.ofKind("PrometheusRule")
	if len(keys) == 0 {
		return nil
	}
	var pr struct {
		Spec struct {
			Groups []struct {
				Name  string      `json:"name"`
				Rules []alertRule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(objs[keys[0]], &pr); err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, g := range pr.Spec.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// docAnchors returns the GitHub anchors of the headings in docs/metrics.md.
func docAnchors(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimSpace(strings.TrimLeft(h, "#"))
			anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
		}
	}
	return anchors
}

// prometheusTemplate parses and runs an annotation as Prometheus does for an alert (text/template
// with $labels and $value defined, and its humanize functions), with the given labels.
func prometheusTemplate(text string, ls map[string]string) (string, error) {
	const defs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	num := func(v any) string { return fmt.Sprint(v) }
	tmpl, err := template.New("annotation").Option("missingkey=error").Funcs(template.FuncMap{
		"humanize": num, "humanize1024": num, "humanizeDuration": num, "humanizePercentage": num, "humanizeTimestamp": num,
	}).Parse(defs + text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = tmpl.Execute(&b, struct {
		Labels, ExternalLabels map[string]string
		ExternalURL            string
		Value                  float64
	}{Labels: ls, Value: 1})
	return b.String(), err
}

var allAlerts = []string{
	"LockwardenBackendNotReady", "LockwardenRenewalsFailing", "LockwardenClaimsWaitedLong", "LockwardenClaimPendingLong",
	"LockwardenHoldsLastedLong", "LockwardenLockHeldLong", "LockwardenLocksLost",
}

func TestPrometheusRule(t *testing.T) {
	exported := exportedSeries(t)
	anchors := docAnchors(t)
	objs := render(t, "--set", "metrics.prometheusRule.enabled=true")
	rules := alertRules(t, objs)
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
	}
	NewWithT(t).Expect(names).To(ConsistOf(allAlerts), "every alert is on once the PrometheusRule is")

	for _, r := range rules {
		t.Run(r.Alert, func(t *testing.T) {
			g := NewWithT(t)
			e := checkQuery(t, r.Alert, r.Expr, exported)
			g.Expect(e).NotTo(BeNil())
			if e != nil {
				g.Expect(e.Type()).To(Equal(parser.ValueTypeVector), "an alert's expression is an instant vector")
			}
			if r.For != "" {
				_, err := model.ParseDuration(r.For)
				g.Expect(err).NotTo(HaveOccurred(), "for: %q", r.For)
			}
			g.Expect(r.Labels).To(HaveKeyWithValue("severity", Not(BeEmpty())))
			g.Expect(r.Annotations).To(HaveKey("summary"))
			g.Expect(r.Annotations).To(HaveKey("description"))

			// Each annotation is a Prometheus template that names only labels the expression's
			// series have, and runs.
			have := map[string]string{}
			for l := range labelsIn(e, exported) {
				have[l] = "x"
			}
			for name, text := range r.Annotations {
				out, err := prometheusTemplate(text, have)
				g.Expect(err).NotTo(HaveOccurred(), "annotation %s: %q", name, text)
				g.Expect(out).NotTo(ContainSubstring("{{"), "annotation %s", name)
			}

			doc, anchor, ok := strings.Cut(r.Annotations["runbook_url"], "#")
			g.Expect(ok).To(BeTrue(), "a runbook_url with an anchor")
			g.Expect(doc).To(HaveSuffix("/docs/metrics.md"))
			g.Expect(anchors).To(HaveKey(anchor), "docs/metrics.md has a section for the alert")
		})
	}

	t.Run("values tune and turn off the alerts", func(t *testing.T) {
		g := NewWithT(t)
		objs := render(t, "--set", "metrics.prometheusRule.enabled=true",
			"--set", "metrics.prometheusRule.namespace=monitoring",
			"--set", "metrics.prometheusRule.labels.release=prometheus",
			"--set", "metrics.prometheusRule.alertLabels.team=platform",
			"--set", "metrics.prometheusRule.longHolds.enabled=false",
			"--set", "metrics.prometheusRule.lostHolds.enabled=false",
			"--set", "metrics.prometheusRule.claimsWaiting.thresholdSeconds=327.68",
			"--set", "metrics.prometheusRule.backendNotReady.for=2m",
			"--set", "metrics.prometheusRule.backendNotReady.severity=page",
			"--set", "metrics.prometheusRule.renewalFailures.threshold=3",
			"--set", "metrics.prometheusRule.renewalFailures.window=30m")
		var meta struct {
			Metadata struct {
				Namespace string            `json:"namespace"`
				Labels    map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		g.Expect(yaml.Unmarshal(objs["PrometheusRule/lw-lockwarden"], &meta)).To(Succeed())
		g.Expect(meta.Metadata.Namespace).To(Equal("monitoring"))
		g.Expect(meta.Metadata.Labels).To(HaveKeyWithValue("release", "prometheus"))
		rules := map[string]alertRule{}
		for _, r := range alertRules(t, objs) {
			rules[r.Alert] = r
			checkQuery(t, r.Alert, r.Expr, exported)
			g.Expect(r.Labels).To(HaveKeyWithValue("team", "platform"), r.Alert)
		}
		g.Expect(rules).To(HaveLen(4))
		g.Expect(rules).NotTo(HaveKey("LockwardenHoldsLastedLong"))
		g.Expect(rules).NotTo(HaveKey("LockwardenLocksLost"))
		g.Expect(rules["LockwardenBackendNotReady"].For).To(Equal("2m"))
		g.Expect(rules["LockwardenBackendNotReady"].Labels).To(HaveKeyWithValue("severity", "page"))
		g.Expect(rules["LockwardenRenewalsFailing"].Expr).To(HaveSuffix("[30m])) > 3"))
		g.Expect(rules["LockwardenClaimsWaitedLong"].Expr).To(HaveSuffix("[327s]))) > 327.68"))
		g.Expect(rules["LockwardenClaimPendingLong"].Expr).To(Equal("max by (backend) (lockwarden_claim_oldest_pending_seconds) > 327.68"))
		g.Expect(rules["LockwardenClaimPendingLong"].For).To(BeEmpty(), "the gauge is the age already")
	})

	t.Run("a threshold given as a number in a values file", func(t *testing.T) {
		rules := alertRules(t, render(t, "--values", filepath.Join("testdata", "all-options.yaml")))
		for _, r := range rules {
			checkQuery(t, r.Alert, r.Expr, exported)
			if r.Alert == "LockwardenClaimsWaitedLong" {
				NewWithT(t).Expect(r.Expr).To(HaveSuffix("[327s]))) > 327.68"))
			}
		}
		NewWithT(t).Expect(rules).To(HaveLen(5), "all-options turns longHolds off")
	})

	t.Run("no PrometheusRule without metrics, or with every alert off", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(render(t, "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.enabled=false").ofKind("PrometheusRule")).To(BeEmpty())
		args := []string{"--set", "metrics.prometheusRule.enabled=true"}
		for _, a := range []string{"backendNotReady", "renewalFailures", "claimsWaiting", "longHolds", "lostHolds"} {
			args = append(args, "--set", "metrics.prometheusRule."+a+".enabled=false")
		}
		g.Expect(render(t, args...).ofKind("PrometheusRule")).To(BeEmpty())
	})
}

// TestAlertThresholdsAreBucketBounds: the 99th percentile of a classic histogram is exact only at
// a bucket bound, so the default thresholds of the percentile alerts sit on one.
func TestAlertThresholdsAreBucketBounds(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var values struct {
		Metrics struct {
			PrometheusRule struct {
				ClaimsWaiting struct {
					ThresholdSeconds float64 `json:"thresholdSeconds"`
				} `json:"claimsWaiting"`
				LongHolds struct {
					ThresholdSeconds float64 `json:"thresholdSeconds"`
				} `json:"longHolds"`
			} `json:"prometheusRule"`
		} `json:"metrics"`
	}
	g.Expect(yaml.Unmarshal(raw, &values)).To(Succeed())
	m := metrics.New(nil)
	g.Expect(bucketBounds(t, m.WaitSeconds)).To(ContainElement(values.Metrics.PrometheusRule.ClaimsWaiting.ThresholdSeconds))
	g.Expect(bucketBounds(t, m.HoldSeconds)).To(ContainElement(values.Metrics.PrometheusRule.LongHolds.ThresholdSeconds))
}

// bucketBounds returns the upper bounds of h's buckets.
func bucketBounds(t *testing.T, h *prometheus.HistogramVec) []float64 {
	t.Helper()
	var d dto.Metric
	if err := h.WithLabelValues("x").(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	var bounds []float64
	for _, b := range d.GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	return bounds
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Panels  []panel `json:"panels"` // of a collapsed row
	Targets []struct {
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

// grafanaIntervals stand in for Grafana's built-in range variables, so that a query parses as
// Prometheus will receive it.
var grafanaIntervals = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

func TestGrafanaDashboard(t *testing.T) {
	g := NewWithT(t)
	exported := exportedSeries(t)
	objs := render(t, "--set", "metrics.grafanaDashboard.enabled=true")
	var cm corev1.ConfigMap
	objs.get(t, "ConfigMap/lw-lockwarden-dashboard", &cm)
	g.Expect(cm.Namespace).To(Equal("locks"))
	g.Expect(cm.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"), "the label Grafana's sidecar looks for by default")
	g.Expect(cm.Data).To(HaveKey("lockwarden.json"))
	file, err := os.ReadFile(filepath.Join(chart, "dashboards", "lockwarden.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Data["lockwarden.json"]).To(Equal(strings.TrimSuffix(string(file), "\n")), "the file, as it is")

	var d dashboard
	dec := json.NewDecoder(strings.NewReader(cm.Data["lockwarden.json"]))
	g.Expect(dec.Decode(&d)).To(Succeed(), "the dashboard is JSON")
	g.Expect(dec.More()).To(BeFalse(), "and only one JSON value")
	g.Expect(d.UID).NotTo(BeEmpty())
	g.Expect(d.Title).NotTo(BeEmpty())

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		var q string
		g.Expect(json.Unmarshal(v.Query, &q)).To(Succeed(), "variable %s", v.Name)
		m := regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`).FindStringSubmatch(q)
		g.Expect(m).NotTo(BeNil(), "variable %s: %q is label_values(selector, label)", v.Name, q)
		if m != nil {
			e := checkQuery(t, "variable "+v.Name, m[1], exported)
			g.Expect(labelsIn(e, exported)).To(HaveKey(m[2]), "variable %s", v.Name)
		}
		g.Expect(v.Datasource).To(Equal(&datasource{Type: "prometheus", UID: "${datasource}"}), "variable %s", v.Name)
	}
	g.Expect(vars).To(HaveKey("datasource"), "the data source is chosen, not fixed")

	used := map[string]bool{}
	ids := map[int]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			g.Expect(ids).NotTo(HaveKey(p.ID), "panel ids are unique (%s)", p.Title)
			ids[p.ID] = p.Title
			g.Expect(p.GridPos.X+p.GridPos.W).To(BeNumerically("<=", 24), "panel %s fits the grid", p.Title)
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			g.Expect(p.Datasource).To(Equal(&datasource{Type: "prometheus", UID: "${datasource}"}), "panel %s", p.Title)
			g.Expect(p.Targets).NotTo(BeEmpty(), "panel %s", p.Title)
			for _, target := range p.Targets {
				g.Expect(target.Datasource).To(Equal(&datasource{Type: "prometheus", UID: "${datasource}"}), "panel %s", p.Title)
				for _, ref := range regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`).FindAllStringSubmatch(target.Expr, -1) {
					g.Expect(strings.HasPrefix(ref[1], "__") || vars[ref[1]]).To(BeTrue(), "panel %s uses $%s, which the dashboard does not define", p.Title, ref[1])
				}
				e := checkQuery(t, "panel "+p.Title, grafanaIntervals.Replace(target.Expr), exported)
				for _, name := range selectorsIn(e) {
					used[exported[name].family.Name] = true
				}
			}
		}
	}
	walk(d.Panels)
	for _, s := range exported {
		g.Expect(used).To(HaveKey(s.family.Name), "the dashboard shows every lockwarden metric")
	}

	t.Run("the sidecar's label is configurable", func(t *testing.T) {
		g := NewWithT(t)
		objs := render(t, "--set", "metrics.grafanaDashboard.enabled=true",
			"--set", "metrics.grafanaDashboard.sidecarLabel=example.com/dashboard",
			"--set-string", "metrics.grafanaDashboard.sidecarLabelValue=lockwarden",
			"--set", "metrics.grafanaDashboard.namespace=grafana",
			"--set", "metrics.grafanaDashboard.annotations.grafana_folder=Platform")
		var cm corev1.ConfigMap
		objs.get(t, "ConfigMap/lw-lockwarden-dashboard", &cm)
		g.Expect(cm.Labels).To(HaveKeyWithValue("example.com/dashboard", "lockwarden"))
		g.Expect(cm.Labels).NotTo(HaveKey("grafana_dashboard"))
		g.Expect(cm.Namespace).To(Equal("grafana"))
		g.Expect(cm.Annotations).To(HaveKeyWithValue("grafana_folder", "Platform"))
	})
	t.Run("no dashboard without metrics", func(t *testing.T) {
		NewWithT(t).Expect(render(t, "--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.enabled=false").ofKind("ConfigMap")).To(BeEmpty())
	})
}
