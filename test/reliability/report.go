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

package reliability

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Finding is one violation, named by the checker that found it.
type Finding struct {
	// Checker names the check: register, tokens, token-floor, exclusion, api-snapshot,
	// backend-view, phantom, final-is-final, stale-window, deposed-leader, outside-holder,
	// lock-delay, evicted, holder-labels, holder-record, job-runs, job-resume, job-hold,
	// job-lock-delay, job-handoff, history, rbac.
	Checker string
	Detail  string
}

func (f Finding) String() string { return f.Checker + ": " + f.Detail }

// findings turns a checker's lines into findings.
func findings(checker string, lines []string) []Finding {
	out := make([]Finding, 0, len(lines))
	for _, l := range lines {
		out = append(out, Finding{Checker: checker, Detail: l})
	}
	return out
}

// Result is one scenario run on one backend: a row of the results table.
type Result struct {
	Scenario, Backend string
	Seed              uint64
	Faults            string // the fault plan, e.g. "leader-kill@12s/10s"
	TTL               time.Duration
	Grants            int // claims observed Held
	Writes            int // writes presented to the fenced register
	Rejected          int // stale writes the fenced register rejected
	ShadowStale       int // stale writes the unfenced shadow accepted
	ShadowOverlaps    int // interleaved critical sections at the unfenced shadow
	Lost              int // holds that ended Lost
	HeldSamples       int // Held claims whose backend key the sampler read
	// Stale sorts the writes made after their writer's hold ended.
	Stale StaleWrites
	// ViewStates counts the backend states the observer recorded; ViewAllowed the mismatches
	// within ViewGrace (a claim Held while its key was already someone else's), ViewLongest the
	// longest of them.
	ViewStates, ViewAllowed int
	ViewLongest             time.Duration
	// Violations are the safety findings.
	Violations []Finding
	// Orphans are backend keys still held, after convergence and a TTL, for no Held claim.
	Orphans []string
	// FencingRequired: the scenario exists to make a stale writer write, so fencing must have
	// rejected at least one write (else the run proved nothing about fencing).
	FencingRequired bool
	// NoLossRequired: no hold may end Lost (a leader failover with default settings).
	NoLossRequired bool
	// LockDelayRequired: the locks have a lockDelaySeconds, so some grant must have followed a
	// hold that ended without a release (else the run proved nothing about the delay);
	// DelayedGrants counts those grants.
	LockDelayRequired bool
	DelayedGrants     int
	// EvictionRequired: the locks have lossPolicy Evict, so some hold must have been Lost (else
	// no eviction was exercised); Evictions counts the lost holds whose pod was evicted.
	EvictionRequired bool
	Evictions        int
	// LongHoldRequired: some hold must have lasted at least this long (a long-hold run);
	// LongestHold is the longest that ended other than Lost.
	LongHoldRequired time.Duration
	LongestHold      time.Duration
	// PlacesRequired: the locks have places, so the backend checks must have seen a Held claim
	// hold one (else the harness's view of the store never read a place, and they judged
	// nothing); PlaceSamples counts the held samples whose identity held a place.
	PlacesRequired bool
	PlaceSamples   int
	// HolderLabelsRequired: a standby run, whose pods' role labels the holder-labels and
	// holder-record checkers judge, so some pod must have been seen labelled holder (else they
	// judged nothing); HolderLabelled counts those pods.
	HolderLabelsRequired bool
	HolderLabelled       int
	// GatesRequired: a gated run, whose gates the gates checker judges, so some pod must have
	// been seen admitted (its gate lifted; else it judged nothing); GatesLifted counts them.
	GatesRequired bool
	GatesLifted   int
	// ReentryRequired: a reentry run, so some re-entry must have joined its hold (else the
	// reentry checker judged nothing); Reentries counts them.
	ReentryRequired bool
	Reentries       int
	// InitsRequired: a lockctl-acquire run, so some init container must have exited 0 with its
	// token file (else the admissions checker judged nothing); InitsAcquired counts them.
	InitsRequired bool
	InitsAcquired int
	// JobsRequired: a jobs run, so the ways a Job ends must have been judged: some grant after a
	// failed or deleted Job (JobDelayChecked counts them) and some pod killed under a running Job
	// whose hold lasted through it (PodKillsHeldThrough, of PodKills). JobHandoffsRequired (a
	// run without a fault): some completion followed by a waiter must have been judged
	// (JobHandoffsChecked counts them).
	JobsRequired, JobHandoffsRequired                                  bool
	JobDelayChecked, JobHandoffsChecked, PodKills, PodKillsHeldThrough int
	Linearizable                                                       string // porcupine's verdict
	Liveness                                                           Liveness
	Valid                                                              bool // enough operations happened before the first fault
	// CommandsRequired: a commands run, so some lockctl holder's COMMAND must have run (Commands
	// counts them). CommandStopRequired (a holder-partition fault): some COMMAND cut off from the
	// API server must have been stopped at its hold's local deadline (CommandsStoppedAtDeadline,
	// of CommandsCutOff).
	CommandsRequired, CommandStopRequired bool
	// CommandCutOffRequired (a holder-partition-mute fault): some COMMAND must have been cut
	// off; the commands checker judges when it stopped.
	CommandCutOffRequired                               bool
	Commands, CommandsCutOff, CommandsStoppedAtDeadline int
	// FaultsSkipped says why each planned fault that did not happen did not: a run whose fault
	// never fired proves nothing about it, so it fails.
	FaultsSkipped []string
	Duration      time.Duration
}

