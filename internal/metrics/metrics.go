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

// Package metrics defines lockwarden's Prometheus metrics (prefix lockwarden_) and an
// instrumented Backend wrapper that times every backend call.
package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/version"
)

// Results recorded in the result label.
const (
	ResultAcquired = "acquired"
	ResultLocked   = "locked"
	ResultRenewed  = "renewed"
	ResultLost     = "lost"
	ResultError    = "error"
)

// Metrics holds lockwarden's collectors. Create one with New and register it once.
type Metrics struct {
	// Acquisitions counts TryAcquire outcomes by backend and result (acquired, locked, error).
	Acquisitions *prometheus.CounterVec
	// Renewals counts renewed and lost leases, and failed renewal calls, by backend and result.
	Renewals *prometheus.CounterVec
	// Losses counts holds that ended without a release, by backend and reason.
	Losses *prometheus.CounterVec
	// Evictions counts evictions of holder pods that lost their lock (lossPolicy Evict), by
	// result: evicted, blocked (a PodDisruptionBudget refused; retried), error.
	Evictions *prometheus.CounterVec
	// WaitSeconds observes how long claims waited from creation to grant.
	WaitSeconds *prometheus.HistogramVec
	// HoldSeconds observes how long claims held their lock.
	HoldSeconds *prometheus.HistogramVec
	// BackendCallSeconds observes the latency of every backend call by backend and operation.
	BackendCallSeconds *prometheus.HistogramVec
	// BackendReady is 1 for a LockBackend whose last probe succeeded (its Ready condition is
	// True) and 0 for one whose last probe failed, by backend. Only the leader probes, so only
	// the leader reports it; the series goes when the LockBackend is deleted.
	BackendReady *prometheus.GaugeVec
	// StandbyFailoverSeconds observes how long a lock went without a pod labelled
	// locks.lockwarden.io/role=holder: from the moment a holder pod lost the label (it began
	// terminating, its claim ended, or it was deleted) to the moment the next pod of the same
	// lock was labelled holder. Its count is the number of failovers.
	StandbyFailoverSeconds prometheus.Histogram
	// EventsDropped counts Kubernetes Events not written, by reason (queue-full, write-failed):
	// the manager writes events at a bounded rate from a queue of bounded length
	// (internal/boundedevents); hot-lock: a busy lock's Normal grant and release events, thinned
	// so that they do not add writes to every handoff (internal/lockengine/eventthin.go).
	EventsDropped *prometheus.CounterVec
	// QueueParked is the requests of each work queue (by name) held back because their namespace
	// has --namespace-workers passes in flight (internal/fairqueue).
	QueueParked *prometheus.GaugeVec
	// QueuePaced is the requests of each work queue (by name) held back because their namespace
	// is ahead of --namespace-rate (internal/fairqueue).
	QueuePaced *prometheus.GaugeVec
	// state reports, at scrape time, claims by phase and the oldest wait and hold by backend;
	// nil when New was given no cache.
	state *stateCollector
}

// Option configures New.
type Option func(*options)

type options struct {
	clock clock.PassiveClock
}

// WithClock sets the clock the scrape-time gauges measure ages with. Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) { o.clock = c }
}

// New creates the collectors. cache, when not nil, is the informer cache from which the
// scrape-time gauges (lockwarden_claims, lockwarden_claim_oldest_pending_seconds and
// lockwarden_lock_oldest_held_seconds) are computed when scraped, so that scrapes cost no API
// calls; without it Register leaves them out.
func New(cache InformerSource, opts ...Option) *Metrics {
	o := options{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	m := &Metrics{
		Acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockwarden_acquisitions_total",
			Help: "Attempts to take a lock on a backend, by backend and result (acquired, locked, error).",
		}, []string{"backend", "result"}),
		Renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockwarden_renewals_total",
			Help: "Lease renewals by backend and result (renewed, lost, error).",
		}, []string{"backend", "result"}),
		Losses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockwarden_locks_lost_total",
			Help: "Holds that ended without a release (lock expired or taken by another holder), by backend and reason.",
		}, []string{"backend", "reason"}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockwarden_holder_evictions_total",
			Help: "Evictions of holder pods that lost their lock under lossPolicy Evict, by result (evicted, blocked, error).",
		}, []string{"result"}),
		WaitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockwarden_claim_wait_seconds",
			Help:    "Time from a claim's creation to its grant.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 12), // 5 ms .. about 6 h
		}, []string{"backend"}),
		HoldSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockwarden_claim_hold_seconds",
			Help:    "Time from a claim's grant to the end of its hold.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12), // 10 ms .. about 12 h
		}, []string{"backend"}),
		BackendCallSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockwarden_backend_call_duration_seconds",
			Help:    "Latency of backend calls by backend and operation.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12), // 100 µs .. about 18 s
		}, []string{"backend", "operation"}),
		BackendReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockwarden_backend_ready",
			Help: "Whether the LockBackend's last probe succeeded (1) or failed (0), by backend.",
		}, []string{"backend"}),
		StandbyFailoverSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockwarden_standby_failover_seconds",
			Help:    "Time from a pod losing the role=holder label to the next pod of the same lock labelled holder; the count is the number of failovers.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14), // 10 ms .. about 80 s
		}),
		EventsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockwarden_events_dropped_total",
			Help: "Kubernetes Events the manager did not write, by reason: queue-full (recorded faster than its write rate allows) or write-failed.",
		}, []string{"reason"}),
		QueueParked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockwarden_workqueue_parked",
			Help: "Requests of a work queue held back because their namespace has --namespace-workers passes in flight, by queue name.",
		}, []string{"name"}),
		QueuePaced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockwarden_workqueue_paced",
			Help: "Requests of a work queue held back because their namespace has begun --namespace-rate passes in the last second, by queue name.",
		}, []string{"name"}),
	}
	if cache != nil {
		m.state = newStateCollector(cache, o.clock)
	}
	return m
}

