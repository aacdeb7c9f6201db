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

package controller

import (
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/boundedevents"
	"github.com/lockwarden/lockwarden/internal/claimrights"
	"github.com/lockwarden/lockwarden/internal/fairqueue"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
	"github.com/lockwarden/lockwarden/internal/lockengine"
	"github.com/lockwarden/lockwarden/internal/metrics"
	"github.com/lockwarden/lockwarden/internal/podcache"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// Options are what Setup needs besides the manager.
type Options struct {
	// Registry opens backend sessions.
	Registry *registry.Registry
	// Metrics records what the reconcilers do.
	Metrics *metrics.Metrics
	// ProbeInterval overrides the LockBackend probe interval (default 30 s).
	ProbeInterval time.Duration
	// MaxConcurrentReconciles bounds how many locks are served at once (default 8) and parallel
	// pod reconciles (default 4).
	MaxConcurrentReconciles int
	// Clock is the controller's clock, for the lock engine's passes, the Renewer and the session
	// bridge (default: the real clock; fault tests pass one they can step).
	Clock clock.Clock
	// Guard, when set, is added to the manager and checked before every write only a leader
	// may make, so that a leader that stalled past its lease acts no more (leaderguard).
	Guard *leaderguard.Guard
	// Namespace is the controller's own namespace, where the key ledger keeps its Leases
	// (keyledger); the built-in backend's session Lease lives there too.
	Namespace string
	// Workloads are the workload kinds whose objects may hold locks (nil: none); the manager's
	// cache must be made with the same (CacheOptions).
	Workloads *workloads.Registry
	// Tracer, when set, sees the moments of each handoff inside the lock engine (the
	// benchmark's; nil in the manager).
	Tracer lockengine.Tracer
	// SkipClaimRights makes the claim of every annotated pod and workload, whatever its service
	// account may do (--check-claim-rights=false). By default a claim is made only for a pod or
	// workload whose service account may create LockClaims in its namespace (claimrights).
	SkipClaimRights bool
	// Queue is how every controller's work queue hands out work (internal/fairqueue):
	// namespaces take turns, each with at most Queue.MaxPerNamespace items served at once.
	Queue fairqueue.Options
}

// Setup registers with mgr the lock engine (field indexes, the Renewer, the session bridge, the
// DistributedLock reconciler and its refresh lane), the pod lock reconciler (pod annotations,
// scheduling gates, role labels), a workload lock reconciler per suspendable workload kind, and
// the holder eviction and LockBackend reconcilers.
func Setup(mgr manager.Manager, o Options) error {
	if o.Namespace == "" {
		return fmt.Errorf("controller.Options.Namespace is required: the namespace of the key ledger's Leases")
	}
	var dropped *prometheus.CounterVec
	if o.Metrics != nil {
		// every controller's queue counts what it parks and what it holds for a namespace's pace
		o.Queue.Parked, o.Queue.Paced = o.Metrics.QueueParked, o.Metrics.QueuePaced
		dropped = o.Metrics.EventsDropped
	}
	// Not mgr.GetEventRecorder: client-go's broadcaster behind it keeps every distinct event for
	// minutes, and lockwarden's events seldom repeat (package boundedevents).
	recorder := boundedevents.New(mgr.GetClient(), mgr.GetScheme(), "lockwarden", eventInstance(), boundedevents.DefaultOptions, dropped)
	if err := mgr.Add(recorder); err != nil {
		return fmt.Errorf("adding the event recorder: %w", err)
	}

	if o.Guard != nil {
		if err := mgr.Add(o.Guard); err != nil {
			return fmt.Errorf("adding the leader guard: %w", err)
		}
	}
	if err := checkWorkloadKinds(mgr.GetRESTMapper(), o.Workloads); err != nil {
		return err
	}
	// The pods are kept apart from the manager's cache, in a few hundred bytes each (podcache).
	pods, err := podcache.New(mgr.GetConfig())
	if err != nil {
		return err
	}
	if err := mgr.Add(pods); err != nil {
		return fmt.Errorf("adding the pod cache: %w", err)
	}
	if err := lockengine.Setup(mgr, lockengine.Options{Registry: o.Registry, Metrics: o.Metrics, Recorder: recorder,
		MaxConcurrentReconciles: o.MaxConcurrentReconciles, Clock: o.Clock, Guard: o.Guard, Namespace: o.Namespace,
		Workloads: o.Workloads, Tracer: o.Tracer, Pods: pods, Queue: o.Queue}); err != nil {
		return err
	}
	if err := setupAnnotatedOwners(mgr, o, recorder, pods); err != nil {
		return err
	}
	if err := (&HolderEvictionReconciler{Client: mgr.GetClient(), Pods: pods, Recorder: recorder, Metrics: o.Metrics, Guard: o.Guard}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the holder eviction controller: %w", err)
	}
	if err := (&LockBackendReconciler{Client: mgr.GetClient(), Registry: o.Registry, Recorder: recorder,
		Metrics: o.Metrics, ProbeInterval: o.ProbeInterval}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the LockBackend controller: %w", err)
	}
	return nil
}

// setupAnnotatedOwners registers the controllers that make the claims of owners annotated
// locks.lockwarden.io/lock: the pod lock reconciler, and a workload reconciler for each listed
// kind that can wait suspended. They share one claim-rights checker (none with SkipClaimRights).
func setupAnnotatedOwners(mgr manager.Manager, o Options, recorder events.EventRecorder, pods PodReader) error {
	var rights *claimrights.Checker
	if !o.SkipClaimRights {
		rights = &claimrights.Checker{Client: mgr.GetClient()}
	}
	if err := (&PodLockReconciler{Client: mgr.GetClient(), Pods: pods, APIReader: mgr.GetAPIReader(), Recorder: recorder, Guard: o.Guard,
		Metrics: o.Metrics, MaxConcurrentReconciles: o.MaxConcurrentReconciles, ClaimRights: rights,
		Queue: o.Queue}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the pod lock controller: %w", err)
	}
	for _, kind := range o.Workloads.Kinds() {
		if !kind.Suspendable() {
			continue // it holds only through claims that name it
		}
		if err := (&WorkloadLockReconciler{Client: mgr.GetClient(), Cache: mgr.GetCache(), APIReader: mgr.GetAPIReader(), Kind: kind, Recorder: recorder,
			Guard: o.Guard, ClaimRights: rights, Queue: o.Queue}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the %s lock controller: %w", kind, err)
		}
	}
	return nil
}

// eventInstance is the reportingInstance of the manager's events: the pod's name in a cluster
// (its hostname), "lockwarden" where that cannot be read.
func eventInstance() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "lockwarden"
}

// checkWorkloadKinds says, before anything starts, which listed workload kind the cluster does
// not serve: a watch of it would only time out the manager's start with a message that names no
// kind.
func checkWorkloadKinds(mapper meta.RESTMapper, kinds *workloads.Registry) error {
	for _, k := range kinds.Kinds() {
		if _, err := mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version); err != nil {
			return fmt.Errorf("workload kind %s is not served by this cluster (install its CRDs first, or leave it out of --workload-kinds, "+
				"the chart's workloads values): %w", k, err)
		}
	}
	return nil
}
