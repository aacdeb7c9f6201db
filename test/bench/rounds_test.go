//go:build bench

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

package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/test/bench/latency"
)

// hotResult is the hot-lock handoffs of one backend, in rounds, each beside its own floors.
type hotResult struct {
	// depth is how many claims waited behind the holder (0: all queued at the start).
	depth  int
	rounds []handoffRound
	// recordLoop is a round closed on the lock record alone, for its throughput.
	recordLoop handoffRound
	// floors are each round's raw writes, by round (none for backends measured without them).
	floors [][floorCount][]time.Duration
}

// hotLock runs rounds of perRound handoffs on backend, each on a fresh lock with depth claims
// waiting, each after timing floorN writes of every floor (none at 0), so that the figures and
// their floors interleave.
func (b *bench) hotLock(ctx context.Context, prefix, backend string, rounds, perRound, depth, floorN int) (hotResult, error) {
	out := hotResult{depth: depth}
	for r := range rounds {
		if floorN > 0 {
			f, err := measureFloors(ctx, b.c, floorN)
			if err != nil {
				return out, err
			}
			out.floors = append(out.floors, f)
		}
		h, err := b.handoffs(ctx, prefix, backend, r, perRound, depth, onBoth)
		if err != nil {
			return out, err
		}
		out.rounds = append(out.rounds, h)
		line := fmt.Sprintf("  round %d: %d handoffs, %.1f/s; seen on the record p50 %s ms, by the condition p50 %s ms; writes per handoff %s",
			r+1, h.n, h.perSec(), fmtMS(latency.Of(h.spans[spanSeenRecord]).P50), fmtMS(latency.Of(h.spans[spanSeenClaim]).P50), perOp(h.writes, h.n))
		if floorN > 0 {
			line += fmt.Sprintf("; Lease update p50 %s ms", fmtMS(latency.Of(out.floors[r][floorLease]).P50))
		}
		fmt.Println(line)
	}
	if floorN > 0 {
		h, err := b.handoffs(ctx, prefix, backend, rounds, perRound, depth, onRecordOnly)
		if err != nil {
			return out, err
		}
		out.recordLoop = h
		fmt.Printf("  closed on the lock record: %d handoffs, %.1f/s\n", h.n, h.perSec())
	}
	return out, nil
}

// spread is one figure taken in each round: the median of the rounds, and the least and most.
type spread struct{ mid, lo, hi float64 }

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	v = slices.Clone(v)
	sort.Float64s(v)
	mid := v[len(v)/2]
	if len(v)%2 == 0 {
		mid = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return spread{mid, v[0], v[len(v)-1]}
}

// format renders the spread as "mid (lo–hi)" with f for each figure; one round, just the figure.
func (s spread) format(f func(float64) string) string {
	if s.lo == s.hi {
		return f(s.mid)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.mid), f(s.lo), f(s.hi))
}

func msOf(v float64) string { return fmtMS(time.Duration(v * float64(time.Millisecond))) }

func times(v float64) string { return fmt.Sprintf("%.1f×", v) }

// timesExact is times with two decimals, for a goal's verdict next to it.
func timesExact(v float64) string { return fmt.Sprintf("%.2f×", v) }

// acrossRounds summarizes a latency taken in every round: each round's p50 and p95, and the
// quantiles of every sample pooled (the p99 is one of N·rounds, a true one).
type acrossRounds struct {
	p50, p95 spread
	pooled   latency.Quantiles
}

func summarize(perRound [][]time.Duration) acrossRounds {
	var p50, p95 []float64
	var all []time.Duration
	for _, d := range perRound {
		q := latency.Of(d)
		p50, p95 = append(p50, ms(q.P50)), append(p95, ms(q.P95))
		all = append(all, d...)
	}
	return acrossRounds{p50: spreadOf(p50), p95: spreadOf(p95), pooled: latency.Of(all)}
}

// span is one span's latencies, by round.
func (h hotResult) span(s span) [][]time.Duration {
	out := make([][]time.Duration, len(h.rounds))
	for i, r := range h.rounds {
		out[i] = r.spans[s]
	}
	return out
}

// floor is one floor's latencies, by round.
func (h hotResult) floor(f floor) [][]time.Duration {
	out := make([][]time.Duration, len(h.floors))
	for i, r := range h.floors {
		out[i] = r[f]
	}
	return out
}

