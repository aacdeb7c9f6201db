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

package lockengine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/fairqueue"
	"github.com/lockwarden/lockwarden/internal/keyledger"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
	"github.com/lockwarden/lockwarden/internal/metrics"
	"github.com/lockwarden/lockwarden/internal/renewal"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// Pods is where the engine reads the cluster's pods: the compact pod cache (internal/podcache),
// never the manager's cache, which refuses Pods. A pod read is the cache's expansion of what it
// keeps: identity, deletion, lockwarden annotations, role label, scheduling gates, node, phase.
type Pods interface {
	// Get writes the pod named key into pod, or returns a NotFound error.
	Get(ctx context.Context, key client.ObjectKey, pod *corev1.Pod) error
	// ListOnNode returns the pods bound to node.
	ListOnNode(node string) ([]corev1.Pod, error)
	// Informer is the pod informer as a controller-runtime source takes it.
	Informer() cache.Informer
}

// Options are what the engine needs besides the manager.
type Options struct {
	// Registry opens backend sessions.
	Registry *registry.Registry
	// Metrics records acquisitions, waits, holds and losses.
	Metrics *metrics.Metrics
	// Recorder emits the events of claims' transitions.
	Recorder events.EventRecorder
	// MaxConcurrentReconciles bounds how many locks are served at once (default 8).
	MaxConcurrentReconciles int
	// Clock is the engine's clock, for the passes, the Renewer and the session bridge (default:
	// the real clock; fault tests pass one they can step).
	Clock clock.Clock
	// Guard, when set, vetoes leader writes once this process has stalled (leaderguard).
	Guard *leaderguard.Guard
	// Namespace is the controller's own namespace, where the key ledger keeps its Leases.
	Namespace string
	// Workloads are the workload kinds whose objects may hold locks (nil: none).
	Workloads *workloads.Registry
	// Tracer, when set, sees the moments of each handoff (the benchmark's; nil in the manager).
	Tracer Tracer
	// Queue is how the work queue hands out locks (internal/fairqueue): namespaces take turns,
	// each with at most Queue.MaxPerNamespace locks served at once (0: no bound).
	Queue fairqueue.Options
	// Pods reads and watches the cluster's pods (internal/podcache); required.
	Pods Pods
}

// Setup registers the field indexes, the Renewer, the session bridge and the lock reconciler
// with mgr.
func Setup(mgr manager.Manager, o Options) error {
	if o.Pods == nil {
		return fmt.Errorf("lockengine.Options.Pods is required: the pods are read from the pod cache, not the manager's")
	}
	if err := SetupIndexes(context.Background(), mgr); err != nil {
		return fmt.Errorf("registering field indexes: %w", err)
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	resolver := &registry.Resolver{Client: mgr.GetClient(), Registry: o.Registry}
	locks := &Reconciler{
		Guard:                   o.Guard,
		Client:                  mgr.GetClient(),
		Pods:                    o.Pods,
		Backends:                resolver,
		Recorder:                o.Recorder,
		Metrics:                 o.Metrics,
		Clock:                   clk,
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		Workloads:               o.Workloads,
		WorkloadCache:           mgr.GetCache(),
		Tracer:                  o.Tracer,
		Queue:                   o.Queue,
		Keys:                    keyledger.New(mgr.GetAPIReader(), mgr.GetClient(), o.Namespace, lockAlive(mgr.GetClient(), mgr.GetAPIReader())),
	}
	// Sessions of edited LockBackends close once the Renewer has moved their holds off them.
	locks.Renewer = renewal.New(resolver.ByName, locks.NotifyLost, renewal.WithClock(clk), renewal.WithAfterRenewals(o.Registry.CloseRetired))
	o.Registry.OnRetire(locks.Renewer.Wake)
	if err := mgr.Add(locks.Renewer); err != nil {
		return fmt.Errorf("adding the renewer: %w", err)
	}
	if err := mgr.Add(&sessionBridge{client: mgr.GetClient(), backends: resolver, renewer: locks.Renewer, clock: clk}); err != nil {
		return fmt.Errorf("adding the session bridge: %w", err)
	}
	if err := locks.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DistributedLock controller: %w", err)
	}
	return nil
}
