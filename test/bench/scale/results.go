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
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/test/bench/latency"
	"github.com/lockwarden/lockwarden/test/bench/proccpu"
)

// Goals of issues #17 and #40, printed next to each figure. A benchmark prints figures: missing
// a goal never fails the run.
const (
	goalHeapBytes       = 64 << 20
	goalHeadsHeld       = 30 * time.Second
	goalFailoverDrained = 30 * time.Second
	// goalHandoffsPerSec is #17's, across detached claims; goalPodHandoffsPerSec is #40's for
	// gated pods, each handoff of which also deletes, replaces, schedules and starts a pod.
	goalHandoffsPerSec    = 300
	goalPodHandoffsPerSec = 25
)

// quantiles summarizes latencies (package latency), with this benchmark's table cell.
type quantiles struct{ latency.Quantiles }

func quantilesOf(d []time.Duration) quantiles { return quantiles{latency.Of(d)} }

func (q quantiles) cell() string {
	if q.N == 0 {
		return "–"
	}
	return fmt.Sprintf("p50 %s / p99 %s (n=%d)", dur(q.P50), dur(q.P99), q.N)
}

// dur prints a duration with a precision that suits its size.
func dur(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

// steadyResult is what the leader did while every lock was held and nothing else happened.
type steadyResult struct {
	window, lease time.Duration
	// held is how many claims were Held, locks how many locks the workload has.
	held, locks int
	// requests are the leader's API requests in the window, by kind; conflicts those answered
	// 409 Conflict (a write whose resourceVersion precondition failed).
	requests, conflicts apiCounts
	// Per held claim (per lock) per lease: writes to claims' status, all writes to claims, all
	// writes to DistributedLocks.
	claimStatusWrites, claimWrites, lockWrites float64
	expired                                    expiredStats
	mem                                        memStats
	// cpu is who used the machine's CPU in the window.
	cpu proccpu.Usage
	// note says what makes the figures doubtful, e.g. a leader change in the window.
	note string
}

func perHeldPerLease(n float64, held int, window, lease time.Duration) float64 {
	if held == 0 || window <= 0 || lease <= 0 {
		return 0
	}
	return n / float64(held) / (window.Seconds() / lease.Seconds())
}

// churnResult is what happened while holders were ended continuously.
type churnResult struct {
	window   time.Duration
	handoffs int
	// elapsed runs from the first end to the last grant in the window.
	elapsed time.Duration
	latency quantiles
	mem     memStats
	expired expiredStats
	// requests and conflicts as in steadyResult, over the churn window.
	requests, conflicts apiCounts
	// cpu is who used the machine's CPU in the window.
	cpu       proccpu.Usage
	endErrors int64
	note      string
}

func (c churnResult) perSec() float64 {
	if c.elapsed <= 0 {
		return 0
	}
	return float64(c.handoffs) / c.elapsed.Seconds()
}

// failoverResult is the leader killed at size.
type failoverResult struct {
	signal                      string
	killed, survivor            string
	held, deleted               int
	newLeader, resumed, drain   time.Duration
	leaderOK, resumeOK, drainOK bool
	lost                        []loss
	expired                     expiredStats
	note                        string
}

// workloadResult is one workload: detached claims or pods, with what was measured on it.
type workloadResult struct {
	// name says what it is, short names the column of the API table.
	name, short string
	// stopped says where and why the workload stopped short, when it did.
	stopped string
	// made is how many pods or claims the harness had made; createSpan from the first to the
	// last.
	made       int
	madeWhat   string
	createSpan time.Duration
	// toHeld is from the last pod or claim created to every lock held (negative: before);
	// toClaims from the last pod created to every pod's claim existing.
	toHeld, toClaims time.Duration
	hasClaimsTime    bool
	steady           *steadyResult
	churn            *churnResult
	failover         *failoverResult
	cleanup          time.Duration
	cleanupErr       string
}

// results is everything one run printed.
type results struct {
	settings   string
	workloads  []*workloadResult
	lost       []loss
	unexpected []string
	failures   []string
}

// tableRow is one line of the results table.
type tableRow struct{ workload, measure, result, goal, met string }

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func (w *workloadResult) rows() []tableRow {
	var out []tableRow
	add := func(measure, result, goal, met string) {
		out = append(out, tableRow{w.name, measure, result, goal, met})
	}
	if w.made > 0 && w.createSpan > 0 {
		add(w.madeWhat+" created", fmt.Sprintf("%d in %s (%.0f/s)", w.made, dur(w.createSpan), float64(w.made)/w.createSpan.Seconds()), "–", "–")
	}
	if w.steady != nil || w.toHeld != 0 {
		held := dur(max(w.toHeld, 0))
		if w.toHeld < 0 {
			held = fmt.Sprintf("0 (all held %s before the last was created)", dur(-w.toHeld))
		}
		if w.hasClaimsTime {
			held += fmt.Sprintf("; every pod's claim created by the manager after %s", dur(max(w.toClaims, 0)))
		}
		add("last "+strings.TrimSuffix(w.madeWhat, "s")+" created → every lock held by its head", held,
			"≤ "+dur(goalHeadsHeld), yesNo(w.toHeld <= goalHeadsHeld))
	}
	if s := w.steady; s != nil {
		add("manager heap in use, RSS at rest (leader)", s.mem.cell(), "heap ≤ 64 MiB", yesNo(s.mem.samples > 0 && s.mem.max.heap <= goalHeapBytes))
		if s.requests != nil {
			add("API requests/s from the leader, steady state", fmt.Sprintf("%.1f/s, of which writes %.2f/s, conflicts (409) %.2f/s (table below; %d claims held, over %s)",
				s.requests.total()/s.window.Seconds(), writes(s.requests)/s.window.Seconds(), s.conflicts.total()/s.window.Seconds(), s.held, dur(s.window)), "–", "–")
			add("claim status writes per held claim per lease", fmt.Sprintf("%.2f (all claim writes %.2f; lease %s)", s.claimStatusWrites, s.claimWrites, dur(s.lease)),
				"≤ 1", yesNo(s.claimStatusWrites <= 1))
			add("DistributedLock writes per lock per lease", fmt.Sprintf("%.2f", s.lockWrites), "0", yesNo(s.lockWrites == 0))
		}
		add("CPU in steady state (cores busy, average over the window)", s.cpu.Cell(), "–", "–")
		add("Held claims with status.expireTime in the past, steady", s.expired.cell(), "0", yesNo(s.expired.samples > 0 && s.expired.max == 0))
		if s.note != "" {
			add("note", s.note, "–", "–")
		}
	}
	if c := w.churn; c != nil {
		goal := goalHandoffsPerSec
		if w.hasClaimsTime { // a workload of pods
			goal = goalPodHandoffsPerSec
		}
		add("handoffs/s under churn (holder ended the moment it is seen Held)", fmt.Sprintf("%.0f/s (%d in %s); holder ended → next Held %s",
			c.perSec(), c.handoffs, dur(c.elapsed), c.latency.cell()), fmt.Sprintf("≥ %d/s", goal), yesNo(c.perSec() >= float64(goal)))
		if c.window > 0 && c.requests != nil {
			add("API requests/s from the leader under churn", fmt.Sprintf("%.0f/s, of which writes %.0f/s; answered 409 Conflict: %s",
				c.requests.total()/c.window.Seconds(), writes(c.requests)/c.window.Seconds(), conflictsCell(c.conflicts, c.window)), "–", "–")
		}
		add("CPU under churn (cores busy, average over the window)", c.cpu.Cell(), "–", "–")
		if cell := c.costPerHandoff(w.steady); cell != "" {
			add("cost of one handoff under churn (the window's totals divided by its handoffs)", cell, "–", "–")
		}
		add("manager heap in use, RSS under churn (leader)", c.mem.cell(), "heap ≤ 64 MiB", yesNo(c.mem.samples > 0 && c.mem.max.heap <= goalHeapBytes))
		add("Held claims with status.expireTime in the past, churn", c.expired.cell(), "0", yesNo(c.expired.samples > 0 && c.expired.max == 0))
		if c.note != "" {
			add("note", c.note, "–", "–")
		}
	}
	if f := w.failover; f != nil {
		never := func(ok bool, d time.Duration) string {
			if !ok {
				return "not within the bound"
			}
			return dur(d)
		}
		add(fmt.Sprintf("failover (%s to the leader, %s): new leader in the election Lease", f.signal, f.killed),
			never(f.leaderOK, f.newLeader), "–", "–")
		add(fmt.Sprintf("failover: every held claim (%d) renewed by the new leader (status.renewTime after the kill)", f.held-f.deleted),
			never(f.resumeOK, f.resumed), "–", "–")
		add(fmt.Sprintf("failover: queues drained (%d holders ended at the kill, each lock held again)", f.deleted),
			never(f.drainOK, f.drain), "≤ "+dur(goalFailoverDrained), yesNo(f.drainOK && f.drain <= goalFailoverDrained))
		add("failover: holds lost", fmt.Sprintf("%d", len(f.lost)), "0", yesNo(len(f.lost) == 0))
		add("failover: Held claims with status.expireTime in the past", f.expired.cell(), "0", yesNo(f.expired.samples > 0 && f.expired.max == 0))
		if f.note != "" {
			add("note", f.note, "–", "–")
		}
	}
	if w.stopped != "" {
		add("stopped", w.stopped, "–", "–")
	}
	return out
}

// conflictsCell lists the conflicts per second by kind, most first.
func conflictsCell(c apiCounts, window time.Duration) string {
	if c.total() == 0 {
		return "none"
	}
	keys := sortedKeys(c)
	slices.SortStableFunc(keys, func(a, b apiKey) int {
		switch {
		case c[a] > c[b]:
			return -1
		case c[a] < c[b]:
			return 1
		}
		return 0
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f/s", k, c[k]/window.Seconds()))
	}
	return strings.Join(parts, ", ")
}

func writes(c apiCounts) float64 {
	var n float64
	for k, v := range c {
		if k.isWrite() {
			n += v
		}
	}
	return n
}

// markdown renders the results: settings, the table of figures and goals, the API requests by
// kind in steady state, and what went wrong.
func (r *results) markdown() string {
	var b strings.Builder
	b.WriteString(r.settings + "\n\n")
	b.WriteString("| workload | measure | result | goal | met |\n|---|---|---|---|---|\n")
	for _, w := range r.workloads {
		for _, row := range w.rows() {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", row.workload, row.measure, row.result, row.goal, row.met)
		}
	}
	fmt.Fprintf(&b, "| whole run | holds lost (Held, then not, without the harness ending it) | %d | 0 | %s |\n", len(r.lost), yesNo(len(r.lost) == 0))
	fmt.Fprintf(&b, "| whole run | manager exits the harness did not cause | %d | 0 | %s |\n", len(r.unexpected), yesNo(len(r.unexpected) == 0))

	var cols []*workloadResult
	var counts []apiCounts
	for _, w := range r.workloads {
		if w.steady != nil && w.steady.window > 0 {
			cols = append(cols, w)
			counts = append(counts, w.steady.requests.scaled(w.steady.window.Seconds()))
		}
	}
	if len(cols) > 0 {
		b.WriteString("\nAPI requests per second from the leader in steady state (every lock held, nothing else happening), by verb and resource:\n\n| request |")
		for _, w := range cols {
			b.WriteString(" " + w.short + " |")
		}
		b.WriteString("\n|---|" + strings.Repeat("--:|", len(cols)) + "\n")
		for _, k := range sortedKeys(counts...) {
			b.WriteString("| " + k.String() + " |")
			for _, c := range counts {
				b.WriteString(" " + rate(c[k]) + " |")
			}
			b.WriteString("\n")
		}
		b.WriteString("| **total** |")
		for _, c := range counts {
			b.WriteString(" " + rate(c.total()) + " |")
		}
		b.WriteString("\n")
	}
	if len(r.lost) > 0 {
		b.WriteString("\nHolds lost:\n\n")
		for i, l := range r.lost {
			if i == 20 {
				fmt.Fprintf(&b, "- … and %d more\n", len(r.lost)-20)
				break
			}
			b.WriteString("- " + l.String() + "\n")
		}
	}
	if len(r.unexpected) > 0 {
		b.WriteString("\nManager exits the harness did not cause:\n\n")
		for _, u := range r.unexpected {
			b.WriteString("- " + u + "\n")
		}
	}
	if len(r.failures) > 0 {
		b.WriteString("\nDid not work at all:\n\n")
		for _, f := range r.failures {
			b.WriteString("- " + f + "\n")
		}
	}
	return b.String()
}

func rate(v float64) string {
	switch {
	case v == 0:
		return "–"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// markers are the lines between which -write-doc writes a run's results: the doc's main block
// when name is empty, else the block of that name (-doc-block), so that a run of a few phases
// does not replace the figures of a full run.
func markers(name string) (begin, end string) {
	if name == "" {
		return "<!-- scale:begin: written by make bench-scale -write-doc, not by hand -->", "<!-- scale:end -->"
	}
	return "<!-- scale:begin " + name + ": written by make bench-scale -write-doc -doc-block " + name + ", not by hand -->",
		"<!-- scale:end " + name + " -->"
}

// writeBlock replaces what lies between the markers of the block name in path with block.
func writeBlock(path, name, block string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s, err := replaceBlock(string(data), name, block)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

func replaceBlock(s, name, block string) (string, error) {
	begin, end := markers(name)
	i := strings.Index(s, begin)
	if i < 0 {
		return "", fmt.Errorf("no %q … %q block to write the results into", begin, end)
	}
	j := strings.Index(s[i:], end)
	if j < 0 {
		return "", fmt.Errorf("no %q … %q block to write the results into", begin, end)
	}
	return s[:i+len(begin)] + "\n" + block + s[i+j:], nil
}

// costPerHandoff is what one handoff of the churn window cost: the leader's writes, and the CPU
// of the API server, etcd, the leader and the machine, each as the window's total divided by its
// handoffs and, when the workload's steady state was measured, as what the churn added to the
// steady state's rate (the refreshes of held claims go on under churn too). What a handoff costs
// the API server bounds the rate here; on a control plane with more cores the rate it allows is
// about its spare cores divided by that cost (docs/scale.md). Empty when nothing was measured.
func (c *churnResult) costPerHandoff(steady *steadyResult) string {
	if c.handoffs == 0 || c.cpu.Window <= 0 {
		return ""
	}
	rate := float64(c.handoffs) / c.cpu.Window.Seconds() // handoffs per second of the CPU window
	type cost struct {
		what         string
		churn, still float64 // per second, under churn and in the steady state (-1: unknown)
		unit         string
		scale        float64
	}
	still := func(f func(*steadyResult) (float64, bool)) float64 {
		if steady == nil {
			return -1
		}
		if v, ok := f(steady); ok {
			return v
		}
		return -1
	}
	var costs []cost
	if c.requests != nil && c.window > 0 {
		costs = append(costs, cost{"leader's writes", writes(c.requests) / c.window.Seconds(), still(func(s *steadyResult) (float64, bool) {
			return writes(s.requests) / s.window.Seconds(), s.requests != nil && s.window > 0
		}), "", 1})
	}
	for _, label := range []string{"kube-apiserver", "etcd", "manager (leader)"} {
		if cores, ok := c.cpu.Cores[label]; ok {
			costs = append(costs, cost{label + " CPU", cores, still(func(s *steadyResult) (float64, bool) {
				v, ok := s.cpu.Cores[label]
				return v, ok && s.cpu.Window > 0
			}), " ms", 1000})
		}
	}
	costs = append(costs, cost{"machine CPU", c.cpu.Machine, still(func(s *steadyResult) (float64, bool) {
		return s.cpu.Machine, s.cpu.Window > 0
	}), " ms", 1000})
	parts := make([]string, 0, len(costs))
	for _, k := range costs {
		part := fmt.Sprintf("%s %.1f%s", k.what, k.churn/rate*k.scale, k.unit)
		if k.still >= 0 {
			part += fmt.Sprintf(" (%.1f%s over the steady state)", max(0, k.churn-k.still)/rate*k.scale, k.unit)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