// ratio is, round by round, a's p50 over the Lease floor's p50.
func (h hotResult) ratio(a [][]time.Duration) spread {
	var v []float64
	for i := range min(len(a), len(h.floors)) {
		if lease := latency.Of(h.floors[i][floorLease]).P50; lease > 0 {
			v = append(v, float64(latency.Of(a[i]).P50)/float64(lease))
		}
	}
	return spreadOf(v)
}

// p99Ratio is the pooled p99 of a over the pooled p50 of the Lease floor.
func (h hotResult) p99Ratio(a [][]time.Duration) float64 {
	lease := summarize(h.floor(floorLease)).pooled.P50
	if lease == 0 {
		return 0
	}
	return float64(summarize(a).pooled.P99) / float64(lease)
}

// handoffs is every handoff of every round.
func (h hotResult) handoffs() int {
	n := 0
	for _, r := range h.rounds {
		n += r.n
	}
	return n
}

// writes is every round's writes added up.
func (h hotResult) writes() writeCounts {
	var w writeCounts
	for _, r := range h.rounds {
		w = addCounts(w, r.writes)
	}
	return w
}

// perSec is the rounds' closed-loop throughput.
func (h hotResult) perSec() spread {
	var v []float64
	for _, r := range h.rounds {
		v = append(v, r.perSec())
	}
	return spreadOf(v)
}

// pathWrites is the rounds' writes per handoff, other than those of the claims that joined the
// tail (their creates and first statuses).
func (h hotResult) pathWrites() spread {
	var v []float64
	for _, r := range h.rounds {
		v = append(v, float64(r.writes.total()-r.writes[claimCreates]-r.writes[claimFirst])/float64(r.n))
	}
	return spreadOf(v)
}

// cpuPerHandoff is, by process, the CPU milliseconds each handoff cost (the rounds' median).
func (h hotResult) cpuPerHandoff() map[string]spread {
	by := map[string][]float64{}
	for _, r := range h.rounds {
		for label, cores := range r.cpu.Cores {
			by[label] = append(by[label], cores*r.cpu.Window.Seconds()*1000/float64(r.n))
		}
	}
	out := map[string]spread{}
	for label, v := range by {
		out[label] = spreadOf(v)
	}
	return out
}

// The goals of a handoff on one lock (issue #40), as ratios within one run.
const (
	goalRecordRatio   = 4.0
	goalConditionRato = 6.0
	goalP99Ratio      = 15.0
	goalWrites        = 3.0
	goalPerSec        = 60.0
)

