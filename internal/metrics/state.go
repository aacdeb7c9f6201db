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

package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// claimPhases are the phases lockwarden_claims reports, each on every scrape.
var claimPhases = []locksv1alpha1.ClaimPhase{
	locksv1alpha1.ClaimPending, locksv1alpha1.ClaimHeld, locksv1alpha1.ClaimReleased,
	locksv1alpha1.ClaimLost, locksv1alpha1.ClaimTimedOut, locksv1alpha1.ClaimFailed,
}

// ClaimState is what the scrape-time gauges report, as Summarize computes it from the cached
// claims and locks.
type ClaimState struct {
	// Phases counts claims by phase; a claim without a phase yet is Pending.
	Phases map[locksv1alpha1.ClaimPhase]int
	// OldestPending is, by backend, how long the oldest Pending claim has waited: now minus its
	// creationTimestamp (a claim is Pending from its creation to its grant, as
	// lockwarden_claim_wait_seconds measures it). A backend without Pending claims has no entry,
	// and neither has a claim whose DistributedLock does not exist: it has no backend.
	OldestPending map[string]time.Duration
	// OldestHeld is, by backend, how long the longest current hold has lasted: now minus the
	// acquireTime of a DistributedLock's status.holder. That is the grant of the hold on the
	// backend, which a claim that joins the hold with the same identity (reentrancy) does not
	// move. A backend on which no lock is held has no entry.
	OldestHeld map[string]time.Duration
}

// Summarize computes the scrape-time gauges from claims and locks at time now. A claim's backend
// is its lock's (spec.backendRef.name, the built-in kubernetes backend when unset), as the
// controller resolves it. Ages are never negative: a creation or grant time ahead of now (clocks
// of the API server and the controller apart) counts as now.
func Summarize(claims []*locksv1alpha1.LockClaim, locks []*locksv1alpha1.DistributedLock, now time.Time) ClaimState {
	st := ClaimState{
		Phases:        map[locksv1alpha1.ClaimPhase]int{},
		OldestPending: map[string]time.Duration{},
		OldestHeld:    map[string]time.Duration{},
	}
	backendOf := make(map[types.NamespacedName]string, len(locks))
	for _, l := range locks {
		backend := l.BackendName()
		backendOf[types.NamespacedName{Namespace: l.Namespace, Name: l.Name}] = backend
		for _, h := range l.Status.CurrentHolders() {
			keepOldest(st.OldestHeld, backend, now.Sub(h.AcquireTime.Time))
		}
	}
	for _, c := range claims {
		phase := c.Status.Phase
		if phase == "" {
			phase = locksv1alpha1.ClaimPending
		}
		st.Phases[phase]++
		if phase != locksv1alpha1.ClaimPending {
			continue
		}
		if backend, ok := backendOf[types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.LockName}]; ok {
			keepOldest(st.OldestPending, backend, now.Sub(c.CreationTimestamp.Time))
		}
	}
	return st
}

// keepOldest records age for backend unless an older one is already there.
func keepOldest(ages map[string]time.Duration, backend string, age time.Duration) {
	age = max(age, 0)
	if old, ok := ages[backend]; !ok || age > old {
		ages[backend] = age
	}
}

// stateCollector reports lockwarden_claims, lockwarden_claim_oldest_pending_seconds and
// lockwarden_lock_oldest_held_seconds when scraped, from the claims and locks in the informer
// cache, so that a scrape costs no API call and sees a wait or a hold while it lasts (the
// histograms observe one only when it ends).
type stateCollector struct {
	// cache holds the LockClaims and DistributedLocks.
	cache InformerSource
	// clock measures the ages.
	clock clock.PassiveClock

	claims, oldestPending, oldestHeld *prometheus.Desc
}

func newStateCollector(cache InformerSource, clk clock.PassiveClock) *stateCollector {
	return &stateCollector{
		cache: cache,
		clock: clk,
		claims: prometheus.NewDesc("lockwarden_claims",
			"LockClaims by phase.", []string{"phase"}, nil),
		oldestPending: prometheus.NewDesc("lockwarden_claim_oldest_pending_seconds",
			"Age of the oldest Pending LockClaim, by backend; no series for a backend without Pending claims.",
			[]string{"backend"}, nil),
		oldestHeld: prometheus.NewDesc("lockwarden_lock_oldest_held_seconds",
			"Time since the grant of the longest current hold, by backend; no series for a backend on which no lock is held.",
			[]string{"backend"}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.claims
	ch <- c.oldestPending
	ch <- c.oldestHeld
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	claims, err := cached(ctx, c.cache, &locksv1alpha1.LockClaim{})
	var locks []*locksv1alpha1.DistributedLock
	if err == nil {
		locks, err = cached(ctx, c.cache, &locksv1alpha1.DistributedLock{})
	}
	if err != nil {
		for _, d := range []*prometheus.Desc{c.claims, c.oldestPending, c.oldestHeld} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	st := Summarize(claims, locks, c.clock.Now())
	for _, phase := range claimPhases {
		ch <- prometheus.MustNewConstMetric(c.claims, prometheus.GaugeValue, float64(st.Phases[phase]), string(phase))
	}
	for backend, age := range st.OldestPending {
		ch <- prometheus.MustNewConstMetric(c.oldestPending, prometheus.GaugeValue, age.Seconds(), backend)
	}
	for backend, age := range st.OldestHeld {
		ch <- prometheus.MustNewConstMetric(c.oldestHeld, prometheus.GaugeValue, age.Seconds(), backend)
	}
}

// InformerSource is the part of the manager's cache that the scrape-time gauges read: its
// informers, whose stores hand out the objects they hold.
type InformerSource interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...crcache.InformerGetOption) (crcache.Informer, error)
}

// cached returns the objects that the cache's informer of obj's kind holds, shared with the
// cache: the caller only reads them. A List of the cache copies every object into its Items, deep
// copy or not; with 100,000 claims, scraped every 2 s, that copying took a quarter of the leader's
// CPU under churn (docs/scale.md). GetInformer waits for the informer's first sync, as a List of
// the cache does.
func cached[T client.Object](ctx context.Context, src InformerSource, obj T) ([]T, error) {
	inf, err := src.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	s, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok {
		return nil, fmt.Errorf("the informer of %T (%T) has no store to read", obj, inf)
	}
	items := s.GetStore().List()
	out := make([]T, 0, len(items))
	for _, item := range items {
		if o, ok := item.(T); ok {
			out = append(out, o)
		}
	}
	return out, nil
}
