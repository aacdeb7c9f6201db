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
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/test/bench/latency"
)

// quantiles summarizes latencies (package latency), with this benchmark's table cell.
type quantiles struct{ latency.Quantiles }

func quantilesOf(d []time.Duration) quantiles { return quantiles{latency.Of(d)} }

// cell is "p50 / p99 ms" with as many decimals as small figures need.
func (q quantiles) cell() string {
	if q.N == 0 {
		return "–"
	}
	return fmtMS(q.P50) + " / " + fmtMS(q.P99) + " ms"
}

func fmtMS(d time.Duration) string {
	v := ms(d)
	switch {
	case v < 1:
		return fmt.Sprintf("%.2f", v)
	case v < 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// backendResult is what the bench measured through the controller on one backend.
type backendResult struct {
	name  string
	grant quantiles
	// handoffRecord and handoff are the hot lock's handoffs seen on the lock record and by the
	// claim's condition, every round's together; hot is the rounds themselves.
	handoffRecord, handoff quantiles
	hot                    *hotResult
	handoffsPerSec         float64
	// grantWrites are the writes of the grant phase (the client's own creates included), over
	// grant.n grants; handoffWrites those of the hot-lock rounds (the client's deletes included),
	// over handoffN handoffs.
	grantWrites, handoffWrites writeCounts
	handoffN                   int
	// steadyWrites are the writes made while steadyHeld claims held their locks and nothing
	// else happened, over steadyWindow, with leases of steadyLease.
	steadyWrites              writeCounts
	steadyHeld                int
	steadyWindow, steadyLease time.Duration
}

// rawResult is a lock operation timed on a backend's server without the controller.
type rawResult struct {
	label            string
	acquire, release quantiles
}

// podResult is a pod handoff path.
type podResult struct {
	label string
	lat   quantiles
}

// results is one run of the bench.
type results struct {
	settings string
	backends []backendResult
	raws     []rawResult
	pods     []podResult
	many     *manyResult
	shared   []sharedResult
	several  *severalResult
	standby  *standbyResult
}

// perOp is "total (claims + locks + leases + events)" writes per operation.
func perOp(w writeCounts, ops int) string {
	if ops == 0 || w == nil {
		return "–"
	}
	f := func(n int) string { return fmt.Sprintf("%.1f", float64(n)/float64(ops)) }
	return fmt.Sprintf("%s (%s + %s + %s + %s)", f(w.total()), f(w.claims()), f(w[lockWrites]), f(w[leaseWrites]), f(w[eventWrites]))
}

// steadyCell is writes per held claim per lease duration.
func (b backendResult) steadyCell() string {
	if b.steadyHeld == 0 || b.steadyWindow <= 0 {
		return "–"
	}
	scale := float64(b.steadyLease) / float64(b.steadyWindow) / float64(b.steadyHeld)
	f := func(n int) string { return fmt.Sprintf("%.2f", float64(n)*scale) }
	w := b.steadyWrites
	return fmt.Sprintf("%s (%s + %s + %s + %s)", f(w.total()), f(w.claims()), f(w[lockWrites]), f(w[leaseWrites]), f(w[eventWrites]))
}

// markdown renders the results as the README's performance block.
func (r results) markdown() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s\n", r.settings)
	// A run of some parts only (-backends pods,several) has no backend rows: no empty table.
	if len(r.backends) > 0 || len(r.raws) > 0 {
		sb.WriteString("\n| backend | grant p50 / p99 | handoff seen on the lock record p50 / p99 | handoff seen by the claim's condition p50 / p99 | handoffs/s, one lock | API writes per grant | API writes per handoff | steady writes per held claim per lease |\n")
		sb.WriteString("|---|---|---|---|--:|---|---|---|\n")
		for _, b := range r.backends {
			fmt.Fprintf(&sb, "| %s | %s | %s | %s | %.1f | %s | %s | %s |\n", b.name, b.grant.cell(), b.handoffRecord.cell(), b.handoff.cell(),
				b.handoffsPerSec, perOp(b.grantWrites, b.grant.N), perOp(b.handoffWrites, b.handoffN), b.steadyCell())
		}
		for _, raw := range r.raws {
			fmt.Fprintf(&sb, "| %s | %s | %s (release) | – | – | – | – | – |\n", raw.label, raw.acquire.cell(), raw.release.cell())
		}
		sb.WriteString("\nAPI writes are counted per object through watches (each create, change or delete of a claim,\n" +
			"lock, Lease or Event is one event), shown as total (claims + locks + leases + events); a grant includes the\n" +
			"client's own create of the claim and a handoff its delete of the holder's claim.\n")
	}
	for _, b := range r.backends {
		if b.hot != nil && len(b.hot.floors) > 0 {
			sb.WriteString(b.hot.markdown(b.name))
		}
	}
	if m := r.many; m != nil {
		fmt.Fprintf(&sb, "\n| many locks (built-in backend), holder deleted → next claim seen Held | handoffs/s | handoff p50 / p99 |\n|---|--:|---|\n")
		fmt.Fprintf(&sb, "| capacity: %d locks × %d claims, every holder deleted the moment it is seen Held (open loop; the latency is mostly the backlog's) | %.0f | %s |\n",
			m.locks, m.claimsPerLock, m.perSec(), m.handoff.cell())
		for _, p := range m.paced {
			idle := ""
			if p.idle > 0 {
				idle = fmt.Sprintf("; %d ticks found no holder to delete", p.idle)
			}
			fmt.Fprintf(&sb, "| %.0f %% of capacity: %d locks × %d claims, a holder deleted every %s ms (the one held longest)%s | %.0f | %s |\n",
				p.share*100, p.locks, p.claimsPerLock, fmtMS(time.Duration(float64(time.Second)/p.rate)), idle, p.rate, p.handoff.cell())
		}
	}
	if len(r.shared) > 0 {
		sb.WriteString("\n| shared locks (built-in backend), every holder deleted the moment it is seen Held | grants/s | wait p50 / p99 |\n|---|--:|---|\n")
		for _, s := range r.shared {
			fmt.Fprintf(&sb, "| %s | %.0f | %s |\n", s.label, s.perSec(), s.wait.cell())
		}
	}
	if s := r.several; s != nil {
		sb.WriteString(s.markdown())
	}
	if len(r.pods) > 0 {
		sb.WriteString("\n| pods (built-in backend) | p50 / p99 |\n|---|---|\n")
		for _, p := range r.pods {
			fmt.Fprintf(&sb, "| %s | %s |\n", p.label, p.lat.cell())
		}
	}
	if s := r.standby; s != nil {
		sb.WriteString(s.markdown())
	}
	return sb.String()
}

// markdown renders leader election: lockwarden's Standby pods beside client-go's.
func (s standbyResult) markdown() string {
	var sb strings.Builder
	sb.WriteString("\n| leader election (built-in backend, a Deployment of 3 replicas) | p50 / p99 |\n|---|---|\n")
	for _, row := range []struct {
		label string
		lat   quantiles
	}{
		{"lockwarden Standby pods: holder pod deleted → next pod labelled `role=holder`", s.graceful},
		{"lockwarden: holder pod deleted → the Service's EndpointSlice serves only the new holder", s.served},
		{"lockwarden crash: holder pod force-deleted (grace 0) → next pod labelled `role=holder`", s.crash},
		{"client-go leader election 15/10/2 s, sidecar labelling its pod: leader's context cancelled, releases the Lease → next pod labelled", s.peerRelease},
		{"client-go leader election 15/10/2 s crash: leader stops renewing, no release (a killed sidecar) → next pod labelled", s.peerCrash},
	} {
		fmt.Fprintf(&sb, "| %s (n=%d) | %s |\n", row.label, row.lat.N, row.lat.cell())
	}
	moved := fmt.Sprintf("%d times", s.rollMoves)
	if s.rollMoves == 1 {
		moved = "once"
	}
	fmt.Fprintf(&sb, "\nOn a crash, client-go took %.0f× as long as lockwarden (p50 to p50). Lockwarden's lock belongs to the\n"+
		"pod, so its crash is the pod gone without grace; client-go's belongs to the process, whose kill leaves\n"+
		"the Lease to expire. A rolling update of the 3 Standby replicas (default strategy, as `kubectl rollout\n"+
		"restart`) moved the lock %s, with at most %s ms without a pod labelled holder (at most %d labelled\n"+
		"at once); every pod was new and one of them held after %.1f s.\n",
		s.crashRatio(), moved, fmtMS(s.rollGap), s.rollMost, s.rollTotal.Seconds())
	return sb.String()
}

const (
	blockBegin = "<!-- bench:begin: written by make bench, not by hand -->"
	blockEnd   = "<!-- bench:end -->"
)

// writeBlock replaces the text between the bench markers in the file at path.
func writeBlock(path, block string) error {
	return writeBlockBetween(path, blockBegin, blockEnd, block)
}

// writeBlockBetween replaces what lies between the markers begin and end in the file at path
// with block.
func writeBlockBetween(path, blockBegin, blockEnd, block string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	i, j := strings.Index(s, blockBegin), strings.Index(s, blockEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q … %q block to write the results into", path, blockBegin, blockEnd)
	}
	s = s[:i+len(blockBegin)] + "\n" + block + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// revision names the commit measured, "+dirty" when the tree has changes.
func revision() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty=+dirty").Output()
	if err != nil {
		return "unknown commit"
	}
	return "commit " + strings.TrimSpace(string(out))
}
