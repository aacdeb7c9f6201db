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
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/test/bench/proccpu"
)

const scrapeText = `# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 4.194304e+07
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 8.388608e+07
# TYPE leader_election_master_status gauge
leader_election_master_status{name="lockwarden.locks.lockwarden.io"} 1
# TYPE lockwarden_api_requests_total counter
lockwarden_api_requests_total{code="200",resource="lockclaims.locks.lockwarden.io",subresource="status",verb="patch"} 30
lockwarden_api_requests_total{code="409",resource="lockclaims.locks.lockwarden.io",subresource="status",verb="patch"} 2
lockwarden_api_requests_total{code="200",resource="leases.coordination.k8s.io",subresource="",verb="update"} 7
lockwarden_api_requests_total{code="200",resource="pods",subresource="",verb="watch"} 1
`

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(scrapeText))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m.value("go_memstats_heap_inuse_bytes", nil); !ok || v != 40<<20 {
		t.Errorf("heap = %v, %v", v, ok)
	}
	if v, ok := m.value("leader_election_master_status", map[string]string{"name": electionID}); !ok || v != 1 {
		t.Errorf("leader = %v, %v", v, ok)
	}
	if _, ok := m.value("leader_election_master_status", map[string]string{"name": "other"}); ok {
		t.Error("a label that matches no series matched")
	}
	req := m.apiRequests()
	status := apiKey{"patch", claimsResource, "status"}
	if req[status] != 32 {
		t.Errorf("claim status patches = %v, want 32 (both codes)", req[status])
	}
	before := apiCounts{status: 12, apiKey{"update", "leases.coordination.k8s.io", ""}: 7}
	d := req.minus(before)
	if d[status] != 20 || len(d) != 2 {
		t.Errorf("minus = %v, want 20 status patches and the watch", d)
	}
	if got := statusWrites(d, claimsResource); got != 20 {
		t.Errorf("statusWrites = %v", got)
	}
	if got := d.writesTo(claimsResource); got != 20 {
		t.Errorf("writesTo = %v", got)
	}
	if got := writes(d); got != 20 {
		t.Errorf("writes = %v, want 20 (a watch is no write)", got)
	}
	conflicts := m.apiRequestsWithCode("409")
	if len(conflicts) != 1 || conflicts[status] != 2 {
		t.Errorf("conflicts = %v, want the 2 claim status patches answered 409", conflicts)
	}
	if got := conflictsCell(conflicts, 2*time.Second); got != "patch lockclaims.locks.lockwarden.io/status 1.0/s" {
		t.Errorf("conflictsCell = %q", got)
	}
}

func TestPerHeldPerLease(t *testing.T) {
	// 200 held claims, a 10 s lease, a 60 s window: 1200 writes are one per claim per lease.
	if got := perHeldPerLease(1200, 200, 60*time.Second, 10*time.Second); math.Abs(got-1) > 1e-9 {
		t.Errorf("perHeldPerLease = %v, want 1", got)
	}
	if got := perHeldPerLease(5, 0, time.Minute, 10*time.Second); got != 0 {
		t.Errorf("no held claims: %v, want 0", got)
	}
}

