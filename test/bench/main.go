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
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	uberzap "go.uber.org/zap"
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
	etcdbackend "github.com/lockwarden/lockwarden/internal/backends/etcd"
	kubernetesbackend "github.com/lockwarden/lockwarden/internal/backends/kubernetes"
	redisbackend "github.com/lockwarden/lockwarden/internal/backends/redis"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/controller"
	"github.com/lockwarden/lockwarden/internal/metrics"
)

// backendList names the external backends to measure.
var backendList = map[string]bool{}

func main() {
	grants := flag.Int("grants", 100, "uncontended grants to time")
	handoffs := flag.Int("handoffs", 100, "handoffs to time on one hot lock")
	qps := flag.Float64("qps", 50, "manager API client QPS")
	burst := flag.Int("burst", 100, "manager API client burst")
	workers := flag.Int("workers", 4, "LockClaim workers")
	logFile := flag.String("log", "", "write the manager's log to this file (default: discard)")
	extra := flag.String("backends", "redis,etcd", "external backends to measure beside the built-in one (comma-separated: redis,etcd; empty for none)")
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
	for _, name := range strings.Split(*extra, ",") {
		if name != "" {
			backendList[name] = true
		}
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
	reg := registry.New(builtin, registry.WithWrapper(m.Instrument),
		registry.WithFactory(locksv1alpha1.BackendRedis, redisbackend.Factory),
		registry.WithFactory(locksv1alpha1.BackendEtcd, etcdbackend.Factory))
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

	fmt.Printf("lockwarden bench: manager QPS %.0f burst %d, %d claim workers, %d grants and %d handoffs per backend\n",
		qps, burst, workers, grants, handoffs)
	b := &bench{c: c, held: held, grants: grants, handoffs: handoffs}

	fmt.Println("backend kubernetes (built-in):")
	if err := b.run(ctx, "k8s", locksv1alpha1.BuiltinBackendName); err != nil {
		return err
	}

	if backendList["redis"] {
		addr, stop, err := startRedis()
		if err != nil {
			return err
		}
		defer stop()
		fmt.Printf("backend redis (redis-server on %s):\n", addr)
		if err := rawRedis(ctx, addr, grants); err != nil {
			return err
		}
		lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: "bench-redis"},
			Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
				Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(addr)}}}
		if err := c.Create(ctx, lb); err != nil {
			return err
		}
		defer c.Delete(context.Background(), lb)
		if err := b.run(ctx, "redis", lb.Name); err != nil {
			return err
		}
	}
	if backendList["etcd"] {
		endpoint, stop, err := startEtcd()
		if err != nil {
			return err
		}
		defer stop()
		fmt.Printf("backend etcd (one member on %s):\n", endpoint)
		if err := rawEtcd(ctx, endpoint, grants); err != nil {
			return err
		}
		lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: "bench-etcd"},
			Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd,
				Etcd: &locksv1alpha1.EtcdBackend{Endpoints: []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint(endpoint)}}}}
		if err := c.Create(ctx, lb); err != nil {
			return err
		}
		defer c.Delete(context.Background(), lb)
		if err := b.run(ctx, "etcd", lb.Name); err != nil {
			return err
		}
	}
	return nil
}

// bench times grants and handoffs through the controller on one backend.
type bench struct {
	c                client.Client
	held             <-chan string
	grants, handoffs int
}

