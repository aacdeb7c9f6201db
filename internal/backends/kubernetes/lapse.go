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

package kubernetes

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/internal/mutant"
)

// This file is the rule by which a session keeps holds alive in record mode (Records): a pure
// function of the session's renewal history, with table tests.

// gap is a stretch of time in which the session was not renewed: from one renewal to the next.
type gap struct{ from, to time.Time }

// history is what a session Lease says of its renewals.
type history struct {
	// renewed is the session's latest renewTime.
	renewed time.Time
	// gaps are the gaps between renewals of at least minGap, newest first.
	gaps []gap
	// completeSince is the time from which gaps lists every such gap; a hold granted before it
	// is judged lapsed, since nothing says it was not.
	completeSince time.Time
}

const (
	// minGap is the shortest gap between renewals that history keeps: the shortest lease (5 s).
	// A shorter gap cannot have let any hold lapse.
	minGap = 5 * time.Second
	// maxGaps bounds how many gaps history keeps (each costs about 70 bytes of annotation).
	maxGaps = 16
)

// alive says whether a hold granted at acquired with ttl still lives at now, and until when it
// lives unless the session is renewed: it lapses when, since it was granted, the session went
// ttl or longer without a renewal.
func (h history) alive(acquired time.Time, ttl time.Duration, now time.Time) (time.Time, bool) {
	if acquired.Before(h.completeSince) {
		return time.Time{}, false
	}
	for _, g := range h.gaps {
		if g.to.After(acquired) && !g.to.Before(later(g.from, acquired).Add(ttl)) {
			return time.Time{}, false
		}
	}
	expire := later(h.renewed, acquired).Add(ttl)
	return expire, now.Before(expire)
}

// renewedAt is the history after a renewal at t: the gap since the last renewal is kept if it is
// long enough to matter, older gaps it makes redundant go (see covers), and should too many be
// left, the oldest go (completeSince moves past them, so that holds older than what is kept are
// judged lapsed, never alive by mistake).
func (h history) renewedAt(t time.Time) history {
	next := history{renewed: later(h.renewed, t), completeSince: h.completeSince}
	// A new session's first renewal closes a gap that began before any hold: a hold granted
	// before it lived only if it came within the hold's lease.
	if h.renewed.IsZero() || t.Sub(h.renewed) >= minGap {
		g := gap{from: h.renewed, to: t}
		next.gaps = append(next.gaps, g)
		for _, older := range h.gaps {
			if !covers(g, older) {
				next.gaps = append(next.gaps, older)
			}
		}
	} else {
		next.gaps = slices.Clone(h.gaps)
	}
	if len(next.gaps) > maxGaps {
		next.completeSince = later(next.completeSince, next.gaps[maxGaps].to)
		next.gaps = next.gaps[:maxGaps]
	}
	return next
}

// covers says whether gap newer, which came after gap older, makes older redundant: every hold
// that older lapsed, newer lapsed too. A hold that older lapsed was granted before older ended,
// so before newer began, and its lease was at most older's length; leases are whole seconds (the
// API says so), so at most older's length in whole seconds, which is at most newer's. Without
// this rule a session renewed every 10 s for 30 s leases kept a gap at every renewal, and its
// holds were judged lapsed once the oldest gap kept was younger than they were (after 17
// renewals: under three minutes).
func covers(newer, older gap) bool {
	if mutant.Active(mutant.KeepCoveredGaps) {
		return false
	}
	return older.to.Sub(older.from).Truncate(time.Second) <= newer.to.Sub(newer.from).Truncate(time.Second)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// formatGaps writes gaps as an annotation value: "from/to" pairs in RFC 3339 with nanoseconds,
// newest first, comma-separated.
func formatGaps(gaps []gap) string {
	parts := make([]string, len(gaps))
	for i, g := range gaps {
		parts[i] = g.from.UTC().Format(time.RFC3339Nano) + "/" + g.to.UTC().Format(time.RFC3339Nano)
	}
	return strings.Join(parts, ",")
}

// parseGaps reads what formatGaps wrote.
func parseGaps(s string) ([]gap, error) {
	if s == "" {
		return nil, nil
	}
	var out []gap
	for _, part := range strings.Split(s, ",") {
		from, to, ok := strings.Cut(part, "/")
		if !ok {
			return nil, fmt.Errorf("gap %q is not from/to", part)
		}
		f, err := time.Parse(time.RFC3339Nano, from)
		if err != nil {
			return nil, err
		}
		t, err := time.Parse(time.RFC3339Nano, to)
		if err != nil {
			return nil, err
		}
		out = append(out, gap{from: f, to: t})
	}
	return out, nil
}