// Register adds every collector to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// collectors are what Register adds: every collector, and the scrape-time gauges when New was
// given a cache to compute them from.
func (m *Metrics) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{m.Acquisitions, m.Renewals, m.Losses, m.Evictions, m.WaitSeconds, m.HoldSeconds, m.BackendCallSeconds, m.BackendReady, m.StandbyFailoverSeconds, m.EventsDropped, m.QueueParked, m.QueuePaced}
	if m.state != nil {
		cs = append(cs, m.state)
	}
	return cs
}

// NewBuildInfo returns the lockwarden_build_info gauge: always 1, with the build's version, git
// commit and Go version as labels, so that a query can tell which build each replica runs (join
// on it, or count the distinct versions during a rollout).
func NewBuildInfo(info version.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lockwarden_build_info",
		Help: "The running lockwarden build: always 1, labelled with its version, git commit and Go version.",
		ConstLabels: prometheus.Labels{
			"version":   info.Version,
			"commit":    info.Commit,
			"goversion": info.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// Instrument wraps b so that every call is timed in BackendCallSeconds and acquisitions and
// renewals are counted under the backend's name.
func (m *Metrics) Instrument(name string, b backends.Backend) backends.Backend {
	return &instrumented{name: name, next: b, m: m}
}

type instrumented struct {
	name string
	next backends.Backend
	m    *Metrics
}

func (i *instrumented) observe(op string, start time.Time) {
	i.m.BackendCallSeconds.WithLabelValues(i.name, op).Observe(time.Since(start).Seconds())
}

func (i *instrumented) TryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (backends.Lease, error) {
	defer i.observe("acquire", time.Now())
	lease, err := i.next.TryAcquire(ctx, key, identity, ttl)
	result := ResultAcquired
	switch {
	case errors.Is(err, backends.ErrLocked):
		result = ResultLocked
	case err != nil:
		result = ResultError
	}
	i.m.Acquisitions.WithLabelValues(i.name, result).Inc()
	return lease, err
}

func (i *instrumented) Renew(ctx context.Context, leases []backends.Lease, ttl time.Duration) ([]backends.Lease, []backends.Lease, error) {
	defer i.observe("renew", time.Now())
	renewed, lost, err := i.next.Renew(ctx, leases, ttl)
	if err != nil {
		i.m.Renewals.WithLabelValues(i.name, ResultError).Inc()
	}
	i.m.Renewals.WithLabelValues(i.name, ResultRenewed).Add(float64(len(renewed)))
	i.m.Renewals.WithLabelValues(i.name, ResultLost).Add(float64(len(lost)))
	return renewed, lost, err
}

func (i *instrumented) Release(ctx context.Context, lease backends.Lease) error {
	defer i.observe("release", time.Now())
	return i.next.Release(ctx, lease)
}

func (i *instrumented) Inspect(ctx context.Context, key string) (backends.Lease, error) {
	defer i.observe("inspect", time.Now())
	return i.next.Inspect(ctx, key)
}

func (i *instrumented) Ping(ctx context.Context) error {
	defer i.observe("ping", time.Now())
	return i.next.Ping(ctx)
}

func (i *instrumented) Close(ctx context.Context) error { return i.next.Close(ctx) }

// Unwrap exposes the wrapped backend, for its optional interfaces (backends.AsFreeWatcher).
func (i *instrumented) Unwrap() backends.Backend { return i.next }
