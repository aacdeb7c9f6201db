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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestLeaderElectionTimings(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatalf("the defaults must be accepted: %v", err)
	}
	if o.leaseDuration != 15*time.Second || o.renewDeadline != 10*time.Second || o.retryPeriod != 2*time.Second {
		t.Errorf("defaults = %s/%s/%s, want client-go's 15s/10s/2s", o.leaseDuration, o.renewDeadline, o.retryPeriod)
	}
	if _, err := parseFlags([]string{"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s",
		"--leader-election-retry-period=500ms"}); err != nil {
		t.Errorf("short but ordered timings must be accepted: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--leader-election-lease-duration=10s"}, "--leader-election-lease-duration (10s) must be longer than --leader-election-renew-deadline (10s)"},
		{[]string{"--leader-election-renew-deadline=2s"}, "--leader-election-renew-deadline (2s) must be longer than 1.2 × --leader-election-retry-period (2s)"},
		{[]string{"--leader-election-retry-period=0s"}, "--leader-election-retry-period must be positive"},
		{[]string{"--workload-kinds=batch/Job"}, `--workload-kinds: workload kind "batch/Job" is not group/version/Kind (e.g. batch/v1/Job, tekton.dev/v1/PipelineRun)`},
		{[]string{"--workload-kinds=batch/v1/jobs"}, `--workload-kinds: workload kind "batch/v1/jobs": the kind "jobs" must start with a capital letter`},
	} {
		_, err := parseFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%v) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// The deliberate bugs of mutation testing (internal/mutant) and the harness's pause points
// (internal/failpoint) exist only in test builds. The shipped build must not carry a trace of
// them; the tagged build is checked too, so that the test could fail.
func TestShippedBinaryCarriesNoMutantsOrFailpoints(t *testing.T) {
	markers := []string{"LOCKWARDEN_MUTANT", "LOCKWARDEN_FAILPOINT_FILE", "grant-unacquired", "release-unchecked"}
	build := func(tags string) string {
		t.Helper()
		out := filepath.Join(t.TempDir(), "manager")
		cmd := exec.Command("go", "build", "-trimpath", "-tags", tags, "-o", out, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %q: %v\n%s", tags, err, msg)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	// The shipped build is the one the other tests run: -trimpath, no cgo, stamped as make build
	// stamps it (the stamp changes only the link); building it again would cost a link.
	data, err := os.ReadFile(stampedManager(t))
	if err != nil {
		t.Fatal(err)
	}
	shipped := string(data)
	for _, m := range markers {
		if strings.Contains(shipped, m) {
			t.Errorf("the shipped manager contains %q", m)
		}
	}
	tagged := build("mutants,failpoints")
	for _, m := range markers {
		if !strings.Contains(tagged, m) {
			t.Errorf("the mutants,failpoints build lacks %q: this test would not notice a leak", m)
		}
	}
}

func TestNoClientSideThrottlingByDefault(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag float64
		want float32
	}{
		{o.qps, -1}, // the default: client-go throttles only at a positive QPS
		{0, -1},
		{-3, -1},
		{50, 50},
	} {
		if got := clientQPS(c.flag); got != c.want {
			t.Errorf("clientQPS(%v) = %v, want %v", c.flag, got, c.want)
		}
	}
}

func TestMetricsFlags(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.metricsAddr).To(Equal(":8443"))
	g.Expect(o.metricsSecure).To(BeTrue(), "HTTPS with authentication and authorization by default")
	opts, watcher, err := metricsServerOptions(o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(opts.SecureServing).To(BeTrue())
	g.Expect(opts.FilterProvider).NotTo(BeNil(), "the authentication and authorization filter")
	g.Expect(watcher).To(BeNil(), "no --metrics-cert-path: controller-runtime's self-signed certificate")

	// Local runs scrape plain HTTP on loopback.
	o, err = parseFlags([]string{"--metrics-secure=false", "--metrics-bind-address=127.0.0.1:8080"})
	g.Expect(err).NotTo(HaveOccurred())
	opts, watcher, err = metricsServerOptions(o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(opts.SecureServing).To(BeFalse())
	g.Expect(opts.FilterProvider).To(BeNil())
	g.Expect(watcher).To(BeNil())

	_, err = parseFlags([]string{"--metrics-secure=false", "--metrics-cert-path=/certs"})
	g.Expect(err).To(MatchError(ContainSubstring("--metrics-cert-path needs --metrics-secure")))

	o, err = parseFlags([]string{"--metrics-cert-path=" + t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = metricsServerOptions(o)
	g.Expect(err).To(MatchError(ContainSubstring("loading the metrics certificate")), "a missing certificate stops the start")
}

// Profiling endpoints and per-resource request counts are for benchmarks (make bench-scale) and
// debugging: a plain start serves neither.
func TestDiagnosticsOffByDefault(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.pprofAddr).To(Equal("0"), "0 disables controller-runtime's pprof server")
	g.Expect(o.apiRequestCounts).To(BeFalse())
	o, err = parseFlags([]string{"--pprof-bind-address=127.0.0.1:6060", "--api-request-metrics"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.pprofAddr).To(Equal("127.0.0.1:6060"))
	g.Expect(o.apiRequestCounts).To(BeTrue())
}

// The collector's target is 50 by default and refused below 10 (or negative: Go's "off").
func TestGCPercent(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.gcPercent).To(Equal(50))
	o, err = parseFlags([]string{"--gc-percent=100"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.gcPercent).To(Equal(100))
	for _, bad := range []string{"--gc-percent=5", "--gc-percent=-1"} {
		_, err = parseFlags([]string{bad})
		g.Expect(err).To(MatchError(ContainSubstring("--gc-percent must be at least 10")), bad)
	}
}

// One namespace's passes in flight are unbounded by default, bounded when asked, and a negative
// bound is refused by name.
func TestNamespaceWorkers(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.namespaceWorkers).To(Equal(0))
	o, err = parseFlags([]string{"--namespace-workers=4"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.namespaceWorkers).To(Equal(4))
	_, err = parseFlags([]string{"--namespace-workers=-1"})
	g.Expect(err).To(MatchError("--namespace-workers must be 0 (no bound) or more, got -1"))
}

// One namespace's passes per second are unbounded by default, bounded when asked (a fraction
// too), and a negative or non-finite rate is refused by name.
func TestNamespaceRate(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.namespaceRate).To(Equal(0.0))
	o, err = parseFlags([]string{"--namespace-rate=2.5"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.namespaceRate).To(Equal(2.5))
	for _, bad := range []string{"-1", "NaN", "+Inf"} {
		_, err = parseFlags([]string{"--namespace-rate=" + bad})
		g.Expect(err).To(MatchError(HavePrefix("--namespace-rate must be 0 (no bound) or a positive number of passes per second, got ")), bad)
	}
}

// The Go memory limit follows the container's by default and is refused outside 0..1.
func TestMemoryLimitRatio(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.memLimitRatio).To(Equal(0.9))
	o, err = parseFlags([]string{"--memory-limit-ratio=0"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.memLimitRatio).To(BeZero())
	for _, bad := range []string{"--memory-limit-ratio=1.5", "--memory-limit-ratio=-0.1"} {
		_, err = parseFlags([]string{bad})
		g.Expect(err).To(MatchError(ContainSubstring("--memory-limit-ratio must be from 0 (off) to 1")), bad)
	}
}
