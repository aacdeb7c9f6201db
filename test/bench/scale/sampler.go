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
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// expiredStats is what the expired-hold sampler saw: how many samples it took, in how many some
// Held claim had a status.expireTime in the past, and the most such claims in one sample.
type expiredStats struct {
	samples, withAny, max int
	// capped is set when a sample had more candidates than it reads (maxConfirm): max is then a
	// lower bound.
	capped bool
	// worst is the claim that was furthest past its expireTime, and by how much; worstStatus is
	// what its status said then, for the log (which lock, since when held, when last renewed).
	worst       string
	worstLate   time.Duration
	worstStatus string
}

// log names the claim furthest past its expireTime in the window, if any, so that it can be found
// in the managers' logs.
func (e expiredStats) log(window string) {
	if e.worst != "" {
		logf("%s: the Held claim furthest past its expireTime, %s late: %s", window, e.worstLate.Round(time.Millisecond), e.worstStatus)
	}
}

// describe says what a sampled claim's status showed: enough to find it in the manager's log.
func describe(c *locksv1alpha1.LockClaim) string {
	at := func(t *metav1.MicroTime) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format("15:04:05.000")
	}
	deleting := ""
	if c.DeletionTimestamp != nil {
		deleting = ", being deleted since " + c.DeletionTimestamp.UTC().Format("15:04:05.000")
	}
	return fmt.Sprintf("claim %s of lock %s, token %d, acquireTime %s, renewTime %s, expireTime %s%s",
		c.Name, c.Spec.LockName, c.Status.FencingToken, at(c.Status.AcquireTime), at(c.Status.RenewTime), at(c.Status.ExpireTime), deleting)
}

func (e expiredStats) cell() string {
	if e.samples == 0 {
		return "not sampled"
	}
	s := fmt.Sprintf("%d (max in one sample; %d of %d samples had any", e.max, e.withAny, e.samples)
	if e.capped {
		s = fmt.Sprintf("at least %d (max in one sample, of the first %d candidates read; %d of %d samples had any", e.max, maxConfirm, e.withAny, e.samples)
	}
	if e.worst != "" {
		s += fmt.Sprintf("; worst %s late", e.worstLate.Round(time.Millisecond))
	}
	return s + ")"
}

// countExpired counts the Held claims whose expireTime is before at, and finds the one furthest past it.
func countExpired(claims []locksv1alpha1.LockClaim, at time.Time) (held, expired int, worst *locksv1alpha1.LockClaim, late time.Duration) {
	for i := range claims {
		c := &claims[i]
		if c.Status.Phase != locksv1alpha1.ClaimHeld {
			continue
		}
		held++
		if c.Status.ExpireTime != nil && c.Status.ExpireTime.Time.Before(at) {
			expired++
			if d := at.Sub(c.Status.ExpireTime.Time); d > late {
				worst, late = c, d
			}
		}
	}
	return held, expired, worst, late
}

// maxConfirm bounds the candidates one sample reads from the API server.
const maxConfirm = 500

// sampleExpired looks every interval, until stop is closed, for Held claims whose
// status.expireTime has passed: a claim reported Held whose lease, by its own status, has run
// out. The informer's copies name the candidates; each is read again from the API server (a
// consistent read), and counts only if it is still Held there with an expireTime before the read
// began. So an informer that lags behind a renewal never counts a claim, and no claim is missed
// that the informer has seen Held; the sampling costs the API server nothing while there are no
// candidates, whatever the number of claims.
func sampleExpired(ctx context.Context, c client.Reader, t *tracker, ns string, interval time.Duration, stop <-chan struct{}) <-chan expiredStats {
	out := make(chan expiredStats, 1)
	go func() {
		var st expiredStats
		defer func() { out <- st }()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			var confirmed []locksv1alpha1.LockClaim
			start := time.Now()
			candidates := t.expiredCandidates(start)
			if len(candidates) > maxConfirm {
				candidates, st.capped = candidates[:maxConfirm], true
			}
			for _, name := range candidates {
				cl := &locksv1alpha1.LockClaim{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err == nil {
					confirmed = append(confirmed, *cl)
				}
			}
			_, expired, worst, late := countExpired(confirmed, start)
			st.samples++
			if expired > 0 {
				st.withAny++
			}
			st.max = max(st.max, expired)
			if worst != nil && late > st.worstLate {
				st.worst, st.worstLate, st.worstStatus = worst.Name, late, describe(worst)
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	return out
}

// memStats is the most heap in use and resident memory seen in a window, and the last sample.
type memStats struct {
	max, last memory
	samples   int
}

func (m memStats) cell() string {
	if m.samples == 0 {
		return "not sampled"
	}
	return fmt.Sprintf("heap %s, RSS %s (max of %d samples)", mib(m.max.heap), mib(m.max.rss), m.samples)
}

func mib(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }

// sampleMemory scrapes the leader's memory every interval until stop is closed. It follows
// leadership: after a failover it samples the new leader.
func sampleMemory(ctx context.Context, m *managers, interval time.Duration, stop <-chan struct{}) <-chan memStats {
	out := make(chan memStats, 1)
	go func() {
		var st memStats
		defer func() { out <- st }()
		for {
			if r, err := m.leader(ctx); err == nil {
				if mem, err := m.memory(ctx, r); err == nil {
					st.samples++
					st.last = mem
					st.max.heap = max(st.max.heap, mem.heap)
					st.max.rss = max(st.max.rss, mem.rss)
				}
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	return out
}
