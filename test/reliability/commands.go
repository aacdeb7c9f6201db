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
	"bufio"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// In a commands run (lockctl-run scenarios) the holders are `lockctl run` processes, as a user
// runs them, and what a user relies on is that their COMMANDs never run at once on a mutex. Each
// COMMAND is a shell script that stamps, with the machine's clock, when its critical section
// begins and when it ends: "start", then "done" when it finished its work or "stop" when lockctl
// signalled it (the lock lost, or the hold's local deadline passed with the API server out of
// reach). The harness reads the stamps, so the check does not depend on what lockctl or the
// controller say.

// CommandScript is the COMMAND each `lockctl run` holder runs: it stamps its start and its end
// into $STAMPS, works for $WORK seconds, and on SIGTERM stamps "stop" and exits at once.
const CommandScript = `now() { date +%s.%N; }
echo "start $LOCKWARDEN_FENCING_TOKEN $(now) $$" >> "$STAMPS"
sleep "$WORK" & w=$!
trap 'kill $w 2>/dev/null; echo "stop $LOCKWARDEN_FENCING_TOKEN $(now)" >> "$STAMPS"; exit 0' TERM
wait $w
echo "done $LOCKWARDEN_FENCING_TOKEN $(now)" >> "$STAMPS"
`

// CommandRun is one `lockctl run` of a holder, as its stamps and the harness saw it.
type CommandRun struct {
	Lock     string // namespace/name
	Claimant string
	// Token is the fencing token lockctl gave the COMMAND (0 if it never started).
	Token int64
	// PID is the COMMAND's process (its group leader), from its start stamp.
	PID int
	// Started and Ended bound its critical section: its start stamp, and its "done" or "stop"
	// stamp. A COMMAND the harness killed (with its lockctl, as a machine dies) ends when it was
	// killed; one with no end stamp otherwise ends, at the latest, when its lockctl exited.
	Started, Ended time.Time
	// End says how it ended: "done", "stop", "killed" or "exited".
	End string
	// Exit is lockctl's exit code; Exited when it exited.
	Exit   int
	Exited time.Time
	// CutOff says the holder's path to the API server was cut while its COMMAND ran; Expired,
	// that lockctl stopped the COMMAND at its hold's local deadline (its message says the lock
	// may be granted to another holder), not on a loss it was told of.
	CutOff, Expired bool
}

func (c CommandRun) String() string {
	expired := ""
	if c.Expired {
		expired = ", local deadline"
	}
	return fmt.Sprintf("%s token %d %s..%s (%s, lockctl exit %d%s)", c.Claimant, c.Token, stamp(c.Started), stamp(c.Ended), c.End, c.Exit, expired)
}

// ExpiredMessage is what lockctl's message says when a hold ended at its local deadline
// (pkg/lockclient's expiredError).
const ExpiredMessage = "the lock may be granted to another holder from then on"

// ParseStamps reads a COMMAND's stamps into run: its token, PID, start and end. A run whose
// COMMAND never started is left as it was.
func ParseStamps(data string, run *CommandRun) error {
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			return fmt.Errorf("stamp line %q", sc.Text())
		}
		token, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return fmt.Errorf("stamp line %q: token: %v", sc.Text(), err)
		}
		at, err := parseEpoch(f[2])
		if err != nil {
			return fmt.Errorf("stamp line %q: %v", sc.Text(), err)
		}
		switch f[0] {
		case "start":
			run.Token, run.Started = token, at
			if len(f) > 3 {
				run.PID, _ = strconv.Atoi(f[3])
			}
		case "done", "stop":
			run.Ended, run.End = at, f[0]
		default:
			return fmt.Errorf("stamp line %q: unknown stamp", sc.Text())
		}
	}
	return sc.Err()
}

// parseEpoch reads date +%s.%N.
func parseEpoch(s string) (time.Time, error) {
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q", s)
	}
	var nanos int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		if nanos, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, fmt.Errorf("time %q", s)
		}
	}
	return time.Unix(secs, nanos), nil
}