func (b *bench) run(ctx context.Context, prefix, backend string) error {
	c := b.c
	newLock := func(name string) error {
		return c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Spec: locksv1alpha1.DistributedLockSpec{BackendRef: locksv1alpha1.BackendReference{Name: backend}}})
	}
	newClaim := func(name, lock string) error {
		return c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Spec: locksv1alpha1.LockClaimSpec{LockName: lock}})
	}

	// Grant latency: one claim at a time on its own free lock.
	var grantLat []time.Duration
	for i := range b.grants {
		lock := fmt.Sprintf("%s-grant-%d", prefix, i)
		if err := newLock(lock); err != nil {
			return err
		}
		// Locks are made long before they are claimed: wait until this one is ready, so that only
		// the grant is timed.
		if err := waitLockReady(ctx, c, "bench", lock); err != nil {
			return err
		}
		start := time.Now()
		if err := newClaim(lock, lock); err != nil {
			return err
		}
		if err := waitFor(ctx, b.held, lock); err != nil {
			return err
		}
		grantLat = append(grantLat, time.Since(start))
	}
	report("grant latency (claim created → Acquired)", grantLat)

	// Handoffs on one hot lock: queue every claim, then delete each holder in turn.
	hot := prefix + "-hot"
	if err := newLock(hot); err != nil {
		return err
	}
	if err := waitLockReady(ctx, c, "bench", hot); err != nil {
		return err
	}
	names := make([]string, b.handoffs+1)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", hot, i)
		if err := newClaim(names[i], hot); err != nil {
			return err
		}
	}
	if err := waitFor(ctx, b.held, names[0]); err != nil {
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
		if err := waitFor(ctx, b.held, names[i]); err != nil {
			return err
		}
		handoffLat = append(handoffLat, time.Since(start))
	}
	elapsed := time.Since(began)
	report("graceful handoff latency (holder deleted → next Acquired)", handoffLat)
	fmt.Printf("  %-58s %.1f handoffs/s (%d handoffs in %s, %d claims queued at the start)\n", "hot-lock throughput",
		float64(len(handoffLat))/elapsed.Seconds(), len(handoffLat), elapsed.Round(time.Millisecond), len(names))
	return nil
}

// startRedis runs a throwaway redis-server on a free loopback port and returns a function that
// stops it by process id.
func startRedis() (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("redis-server not found (apt-get install -y redis-server): %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "lockwarden-bench-redis")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait(); _ = os.RemoveAll(dir) }
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	for range 100 {
		if rdb.Ping(context.Background()).Err() == nil {
			return addr, stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("redis-server on %s did not answer", addr)
}

// startEtcd runs a throwaway single-member etcd (ETCD_BINARY, set by hack/bench.sh) on free
// loopback ports and returns its client URL and a function that stops it by process id.
func startEtcd() (string, func(), error) {
	bin := os.Getenv("ETCD_BINARY")
	if bin == "" {
		return "", nil, fmt.Errorf("ETCD_BINARY is not set; run through make bench")
	}
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	dir, err := os.MkdirTemp("", "lockwarden-bench-etcd")
	if err != nil {
		return "", nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cmd := exec.Command(bin, "--name", "bench", "--data-dir", dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench="+peer, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait(); _ = os.RemoveAll(dir) }
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 2 * time.Second, Logger: uberzap.NewNop()})
	if err != nil {
		stop()
		return "", nil, err
	}
	defer cli.Close()
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return client, stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("etcd on %s did not answer", client)
}

// rawEtcd times the etcd lock by hand on the same member: a put-if-absent transaction on a
// leased key to take it and a delete-if-ours transaction to release it.
func rawEtcd(ctx context.Context, endpoint string, n int) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: uberzap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		return err
	}
	var acquire, free []time.Duration
	for i := range n * 10 {
		key := fmt.Sprintf("bench/raw/%d", i)
		start := time.Now()
		if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "me", clientv3.WithLease(lease.ID))).Commit(); err != nil {
			return err
		}
		acquire = append(acquire, time.Since(start))
		start = time.Now()
		if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", "me")).
			Then(clientv3.OpDelete(key)).Commit(); err != nil {
			return err
		}
		free = append(free, time.Since(start))
	}
	report("raw put-if-absent txn (same member, no controller)", acquire)
	report("raw delete-if-ours txn (same member, no controller)", free)
	return nil
}

// rawRedis times the classic Redis lock by hand on the same server: SET NX PX to take it and an
// owner-checked Lua DEL to release it, the floor under what the controller adds.
func rawRedis(ctx context.Context, addr string, n int) error {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	release := goredis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
	var acquire, free []time.Duration
	for i := range n * 10 {
		key := fmt.Sprintf("bench/raw/%d", i)
		start := time.Now()
		if err := rdb.SetNX(ctx, key, "me", 30*time.Second).Err(); err != nil {
			return err
		}
		acquire = append(acquire, time.Since(start))
		start = time.Now()
		if err := release.Run(ctx, rdb, []string{key}, "me").Err(); err != nil {
			return err
		}
		free = append(free, time.Since(start))
	}
	report("raw SET NX PX (same server, no controller)", acquire)
	report("raw owner-checked Lua release (same server, no controller)", free)
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
	fmt.Printf("  %-58s p50 %8.2f ms   p99 %8.2f ms   max %8.2f ms   (n=%d)\n", what,
		ms(q(0.50)), ms(q(0.99)), ms(d[len(d)-1]), len(d))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