func TestLeaderTimings(t *testing.T) {
	for _, c := range []struct {
		asked, lock, lease, renew, retry time.Duration
	}{
		{0, 10 * time.Second, 4 * time.Second, 2660 * time.Millisecond, 800 * time.Millisecond},
		{0, 30 * time.Second, 12 * time.Second, 8 * time.Second, 2 * time.Second},
		{0, time.Hour, 15 * time.Second, 10 * time.Second, 2 * time.Second},
		{6 * time.Second, 10 * time.Second, 6 * time.Second, 4 * time.Second, 1200 * time.Millisecond},
	} {
		lease, renew, retry := leaderTimings(c.asked, c.lock)
		if lease != c.lease || renew != c.renew || retry != c.retry {
			t.Errorf("leaderTimings(%s, %s) = %s/%s/%s, want %s/%s/%s", c.asked, c.lock, lease, renew, retry, c.lease, c.renew, c.retry)
		}
		// The manager refuses timings out of this order (cmd/manager parseFlags).
		if !(lease > renew && renew > retry*6/5 && retry > 0) {
			t.Errorf("leaderTimings(%s, %s) = %s/%s/%s: the manager would refuse them", c.asked, c.lock, lease, renew, retry)
		}
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig([]string{"-manager=/m", "-kubeconfig=/k", "-locks=20", "-pods-per-lock=5", "-detached-rows=20x10, 5x2", "-phases=gated,churn"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.rows) != 2 || cfg.rows[1] != (row{5, 2}) || cfg.failoverDeletes != 2 || !cfg.phases["churn"] || cfg.phases["detached"] {
		t.Errorf("config = %+v", cfg)
	}
	// By default every workload runs at the API's default lease and at the stress lease; the
	// managers' election is timed by the shorter.
	if !slices.Equal(cfg.leases, []time.Duration{30 * time.Second, 10 * time.Second}) || cfg.leaderLease != 4*time.Second {
		t.Errorf("leases %v, leader lease %s; want 30s and 10s, 4s", cfg.leases, cfg.leaderLease)
	}
	one, err := parseConfig([]string{"-manager=/m", "-kubeconfig=/k", "-lease=20s"})
	if err != nil || !slices.Equal(one.leases, []time.Duration{20 * time.Second}) || one.leaderLease != 8*time.Second {
		t.Errorf("-lease=20s: %v, leases %v, leader lease %s", err, one.leases, one.leaderLease)
	}
	for _, bad := range [][]string{
		{"-manager=/m", "-kubeconfig=/k", "-detached-rows=200"},
		{"-manager=/m", "-kubeconfig=/k", "-phases=gated,nope"},
		{"-manager=/m", "-kubeconfig=/k", "-lease=2500ms"},
		{"-manager=/m", "-kubeconfig=/k", "-lease=30s,2h"},
		{"-manager=/m", "-kubeconfig=/k", "-lease=30s,30s"},
		{"-manager=/m", "-kubeconfig=/k", "-lease=,"},
		{"-manager=/m", "-kubeconfig=/k", "-failover-signal=HUP"},
		{"-kubeconfig=/k"},
	} {
		if _, err := parseConfig(bad); err == nil {
			t.Errorf("parseConfig(%v) accepted", bad)
		}
	}
}

func TestMarkdownAndDocBlock(t *testing.T) {
	status := apiKey{"patch", claimsResource, "status"}
	res := &results{settings: "One run.", workloads: []*workloadResult{{
		name: "detached 2 locks × 3 claims", short: "detached 2×3", madeWhat: "claims", made: 6, createSpan: time.Second,
		toHeld: 2 * time.Second,
		steady: &steadyResult{window: 20 * time.Second, lease: 10 * time.Second, held: 2, locks: 2,
			requests: apiCounts{status: 6}, claimStatusWrites: 1.5, claimWrites: 1.5,
			expired: expiredStats{samples: 10, withAny: 1, max: 1}, mem: memStats{samples: 3, max: memory{heap: 20 << 20, rss: 50 << 20}}},
	}}}
	md := res.markdown()
	for _, want := range []string{
		"| detached 2 locks × 3 claims | claim status writes per held claim per lease | 1.50 (all claim writes 1.50; lease 10.0 s) | ≤ 1 | **no** |",
		"| detached 2 locks × 3 claims | DistributedLock writes per lock per lease | 0.00 | 0 | yes |",
		"| detached 2 locks × 3 claims | API requests/s from the leader, steady state | 0.3/s, of which writes 0.30/s, conflicts (409) 0.00/s (table below; 2 claims held, over 20.0 s) | – | – |",
		"| detached 2 locks × 3 claims | manager heap in use, RSS at rest (leader) | heap 20 MiB, RSS 50 MiB (max of 3 samples) | heap ≤ 64 MiB | yes |",
		"| detached 2 locks × 3 claims | Held claims with status.expireTime in the past, steady | 1 (max in one sample; 1 of 10 samples had any) | 0 | **no** |",
		"| patch lockclaims.locks.lockwarden.io/status | 0.30 |",
		"| whole run | holds lost (Held, then not, without the harness ending it) | 0 | 0 | yes |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the table lacks %q:\n%s", want, md)
		}
	}

	path := filepath.Join(t.TempDir(), "scale.md")
	blockBegin, blockEnd := markers("")
	podsBegin, podsEnd := markers("pods")
	doc := "# Scale\n\nintro\n\n" + blockBegin + "\nold table\n" + blockEnd + "\n\n" + podsBegin + "\nold pods\n" + podsEnd + "\n\nanalysis\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeBlock(path, "", md); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if s := string(got); strings.Contains(s, "old table") || !strings.Contains(s, md) || !strings.Contains(s, "old pods") ||
		!strings.HasSuffix(s, blockEnd+"\n\n"+podsBegin+"\nold pods\n"+podsEnd+"\n\nanalysis\n") ||
		!strings.HasPrefix(s, "# Scale\n\nintro\n\n"+blockBegin+"\n") {
		t.Errorf("after writeBlock of the main block:\n%s", s)
	}
	if err := writeBlock(path, "pods", "new pods\n"); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(path)
	if s := string(got); strings.Contains(s, "old pods") || !strings.Contains(s, podsBegin+"\nnew pods\n"+podsEnd) || !strings.Contains(s, md) {
		t.Errorf("after writeBlock of the pods block:\n%s", s)
	}
	if _, err := replaceBlock("no markers", "", md); err == nil {
		t.Error("replaceBlock without markers succeeded")
	}
	if _, err := replaceBlock(doc, "other", md); err == nil {
		t.Error("replaceBlock of a block the doc lacks succeeded")
	}
}