// Caught lists, sorted, every checker that failed the run: the safety checkers, porcupine, and
// the liveness checks (stuck, orphans) and scenario requirements.
func (r Result) Caught() []string {
	var out []string
	add := func(c string) {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	for _, v := range r.Violations {
		add(v.Checker)
	}
	if r.Linearizable == "Illegal" || r.Linearizable == "Unknown" {
		add("porcupine")
	}
	if len(r.Liveness.Stuck) > 0 {
		add("stuck")
	}
	if len(r.Orphans) > 0 {
		add("orphans")
	}
	if r.NoLossRequired && r.Lost > 0 {
		add("no-loss")
	}
	slices.Sort(out)
	return out
}

// Safety is the number of safety violations (S1, S2, exclusion, linearizability).
func (r Result) Safety() int {
	n := len(r.Violations)
	if r.Linearizable == "Illegal" {
		n++
	}
	return n
}

// Unmet lists the scenario's own requirements that the run did not meet.
func (r Result) Unmet() []string {
	out := slices.Clone(r.FaultsSkipped)
	if r.FencingRequired && r.Rejected == 0 {
		out = append(out, "fencing was never exercised: no stale write reached the fenced register")
	}
	if r.NoLossRequired && r.Lost > 0 {
		out = append(out, fmt.Sprintf("%d held lock(s) lost, none allowed", r.Lost))
	}
	if r.LockDelayRequired && r.DelayedGrants == 0 {
		out = append(out, "the lock delay was never exercised: no grant followed a hold that ended without a release")
	}
	if r.LongHoldRequired > 0 && r.LongestHold < r.LongHoldRequired {
		out = append(out, fmt.Sprintf("no hold lasted %s (the longest that was not lost: %s)", r.LongHoldRequired, r.LongestHold.Round(time.Second)))
	}
	if r.EvictionRequired && r.Lost == 0 {
		out = append(out, "eviction was never exercised: no hold was lost under lossPolicy Evict")
	}
	if r.PlacesRequired && r.PlaceSamples == 0 {
		out = append(out, "the backend was never seen holding a place for a Held claim: its shared holds were not checked")
	}
	if r.HolderLabelsRequired && r.HolderLabelled == 0 {
		out = append(out, "no pod was seen labelled holder: the role label was not checked")
	}
	if r.InitsRequired && r.InitsAcquired == 0 {
		out = append(out, "no lockctl acquire init container exited 0 with its token file")
	}
	if r.ReentryRequired && r.Reentries == 0 {
		out = append(out, "no re-entry joined its hold: reentrancy was not checked")
	}
	if r.GatesRequired && r.GatesLifted == 0 {
		out = append(out, "no gated pod was seen admitted (its gate lifted): the gates were not checked")
	}
	if r.JobsRequired && r.JobDelayChecked == 0 {
		out = append(out, "the lock delay after a failed or deleted Job was never checked: no grant followed one")
	}
	if r.JobsRequired && r.PodKillsHeldThrough == 0 {
		out = append(out, fmt.Sprintf("no Job kept its hold through a pod killed mid-run (%d pods killed)", r.PodKills))
	}
	if r.CommandsRequired && r.Commands == 0 {
		out = append(out, "no lockctl holder's command ran")
	}
	if r.CommandCutOffRequired && r.CommandsCutOff == 0 {
		out = append(out, "no command was running when its holder was cut off from the API server")
	}
	if r.CommandStopRequired && r.CommandsStoppedAtDeadline == 0 {
		out = append(out, fmt.Sprintf("no command cut off from the API server was stopped at its hold's local deadline (%d cut off)", r.CommandsCutOff))
	}
	if r.JobHandoffsRequired && r.JobHandoffsChecked == 0 {
		out = append(out, "no completed Job was followed by a waiter: the handoff without delay was not checked")
	}
	return out
}

// Passed says the run found no safety violation, nothing stuck or orphaned, was valid, and met
// its scenario's requirements.
func (r Result) Passed() bool {
	return r.Safety() == 0 && len(r.Liveness.Stuck) == 0 && len(r.Orphans) == 0 && r.Valid &&
		r.Linearizable != "Unknown" && len(r.Unmet()) == 0
}

func ttlMultiple(d, ttl time.Duration) string {
	if ttl == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", d.Seconds()/ttl.Seconds())
}

// Table renders results as a Markdown table.
func Table(results []Result) string {
	var b strings.Builder
	b.WriteString("| scenario | backend | seed | faults (as run) | grants | writes | safety violations | porcupine | stale writes rejected (fenced) | stale writes in the window | stale writes accepted after a newer token | stale writes accepted (unfenced) | interleaved sections (unfenced) | backend states observed | mismatches within grace (longest) | lost holds | held samples | hangs held through | handoffs | handoff after release: n, p50 / p99 / max | after pod deletion | after silent death | p99 ×TTL | stuck | orphans | valid | duration |\n")
	b.WriteString("|---|---|---|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|---|---|---|--:|--:|--:|---|--:|\n")
	for _, r := range results {
		l := r.Liveness
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %d | %d | %d | %s | %d | %d | %d | %d | %d | %d | %d (%s) | %d | %d | %d/%d | %d | %s | %s | %s | %s | %d | %d | %v | %s |\n",
			r.Scenario, r.Backend, r.Seed, r.Faults, r.Grants, r.Writes, r.Safety(), r.Linearizable,
			r.Stale.Rejected, r.Stale.InWindow, r.Stale.AfterNewer, r.ShadowStale, r.ShadowOverlaps,
			r.ViewStates, r.ViewAllowed, round(r.ViewLongest), r.Lost, r.HeldSamples,
			l.HeldThroughHangs, l.Hangs, len(l.Handoffs),
			latencies(l.HandoffsAfter[EndRelease]), latencies(l.HandoffsAfter[EndPodDelete]), latencies(l.HandoffsAfter[EndSilentDeath]),
			ttlMultiple(Percentile(l.Handoffs, 99), r.TTL), len(l.Stuck), len(r.Orphans), r.Valid && len(r.Unmet()) == 0,
			r.Duration.Round(time.Second))
	}
	return b.String()
}

