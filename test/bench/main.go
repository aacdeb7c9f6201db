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

// Command bench measures the lock engine on a real API server (the local cluster, via
// KUBECONFIG): grant latency (claim created → Acquired seen by a watch), graceful handoff latency
// (holder claim deleted → next claim's Acquired seen) and handoffs per second on one hot lock. It
// runs the manager in-process with the API client QPS and worker settings it prints, so that the
// figures say what they were measured with. A benchmark, not a test: it prints figures and never
// fails on a timing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	kubernetesbackend "github.com/lockwarden/lockwarden/internal/backends/kubernetes"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/controller"
	"github.com/lockwarden/lockwarden/internal/metrics"
)

func main() {
	grants := flag.Int("grants", 100, "uncontended grants to time")
	handoffs := flag.Int("handoffs", 100, "handoffs to time on one hot lock")
	qps := flag.Float64("qps", 50, "manager API client QPS")
	burst := flag.Int("burst", 100, "manager API client burst")
	workers := flag.Int("workers", 4, "LockClaim workers")
	logFile := flag.String("log", "", "write the manager's log to this file (default: discard)")
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer f.Close()
		ctrl.SetLogger(zap.New(zap.WriteTo(f)))
	}
	if err := run(*grants, *handoffs, *qps, *burst, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(grants, handoffs int, qps float64, burst, workers int) error {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = locksv1alpha1.AddToScheme(scheme)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The manager under test, as cmd/manager builds it.
	mcfg := *cfg
	mcfg.QPS, mcfg.Burst = float32(qps), burst
	mgr, err := ctrl.NewManager(&mcfg, ctrl.Options{Scheme: scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return err
	}
	direct, err := client.New(&mcfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	const systemNS = "lockwarden-system"
	builtin, err := kubernetesbackend.New(kubernetesbackend.Config{Client: direct, Namespace: systemNS})
	if err != nil {
		return err
	}
	m := metrics.New(nil)
	_ = m.Register(prometheus.NewRegistry())
	reg := registry.New(builtin, registry.WithWrapper(m.Instrument))
	if err := controller.Setup(mgr, controller.Options{Registry: reg, Metrics: m, MaxConcurrentReconciles: workers}); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()

	// The observer: an unthrottled client, so that it measures the controller and not itself.
	ocfg := *cfg
	ocfg.QPS, ocfg.Burst = 1000, 2000
	c, err := client.NewWithWatch(&ocfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	for _, ns := range []string{systemNS, "bench"} {
		_ = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	defer c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}})
	held := watchHeld(ctx, c, "bench")

	fmt.Printf("lockwarden bench: built-in kubernetes backend, manager QPS %.0f burst %d, %d claim workers, GOMAXPROCS from the machine\n", qps, burst, workers)

	// Grant latency: one claim at a time on its own free lock.
	var grantLat []time.Duration
	for i := range grants {
		lock := fmt.Sprintf("grant-%d", i)
		if err := c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: lock}}); err != nil {
			return err
		}
		// Locks are made long before they are claimed: wait until this one is ready, so that only
		// the grant is timed.
		if err := waitLockReady(ctx, c, "bench", lock); err != nil {
			return err
		}
		start := time.Now()
		if err := c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: lock},
			Spec: locksv1alpha1.LockClaimSpec{LockName: lock}}); err != nil {
			return err
		}
		if err := waitFor(ctx, held, lock); err != nil {
			return err
		}
		grantLat = append(grantLat, time.Since(start))
	}
	report("grant latency (claim created → Acquired)", grantLat)

	// Handoffs on one hot lock: queue every claim, then delete each holder in turn.
	if err := c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "hot"}}); err != nil {
		return err
	}
	names := make([]string, handoffs+1)
	for i := range names {
		names[i] = fmt.Sprintf("hot-%04d", i)
		if err := c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: names[i]},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "hot"}}); err != nil {
			return err
		}
	}
	if err := waitFor(ctx, held, names[0]); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let the queue settle
	var handoffLat []time.Duration
	began := time.Now()
	for i := 1; i < len(names); i++ {
		start := time.Now()
		if err := c.Delete(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: names[i-1]}}); err != nil {
			return err
		}
		if err := waitFor(ctx, held, names[i]); err != nil {
			return err
		}
		handoffLat = append(handoffLat, time.Since(start))
	}
	elapsed := time.Since(began)
	report("graceful handoff latency (holder deleted → next Acquired)", handoffLat)
	fmt.Printf("  %-58s %.1f handoffs/s (%d handoffs in %s, %d claims queued at the start)\n", "hot-lock throughput", float64(len(handoffLat))/elapsed.Seconds(), len(handoffLat), elapsed.Round(time.Millisecond), len(names))
	return nil
}

// watchHeld reports the names of claims in ns as they become Held.
func watchHeld(ctx context.Context, c client.WithWatch, ns string) <-chan string {
	out := make(chan string, 1024)
	go func() {
		seen := map[string]bool{}
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, &locksv1alpha1.LockClaimList{}, client.InNamespace(ns))
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				cl, ok := ev.Object.(*locksv1alpha1.LockClaim)
				if ok && ev.Type != watch.Deleted && cl.Status.Phase == locksv1alpha1.ClaimHeld && !seen[cl.Name] {
					seen[cl.Name] = true
					out <- cl.Name
				}
			}
		}
	}()
	return out
}

func waitLockReady(ctx context.Context, c client.Client, ns, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		l := &locksv1alpha1.DistributedLock{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l); err == nil &&
			meta.IsStatusConditionTrue(l.Status.Conditions, locksv1alpha1.ConditionReady) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("DistributedLock %s/%s not ready within 30 s", ns, name)
}

func waitFor(ctx context.Context, held <-chan string, name string) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case n := <-held:
			if n == name {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("claim %s was not granted within 30 s", name)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func report(what string, d []time.Duration) {
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	fmt.Printf("  %-58s p50 %7.1f ms   p99 %7.1f ms   max %7.1f ms   (n=%d)\n", what,
		ms(q(0.50)), ms(q(0.99)), ms(d[len(d)-1]), len(d))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