func TestNamedByLease(t *testing.T) {
	r := &runner{cfg: config{leases: []time.Duration{30 * time.Second}}, lease: 30 * time.Second}
	if name, short, ns := r.named("pods, gated", "gated", "scale-gated"); name != "pods, gated" || short != "gated" || ns != "scale-gated" {
		t.Errorf("one lease: %q %q %q, want the names unchanged", name, short, ns)
	}
	r = &runner{cfg: config{leases: []time.Duration{30 * time.Second, 10 * time.Second}}, lease: 10 * time.Second}
	if name, short, ns := r.named("pods, gated", "gated", "scale-gated"); name != "pods, gated, lease 10 s" || short != "gated, 10 s" || ns != "scale-gated-lease10" {
		t.Errorf("two leases: %q %q %q", name, short, ns)
	}
}

func TestRestartedSince(t *testing.T) {
	status := apiKey{"patch", claimsResource, "status"}
	lease := apiKey{"update", "leases.coordination.k8s.io", ""}
	before := apiCounts{status: 100, lease: 7}
	if (apiCounts{status: 150, lease: 9}).restartedSince(before) {
		t.Error("counts that only grew: not a restart")
	}
	// A restarted leader counts from zero: the churn table once gave -172 requests/s.
	if !(apiCounts{status: 40, lease: 9}).restartedSince(before) {
		t.Error("a count below its earlier value: a restart")
	}
	if !(apiCounts{status: 150}).restartedSince(before) {
		t.Error("a count gone: a restart")
	}
}

func TestCostPerHandoff(t *testing.T) {
	window := 10 * time.Second
	churn := &churnResult{handoffs: 100, window: window,
		requests: apiCounts{{verb: "patch", resource: "lockclaims.locks.lockwarden.io", subresource: "status"}: 600,
			{verb: "get", resource: "leases.coordination.k8s.io"}: 50},
		cpu: proccpu.Usage{Window: window, Machine: 2, NCPU: 2, Cores: map[string]float64{"kube-apiserver": 1, "manager (leader)": 0.2}}}
	steady := &steadyResult{window: window,
		requests: apiCounts{{verb: "patch", resource: "lockclaims.locks.lockwarden.io", subresource: "status"}: 400},
		cpu:      proccpu.Usage{Window: window, Machine: 1, NCPU: 2, Cores: map[string]float64{"kube-apiserver": 0.5, "manager (leader)": 0.2}}}

	// 10 handoffs a second: 60 writes a second are 6 a handoff, 40 of them the steady state's.
	want := "leader's writes 6.0 (2.0 over the steady state); kube-apiserver CPU 100.0 ms (50.0 ms over the steady state); " +
		"manager (leader) CPU 20.0 ms (0.0 ms over the steady state); machine CPU 200.0 ms (100.0 ms over the steady state)"
	if got := churn.costPerHandoff(steady); got != want {
		t.Errorf("with a steady state:\n got %s\nwant %s", got, want)
	}
	want = "leader's writes 6.0; kube-apiserver CPU 100.0 ms; manager (leader) CPU 20.0 ms; machine CPU 200.0 ms"
	if got := churn.costPerHandoff(nil); got != want {
		t.Errorf("without:\n got %s\nwant %s", got, want)
	}
	if got := (&churnResult{}).costPerHandoff(nil); got != "" {
		t.Errorf("no handoffs: got %q, want nothing", got)
	}
}