// CheckCommands judges the COMMANDs of each lock (each a mutex): no two critical sections
// overlap, tokens increase in the order the sections began, and every section that began also
// ended. One line per violation.
func CheckCommands(runs []CommandRun) []string {
	byLock := map[string][]CommandRun{}
	for _, r := range runs {
		if r.Started.IsZero() {
			continue
		}
		byLock[r.Lock] = append(byLock[r.Lock], r)
	}
	var out []string
	for _, lock := range sortedKeys(byLock) {
		rs := byLock[lock]
		slices.SortFunc(rs, func(a, b CommandRun) int { return a.Started.Compare(b.Started) })
		// latest is the section that ends last among those begun so far.
		var latest *CommandRun
		for i := range rs {
			r := &rs[i]
			if r.Ended.IsZero() {
				out = append(out, fmt.Sprintf("%s: %s never ended", lock, r))
			}
			if latest != nil {
				if r.Started.Before(endOrForever(latest)) {
					overlap := "ever after"
					if !latest.Ended.IsZero() {
						overlap = latest.Ended.Sub(r.Started).Round(time.Millisecond).String()
					}
					out = append(out, fmt.Sprintf("%s: two commands ran at once for %s: %s began before %s ended", lock, overlap, r, latest))
				}
				if r.Token <= rs[i-1].Token {
					out = append(out, fmt.Sprintf("%s: token did not increase: %s began after %s", lock, r, &rs[i-1]))
				}
			}
			if latest == nil || endOrForever(r).After(endOrForever(latest)) {
				latest = r
			}
		}
	}
	return out
}

// endOrForever is a section's end, or the far future if it never ended.
func endOrForever(r *CommandRun) time.Time {
	if r.Ended.IsZero() {
		return time.Unix(math.MaxInt32, 0)
	}
	return r.Ended
}

// CheckCommandTokens judges each COMMAND's token against the grants the recorder saw: a COMMAND
// runs only with a token that a claim of its lock was seen Held with.
func CheckCommandTokens(runs []CommandRun, grants []Grant) []string {
	granted := map[string]map[int64]bool{}
	for _, g := range grants {
		if g.Acquired.IsZero() {
			continue
		}
		if granted[g.Lock] == nil {
			granted[g.Lock] = map[int64]bool{}
		}
		granted[g.Lock][g.Token] = true
	}
	var out []string
	for _, r := range runs {
		if !r.Started.IsZero() && !granted[r.Lock][r.Token] {
			out = append(out, fmt.Sprintf("%s: %s ran with a token no claim of the lock was seen Held with", r.Lock, r))
		}
	}
	return out
}

// CommandGaps measures, on each lock, how far apart consecutive critical sections were: the
// shortest gap from the end of every section begun so far to the next one's start, and for each
// section whose holder was cut off, the gap to the next one (negative: they overlapped).
func CommandGaps(runs []CommandRun) (shortest time.Duration, afterCutOff []time.Duration) {
	byLock := map[string][]CommandRun{}
	for _, r := range runs {
		if !r.Started.IsZero() && !r.Ended.IsZero() {
			byLock[r.Lock] = append(byLock[r.Lock], r)
		}
	}
	shortest = time.Duration(math.MaxInt64)
	for _, rs := range byLock {
		slices.SortFunc(rs, func(a, b CommandRun) int { return a.Started.Compare(b.Started) })
		var latest time.Time
		for i, r := range rs {
			if i > 0 {
				shortest = min(shortest, r.Started.Sub(latest))
			}
			if r.CutOff && i+1 < len(rs) {
				afterCutOff = append(afterCutOff, rs[i+1].Started.Sub(r.Ended))
			}
			if r.Ended.After(latest) {
				latest = r.Ended
			}
		}
	}
	if shortest == time.Duration(math.MaxInt64) {
		shortest = 0
	}
	return shortest, afterCutOff
}