// MutantResult is one mutant's run: the scenario that must catch it and what did.
type MutantResult struct {
	Mutant, Scenario string
	Seed             uint64
	// Expect is the checker that must catch it.
	Expect string
	// Caught lists the checkers that failed the run; empty means the mutant survived.
	Caught []string
	// Example is one finding, to show what the checker saw.
	Example  string
	Duration time.Duration
}

// MutantTable renders mutant runs as a Markdown table.
func MutantTable(results []MutantResult) string {
	var b strings.Builder
	b.WriteString("| mutant | scenario | seed | must be caught by | caught by | first finding | duration |\n|---|---|---|---|---|---|--:|\n")
	for _, m := range results {
		caught := strings.Join(m.Caught, ", ")
		if !slices.Contains(m.Caught, m.Expect) {
			caught = "**survived** " + caught
		}
		example := strings.ReplaceAll(m.Example, "|", "\\|")
		if len(example) > 160 {
			example = example[:157] + "..."
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", m.Mutant, m.Scenario, m.Seed, m.Expect, caught, example, m.Duration.Round(time.Second))
	}
	return b.String()
}

// latencies renders sorted handoff latencies as "n: p50 / p99 / max".
func latencies(sorted []time.Duration) string {
	if len(sorted) == 0 {
		return "-"
	}
	return fmt.Sprintf("%d: %s / %s / %s", len(sorted),
		round(Percentile(sorted, 50)), round(Percentile(sorted, 99)), round(Percentile(sorted, 100)))
}

func round(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

// Markers delimit the generated parts of docs/reliability.md: the results of a scenario set, and
// the mutants' table.
const (
	BeginMarker       = "<!-- BEGIN reliability results (generated by hack/test-reliability.sh; do not edit) -->"
	EndMarker         = "<!-- END reliability results -->"
	BeginMutantMarker = "<!-- BEGIN reliability mutants (generated by hack/test-reliability.sh mutants; do not edit) -->"
	EndMutantMarker   = "<!-- END reliability mutants -->"
)

// WriteBetweenMarkers replaces what lies between the results markers in the file at path with
// content.
func WriteBetweenMarkers(path, content string) error {
	return WriteBetween(path, BeginMarker, EndMarker, content)
}

// WriteBetween replaces what lies between the markers beginMarker and endMarker in the file at
// path with content.
func WriteBetween(path, beginMarker, endMarker, content string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin := bytes.Index(data, []byte(beginMarker))
	end := bytes.Index(data, []byte(endMarker))
	if begin < 0 || end < begin {
		return errors.New(path + ": the results markers are missing")
	}
	var out bytes.Buffer
	out.Write(data[:begin+len(beginMarker)])
	out.WriteString("\n" + content)
	out.Write(data[end:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// stamp is a time of day to the millisecond for reports, "-" for none.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000")
}