// markdown renders the hot lock's spans, floors and goals.
func (h hotResult) markdown(backend string) string {
	var sb strings.Builder
	perRound := 0
	if len(h.rounds) > 0 {
		perRound = h.rounds[0].n
	}
	queued := fmt.Sprintf("all %d claims queued at the start (the queue shortens from %d to none)", perRound+1, perRound)
	if h.depth > 0 && h.depth < perRound {
		queued = fmt.Sprintf("%d claims waiting behind the holder throughout (a new one joins the tail after each handoff)", h.depth)
	}
	fmt.Fprintf(&sb, "\nHandoffs on one hot lock (%s): %d rounds of %d, each on a fresh lock with %s, each after timing its own floors; "+
		"the next delete follows the grant seen by both watchers (closed loop). A figure is the median of the rounds' p50 (or p95) "+
		"with the least and most in brackets; the p99 is of all %d handoffs together.\n\n",
		backend, len(h.rounds), perRound, queued, h.handoffs())
	sb.WriteString("| from the client's delete of the holder's claim | p50 | p95 | p99 | p50 ÷ Lease update p50 |\n|---|---|---|---|---|\n")
	row := func(label string, d [][]time.Duration) {
		s := summarize(d)
		if s.pooled.N == 0 {
			fmt.Fprintf(&sb, "| %s | – | – | – | – |\n", label)
			return
		}
		fmt.Fprintf(&sb, "| %s | %s ms | %s ms | %s ms | %s |\n", label, s.p50.format(msOf), s.p95.format(msOf), fmtMS(s.pooled.P99), h.ratio(d).format(times))
	}
	for s := range spanCount {
		row(spanLabels[s], h.span(s))
	}
	for f := range floorCount {
		row("floor: "+floorLabels[f], h.floor(f))
	}
	w := h.writes()
	n := h.handoffs()
	per := func(k writeKind) string { return fmt.Sprintf("%.2f", float64(w[k])/float64(n)) }
	fmt.Fprintf(&sb, "\nAPI writes per handoff: %s = %s client deletes + %s to held claims + %s to waiting claims + %s to locks + %s to Leases + %s Events; "+
		"besides, the claims that joined the tail: %s creates and %s first statuses "+
		"(counted through watches from a settle of at least %s, and a second without writes, before the first delete to the same after the last grant).\n",
		h.pathWrites().format(func(v float64) string { return fmt.Sprintf("%.2f", v) }),
		per(claimDeletes), per(claimHolders), per(claimWaiters), per(lockWrites), per(leaseWrites), per(eventWrites),
		per(claimCreates), per(claimFirst), settle)
	if cpu := h.cpuPerHandoff(); len(cpu) > 0 {
		labels := make([]string, 0, len(cpu))
		for l := range cpu {
			labels = append(labels, l)
		}
		slices.SortFunc(labels, func(a, b string) int {
			if c := -compareFloat(cpu[a].mid, cpu[b].mid); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		parts := make([]string, 0, len(labels))
		for _, l := range labels {
			parts = append(parts, fmt.Sprintf("%s %s ms", l, cpu[l].format(func(v float64) string { return fmt.Sprintf("%.2f", v) })))
		}
		fmt.Fprintf(&sb, "\nCPU per handoff, by process (everything on one machine of %d cores): %s.\n", runtime.NumCPU(), strings.Join(parts, ", "))
	}
	record, condition := h.span(spanSeenRecord), h.span(spanSeenClaim)
	sb.WriteString("\n| goal (one hot lock, ratios within this run) | measured | met |\n|---|---|---|\n")
	goal := func(what, measured string, met bool) {
		fmt.Fprintf(&sb, "| %s | %s | %s |\n", what, measured, yesNo(met))
	}
	rr, cr := h.ratio(record), h.ratio(condition)
	goal(fmt.Sprintf("handoff seen on the lock record, p50 ≤ %.0f× the Lease update", goalRecordRatio), rr.format(timesExact), len(h.floors) > 0 && rr.mid <= goalRecordRatio)
	goal(fmt.Sprintf("handoff seen by the claim's condition, p50 ≤ %.0f× the Lease update", goalConditionRato), cr.format(timesExact), len(h.floors) > 0 && cr.mid <= goalConditionRato)
	p99 := h.p99Ratio(condition)
	goal(fmt.Sprintf("handoff seen by the claim's condition, p99 ≤ %.0f× the Lease update's p50", goalP99Ratio), timesExact(p99), len(h.floors) > 0 && p99 <= goalP99Ratio)
	path := float64(w[claimDeletes]+w[claimHolders]+w[claimWaiters]+w[lockWrites]) / float64(n)
	goal(fmt.Sprintf("API writes on a handoff's path ≤ %.0f, the client's delete included (claims and locks; Leases and Events above)", goalWrites),
		fmt.Sprintf("%.2f", path), path <= goalWrites+0.005)
	goal("writes to waiting claims on the path: 0", fmt.Sprintf("%d in %d handoffs", w[claimWaiters], n), w[claimWaiters] == 0)
	ps := h.perSec()
	goal(fmt.Sprintf("one lock ≥ %.0f handoffs/s, closed loop on both watchers (kubectl wait's holders)", goalPerSec), ps.format(func(v float64) string { return fmt.Sprintf("%.1f", v) }), ps.mid >= goalPerSec)
	if h.recordLoop.n > 0 {
		goal(fmt.Sprintf("one lock ≥ %.0f handoffs/s, closed loop on the lock record (lockctl's holders; %d handoffs)", goalPerSec, h.recordLoop.n),
			fmt.Sprintf("%.1f", h.recordLoop.perSec()), h.recordLoop.perSec() >= goalPerSec)
	}
	return sb.String()
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// numCPU is the machine's core count for the CPU figures.
func numCPU() int { return runtime.NumCPU() }
