//go:build bench

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

// Package bench measures the lock engine on a real API server (the local cluster, via
// KUBECONFIG): grant latency (claim created → Acquired seen by a watch), graceful handoff latency
// (holder claim deleted → next claim's Acquired seen) and handoffs per second on one hot lock, on
// the built-in backend and on every external backend against a real server started here; beside
// them, the raw backend operations on the same server without the controller; and, for pods, the
// time from the holder pod's deletion to the next pod ungated and to `lockctl acquire` exiting;
// and leader election with Standby pods beside client-go leader election (standby_test.go).
// It runs the manager in-process with the API client QPS and worker settings it prints, so that
// the figures say what they were measured with. A benchmark, not a test: it prints figures and
// fails only when something does not work at all, never on a timing. Run it with make bench.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	uberzap "go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	etcdbackend "github.com/lockwarden/lockwarden/internal/backends/etcd"
	redisbackend "github.com/lockwarden/lockwarden/internal/backends/redis"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	sqlbackend "github.com/lockwarden/lockwarden/internal/backends/sql"
	zookeeperbackend "github.com/lockwarden/lockwarden/internal/backends/zookeeper"
	"github.com/lockwarden/lockwarden/internal/testutil/etcdtest"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
	"github.com/lockwarden/lockwarden/internal/testutil/sqltest"
	"github.com/lockwarden/lockwarden/internal/testutil/zktest"
)

var (
	grants   = flag.Int("grants", 100, "uncontended grants to time per backend")
	handoffs = flag.Int("handoffs", 1000, "handoffs to time on one hot lock of the built-in backend, in -rounds rounds")
	rounds   = flag.Int("rounds", 5, "rounds of the built-in backend's hot-lock handoffs, each beside its own floors")
	queue    = flag.Int("queue", 0, "claims waiting behind the holder of a hot lock throughout its handoffs, one joining the tail after each handoff (0: all of a round's claims queued at its start)")
	extHand  = flag.Int("backend-handoffs", 100, "handoffs to time on one hot lock of each external backend (one round)")
	podTurns = flag.Int("pod-handoffs", 20, "pod handoffs to time (gated pods, and lockctl acquire)")
	qps      = flag.Float64("qps", 0, "manager API client QPS (0: no client-side limit, the manager's default)")
	burst    = flag.Int("burst", 100, "manager API client burst")
	workers  = flag.Int("workers", 16, "lock workers (--claim-workers; the manager's default)")
	logFile  = flag.String("log", "", "write the manager's log to this file (default: discard)")
	readme   = flag.String("readme", "", "write the results table into this file's bench block (make bench: the README)")
	steady   = flag.Duration("steady", 30*time.Second, "how long to count the writes of held locks with nothing else happening, per backend (0: skip)")
	floorN   = flag.Int("floor-writes", 200, "writes of each floor (Lease update, claim deletes, status writes) to time in each round")
	manyN    = flag.Int("many-locks", 1000, "locks whose queues are served at once for the many-lock throughput")
	manyQ    = flag.Int("many-claims", 3, "claims queued on each of the many locks")
	pacedN   = flag.Int("paced-locks", 200, "locks whose holders are deleted at 50 % and 80 % of the many-lock capacity, to time handoffs below it")
	pacedQ   = flag.Int("paced-claims", 6, "claims queued on each of the paced locks")
	apiProf  = flag.String("apiserver-profile", "", "write a CPU profile of the API server, taken during the built-in backend's hot-lock handoffs, into this file")
	mgrProf  = flag.String("manager-profile", "", "write a CPU profile of this process (the manager under test and the bench's clients), taken during the built-in backend's hot-lock rounds, into this file")
	profSecs = flag.Int("apiserver-profile-seconds", 10, "how long the API server profile runs, from the start of the built-in backend's first round of handoffs")
	standbyN = flag.Int("standby-turns", 20, "holder pods of the Standby Deployment deleted, gracefully and then by force, per figure")
	peerRel  = flag.Int("peer-releases", 5, "client-go leaders that release their Lease to time")
	peerKill = flag.Int("peer-crashes", 3, "client-go leaders killed without a release to time (each waits out the 15 s Lease)")
	only     = flag.String("backends", "kubernetes,redis,etcd,zookeeper,postgres,mariadb,pods,many,shared,several,standby",
		"what to measure (comma-separated): kubernetes,redis,etcd,zookeeper,postgres,mariadb,pods,many,shared,several,standby")
	severalN = flag.Int("several-grants", 50, "grants of a claim of one free lock, and of a claim of two, to time")
)

// TestBench prints the figures. It is a Go test only so that it can start the same real servers
// as the backend suites (internal/testutil); it asserts nothing about timings.
func TestBench(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ctrl.SetLogger(zap.New(zap.WriteTo(f)))
	}
	want := map[string]bool{}
	for _, name := range strings.Split(*only, ",") {
		want[name] = true
	}
	ctx := t.Context()
	b := startBench(t, ctx)
	throttle := "no client-side limit"
	if *qps > 0 {
		throttle = fmt.Sprintf("QPS %.0f / burst %d", *qps, *burst)
	}
	res := &results{settings: fmt.Sprintf("One run of `make bench` (%s, %s, %d cores): manager API client %s, %d claim workers, "+
		"%d grants per backend, %d handoffs on one hot lock of the built-in backend (%d rounds, then %d more closed on the lock record) and %d on each external backend's, "+
		"writes of held locks counted over %s, %d pod handoffs; claims created without a finalizer, as lockctl does.",
		revision(), time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), throttle, *workers, *grants, *rounds*(*handoffs / *rounds), *rounds, *handoffs / *rounds, *extHand, *steady, *podTurns)}
	fmt.Printf("lockwarden bench: manager API client %s, %d claim workers, %d grants per backend, %d handoffs on the built-in backend in %d rounds, %d on each external one\n",
		throttle, *workers, *grants, *rounds*(*handoffs / *rounds), *rounds, *extHand)

	if want["kubernetes"] {
		fmt.Println("backend kubernetes (built-in):")
		res.backends = append(res.backends, b.run(t, ctx, "kubernetes (built-in)", "k8s", locksv1alpha1.BuiltinBackendName, *rounds, *handoffs / *rounds, *floorN))
	}
	if want["redis"] {
		server := redistest.Start(t, redistest.Options{})
		fmt.Printf("backend redis (redis-server on %s):\n", server.Addr())
		raw, err := rawRedis(ctx, server.Addr(), *grants)
		must(t, err)
		res.raws = append(res.raws, raw)
		res.backends = append(res.backends, b.external(t, ctx, "redis", "redis", locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
			Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(server.Addr())}}))
	}
	if want["etcd"] {
		member := etcdtest.Start(t)
		fmt.Printf("backend etcd (one member on %s):\n", member.Endpoint())
		raw, err := rawEtcd(ctx, member.Endpoint(), *grants)
		must(t, err)
		res.raws = append(res.raws, raw)
		res.backends = append(res.backends, b.external(t, ctx, "etcd (one member)", "etcd", locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd,
			Etcd: &locksv1alpha1.EtcdBackend{Endpoints: []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint(member.Endpoint())}}}))
	}
	if want["zookeeper"] {
		server := zktest.Start(t)
		fmt.Printf("backend zookeeper (one server on %s):\n", server.Addr())
		raw, err := rawZooKeeper(server.Addr(), *grants)
		must(t, err)
		res.raws = append(res.raws, raw)
		res.backends = append(res.backends, b.external(t, ctx, "zookeeper (one server)", "zk", locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendZooKeeper,
			ZooKeeper: &locksv1alpha1.ZooKeeperBackend{Servers: []locksv1alpha1.HostPort{locksv1alpha1.HostPort(server.Addr())}}}))
	}
	for _, db := range []struct {
		name, title string
		driver      locksv1alpha1.SQLDriver
		start       func(testing.TB) *sqltest.Server
	}{
		{"postgres", "PostgreSQL", locksv1alpha1.SQLDriverPostgres, sqltest.StartPostgres},
		{"mariadb", "MariaDB", locksv1alpha1.SQLDriverMySQL, sqltest.StartMariaDB},
	} {
		if !want[db.name] {
			continue
		}
		server := db.start(t)
		fmt.Printf("backend sql: %s (on %s):\n", db.name, server.Addr())
		raw, err := rawSQL(ctx, db.title, db.driver, server.DSN(), *grants)
		must(t, err)
		res.raws = append(res.raws, raw)
		secret := b.dsnSecret(t, ctx, db.name, server.DSN())
		res.backends = append(res.backends, b.external(t, ctx, "sql: "+db.title, db.name, locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL,
			SQL: &locksv1alpha1.SQLBackend{Driver: db.driver, DSNSecretRef: secret}}))
	}
	if want["many"] {
		fmt.Printf("many locks (built-in backend, %d locks × %d claims):\n", *manyN, *manyQ)
		m := b.manyLocks(t, ctx, *manyN, *manyQ)
		for i, share := range []float64{0.5, 0.8} {
			m.paced = append(m.paced, b.pacedLocks(t, ctx, fmt.Sprintf("bench-paced-%d", i), *pacedN, *pacedQ, share, share*m.perSec()))
		}
		res.many = &m
	}
	if want["shared"] {
		fmt.Println("shared locks (built-in backend):")
		res.shared = append(res.shared,
			b.sharedLock(t, ctx, "semaphore: 10 places, 100 claims", 10, 100, 0),
			b.sharedLock(t, ctx, "read/write: 10 places, 100 claims, every 10th a writer", 10, 100, 10))
	}
	if want["several"] {
		fmt.Println("several locks at once (built-in backend):")
		s := b.severalLocks(t, ctx, *severalN)
		res.several = &s
	}
	if want["pods"] {
		fmt.Println("pods (built-in backend, kwok nodes):")
		res.pods = append(res.pods, b.gatedPods(t, ctx, *podTurns)...)
		res.pods = append(res.pods, b.lockctlAcquire(t, ctx, *podTurns))
	}
	if want["standby"] {
		fmt.Println("leader election (built-in backend, kwok nodes, 3 replicas): Standby pods, then client-go leader election:")
		s := b.leaderElection(t, ctx, *standbyN, *peerRel, *peerKill)
		res.standby = &s
	}

	block := res.markdown()
	fmt.Println()
	fmt.Print(block)
	if *readme != "" {
		must(t, writeBlock(*readme, block))
		fmt.Printf("\nresults written into %s\n", *readme)
	}
}

// systemNS is the controller's namespace (Leases of the built-in backend, DSN Secrets).
const systemNS = "lockwarden-system"

// startBench starts the manager under test in-process and the observer's client.
func startBench(t *testing.T, ctx context.Context) *bench {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		t.Fatal(err)
	}
	// The observer: an unthrottled client, so that it measures the controller and not itself.
	ocfg := rest.CopyConfig(cfg)
	ocfg.QPS, ocfg.Burst = 1000, 2000
	c, err := client.NewWithWatch(ocfg, client.Options{Scheme: lockenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{systemNS, "bench"} {
		_ = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}})
	})

	// The manager under test, as cmd/manager builds it, with the client limits it prints.
	tracer := newSpanTracer()
	mgr, err := lockenv.StartManager(cfg, lockenv.ManagerOptions{Namespace: systemNS,
		QPS: float32(*qps), Burst: *burst, Workers: *workers, Tracer: tracer,
		Registry: []registry.Option{
			registry.WithFactory(locksv1alpha1.BackendRedis, redisbackend.Factory),
			registry.WithFactory(locksv1alpha1.BackendEtcd, etcdbackend.Factory),
			registry.WithFactory(locksv1alpha1.BackendZooKeeper, zookeeperbackend.Factory),
			registry.WithFactory(locksv1alpha1.BackendSQL, sqlbackend.Factory),
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Stop() })
	writes, err := startWriteCounter(ctx, c, "bench", systemNS)
	if err != nil {
		t.Fatal(err)
	}
	return &bench{cfg: cfg, c: c, held: watchHeld(ctx, c, "bench"), writes: writes, tracer: tracer, grants: *grants}
}

// external creates a LockBackend, waits for its probe and measures it.
func (b *bench) external(t *testing.T, ctx context.Context, title, prefix string, spec locksv1alpha1.LockBackendSpec) backendResult {
	lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: "bench-" + prefix}, Spec: spec}
	if err := b.c.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.c.Delete(context.Background(), lb) })
	deadline := time.Now().Add(30 * time.Second)
	for !meta.IsStatusConditionTrue(lb.Status.Conditions, locksv1alpha1.ConditionReady) {
		if time.Now().After(deadline) {
			t.Fatalf("LockBackend %s not Ready within 30 s: %+v", lb.Name, lb.Status.Conditions)
		}
		time.Sleep(100 * time.Millisecond)
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(lb), lb); err != nil {
			t.Fatal(err)
		}
	}
	return b.run(t, ctx, title, prefix, lb.Name, 1, *extHand, 0)
}

// dsnSecret stores a DSN in a Secret in the controller's namespace.
func (b *bench) dsnSecret(t *testing.T, ctx context.Context, name, dsn string) locksv1alpha1.SecretKeySelector {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "bench-" + name},
		StringData: map[string]string{"dsn": dsn}}
	_ = b.c.Delete(ctx, s)
	if err := b.c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.c.Delete(context.Background(), s) })
	return locksv1alpha1.SecretKeySelector{SecretReference: locksv1alpha1.SecretReference{Name: s.Name, Namespace: systemNS}, Key: "dsn"}
}

// bench times grants and handoffs through the controller on one backend.
type bench struct {
	cfg    *rest.Config
	c      client.WithWatch
	held   <-chan string
	writes *writeCounter
	// tracer times the moments of handoffs inside the manager.
	tracer *spanTracer
	grants int
}

// run measures one backend, failing the test only if something does not work at all: rounds of
// perRound handoffs on a hot lock (each beside floors of floorN writes, none at 0), then grants,
// then the writes of the held locks.
func (b *bench) run(t *testing.T, ctx context.Context, title, prefix, backend string, rounds, perRound, floorN int) backendResult {
	t.Helper()
	r, err := b.measure(ctx, prefix, backend, rounds, perRound, floorN)
	must(t, err)
	r.name = title
	return r
}

func (b *bench) measure(ctx context.Context, prefix, backend string, rounds, perRound, floorN int) (backendResult, error) {
	var r backendResult
	snapshot := func() (writeCounts, error) { return b.writes.snapshot(ctx, b.c, systemNS) }
	c := b.c
	newLock := func(name string) error {
		return c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Spec: locksv1alpha1.DistributedLockSpec{BackendRef: locksv1alpha1.BackendReference{Name: backend}}})
	}
	newClaim := func(name, lock string) error {
		// As lockctl does: no finalizer (the lock record releases a deleted claim).
		return c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Spec: locksv1alpha1.LockClaimSpec{LockName: lock}})
	}

	// Handoffs first, with nothing else held: the writes they count are theirs alone.
	profiled := b.profileAPIServer(ctx, prefix)
	stopProfile, err := profileManager(prefix)
	if err != nil {
		return r, err
	}
	hot, err := b.hotLock(ctx, prefix, backend, rounds, perRound, *queue, floorN)
	stopProfile()
	if err != nil {
		return r, err
	}
	if err := <-profiled; err != nil {
		return r, err
	}
	r.hot = &hot
	r.handoffRecord = report("graceful handoff, seen on the lock record", slices.Concat(hot.span(spanSeenRecord)...))
	r.handoff = report("graceful handoff, seen by the claim's condition", slices.Concat(hot.span(spanSeenClaim)...))
	r.handoffsPerSec = hot.perSec().mid
	r.handoffWrites, r.handoffN = hot.writes(), hot.handoffs()
	fmt.Printf("  %-58s %s\n", "API writes per handoff (claims + locks + leases + events)", perOp(r.handoffWrites, r.handoffN))

	// Grant latency: one claim at a time on its own free lock.
	var grantLat []time.Duration
	var grantWrites writeCounts
	for i := range b.grants {
		lock := fmt.Sprintf("%s-grant-%d", prefix, i)
		if err := newLock(lock); err != nil {
			return r, err
		}
		// Locks are made long before they are claimed: wait until this one is ready, so that only
		// the grant is timed.
		if err := waitLockReady(ctx, c, "bench", lock); err != nil {
			return r, err
		}
		before, err := snapshot()
		if err != nil {
			return r, err
		}
		start := time.Now()
		if err := newClaim(lock, lock); err != nil {
			return r, err
		}
		if err := waitFor(ctx, b.held, lock); err != nil {
			return r, err
		}
		grantLat = append(grantLat, time.Since(start))
		// Writes of this grant: until the next snapshot, after the controller settled.
		time.Sleep(50 * time.Millisecond)
		after, err := snapshot()
		if err != nil {
			return r, err
		}
		grantWrites = addCounts(grantWrites, after.minus(before))
	}
	r.grant, r.grantWrites = report("grant latency (claim created → Acquired)", grantLat), grantWrites
	fmt.Printf("  %-58s %s\n", "API writes per grant (claims + locks + leases)", perOp(grantWrites, len(grantLat)))

	// Steady state: every grant lock held, nothing else happening.
	if *steady > 0 {
		held := &locksv1alpha1.DistributedLock{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "bench", Name: fmt.Sprintf("%s-grant-0", prefix)}, held); err != nil {
			return r, err
		}
		r.steadyLease = time.Duration(held.Spec.LeaseDurationSeconds) * time.Second
		r.steadyHeld = len(grantLat)
		before, err := snapshot()
		if err != nil {
			return r, err
		}
		start := time.Now()
		time.Sleep(*steady)
		after, err := snapshot()
		if err != nil {
			return r, err
		}
		r.steadyWindow, r.steadyWrites = time.Since(start), after.minus(before)
		fmt.Printf("  %-58s %s (%d held, lease %s, over %s)\n", "steady writes per held claim per lease", r.steadyCell(),
			r.steadyHeld, r.steadyLease, r.steadyWindow.Round(time.Second))
	}
	return r, b.clear(ctx)
}

// addCounts adds b to a.
func addCounts(a, b writeCounts) writeCounts {
	if a == nil {
		a = writeCounts{}
	}
	for k, n := range b {
		a[k] += n
	}
	return a
}

// clear deletes this backend's claims and locks and waits until they are gone, so that the next
// backend is measured without a hundred held locks to renew and report on beside it.
func (b *bench) clear(ctx context.Context) error {
	if err := b.c.DeleteAllOf(ctx, &locksv1alpha1.LockClaim{}, client.InNamespace("bench")); err != nil {
		return err
	}
	if err := b.c.DeleteAllOf(ctx, &locksv1alpha1.DistributedLock{}, client.InNamespace("bench")); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		claims, locks := &locksv1alpha1.LockClaimList{}, &locksv1alpha1.DistributedLockList{}
		if err := b.c.List(ctx, claims, client.InNamespace("bench")); err != nil {
			return err
		}
		if err := b.c.List(ctx, locks, client.InNamespace("bench")); err != nil {
			return err
		}
		if len(claims.Items) == 0 && len(locks.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d claims and %d locks still there 2 minutes after deleting them", len(claims.Items), len(locks.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rawEtcd times the etcd lock by hand on the same member: a put-if-absent transaction on a
// leased key to take it and a delete-if-ours transaction to release it.
func rawEtcd(ctx context.Context, endpoint string, n int) (rawResult, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: uberzap.NewNop()})
	if err != nil {
		return rawResult{}, err
	}
	defer cli.Close()
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		return rawResult{}, err
	}
	var acquire, free []time.Duration
	for i := range n * 10 {
		key := fmt.Sprintf("bench/raw/%d", i)
		start := time.Now()
		if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "me", clientv3.WithLease(lease.ID))).Commit(); err != nil {
			return rawResult{}, err
		}
		acquire = append(acquire, time.Since(start))
		start = time.Now()
		if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", "me")).
			Then(clientv3.OpDelete(key)).Commit(); err != nil {
			return rawResult{}, err
		}
		free = append(free, time.Since(start))
	}
	return rawResult{label: "raw etcd, no controller: put-if-absent / delete-if-ours txn",
		acquire: report("raw put-if-absent txn (same member, no controller)", acquire),
		release: report("raw delete-if-ours txn (same member, no controller)", free)}, nil
}

// rawRedis times the classic Redis lock by hand on the same server: SET NX PX to take it and an
// owner-checked Lua DEL to release it, the floor under what the controller adds.
func rawRedis(ctx context.Context, addr string, n int) (rawResult, error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	release := goredis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
	var acquire, free []time.Duration
	for i := range n * 10 {
		key := fmt.Sprintf("bench/raw/%d", i)
		start := time.Now()
		if err := rdb.SetNX(ctx, key, "me", 30*time.Second).Err(); err != nil {
			return rawResult{}, err
		}
		acquire = append(acquire, time.Since(start))
		start = time.Now()
		if err := release.Run(ctx, rdb, []string{key}, "me").Err(); err != nil {
			return rawResult{}, err
		}
		free = append(free, time.Since(start))
	}
	return rawResult{label: "raw Redis, no controller: `SET NX PX` / Lua release",
		acquire: report("raw SET NX PX (same server, no controller)", acquire),
		release: report("raw owner-checked Lua release (same server, no controller)", free)}, nil
}

// watchHeld reports the names of claims in ns as they become Held, each once. When the server
// ends the watch (it drops a watcher that falls behind), it watches again from a fresh list.
func watchHeld(ctx context.Context, c client.WithWatch, ns string) <-chan string {
	out := make(chan string, 8192)
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

// report prints the quantiles of d and returns them.
func report(what string, d []time.Duration) quantiles {
	q := quantilesOf(d)
	fmt.Printf("  %-58s p50 %8.2f ms   p99 %8.2f ms   max %8.2f ms   (n=%d)\n", what,
		ms(q.P50), ms(q.P99), ms(q.Max), q.N)
	return q
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// rawZooKeeper times the ZooKeeper lock by hand on the same server: create an ephemeral node to
// take it and delete it to release it.
func rawZooKeeper(addr string, n int) (rawResult, error) {
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return rawResult{}, err
	}
	defer conn.Close()
	if _, err := conn.Create("/bench-raw", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return rawResult{}, err
	}
	var acquire, free []time.Duration
	for i := range n * 10 {
		path := fmt.Sprintf("/bench-raw/%d", i)
		start := time.Now()
		if _, err := conn.Create(path, []byte("me"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			return rawResult{}, err
		}
		acquire = append(acquire, time.Since(start))
		start = time.Now()
		if err := conn.Delete(path, -1); err != nil {
			return rawResult{}, err
		}
		free = append(free, time.Since(start))
	}
	return rawResult{label: "raw ZooKeeper, no controller: ephemeral create / delete",
		acquire: report("raw ephemeral create (same server, no controller)", acquire),
		release: report("raw delete (same server, no controller)", free)}, nil
}

// rawSQL times lockwarden's SQL statements without the controller: the backend's TryAcquire (one
// upsert, plus a read-back on MySQL) and Release (one owner-checked delete) on the same database.
func rawSQL(ctx context.Context, title string, driver locksv1alpha1.SQLDriver, dsn string, n int) (rawResult, error) {
	b, err := sqlbackend.New(sqlbackend.Config{Driver: string(driver), DSN: dsn, Table: "bench_raw_locks"})
	if err != nil {
		return rawResult{}, err
	}
	defer b.Close(ctx)
	if err := b.Ping(ctx); err != nil {
		return rawResult{}, err
	}
	var acquire, free []time.Duration
	for i := range n * 10 {
		key := fmt.Sprintf("bench/raw/%d", i)
		start := time.Now()
		lease, err := b.TryAcquire(ctx, key, "me", 30*time.Second)
		if err != nil {
			return rawResult{}, err
		}
		acquire = append(acquire, time.Since(start))
		start = time.Now()
		if err := b.Release(ctx, lease); err != nil {
			return rawResult{}, err
		}
		free = append(free, time.Since(start))
	}
	return rawResult{label: title + ", backend call without controller: upsert / delete",
		acquire: report("backend TryAcquire: upsert (same database, no controller)", acquire),
		release: report("backend Release: owner-checked delete (no controller)", free)}, nil
}

// profileManager starts, for the built-in backend's hot lock and when -manager-profile is set, a
// CPU profile of this process (the manager runs in it); the function it returns stops it.
func profileManager(prefix string) (stop func(), err error) {
	if *mgrProf == "" || prefix != "k8s" {
		return func() {}, nil
	}
	f, err := os.Create(*mgrProf)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		fmt.Printf("  CPU profile of this process (manager and bench) during the hot-lock rounds written to %s\n", *mgrProf)
	}, nil
}

// profileAPIServer starts, for the built-in backend's hot lock and when -apiserver-profile is
// set, a CPU profile of the API server (its /debug/pprof endpoint, on by default) and writes it
// to that file; the channel says when it is done. Read it with go tool pprof.
func (b *bench) profileAPIServer(ctx context.Context, prefix string) <-chan error {
	done := make(chan error, 1)
	if *apiProf == "" || prefix != "k8s" {
		done <- nil
		return done
	}
	cs, err := kubernetes.NewForConfig(b.cfg)
	if err != nil {
		done <- err
		return done
	}
	go func() {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(*profSecs)).Timeout(time.Duration(*profSecs+30) * time.Second).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(*apiProf, raw, 0o644)
			fmt.Printf("  API server CPU profile of %d s of hot-lock handoffs written to %s\n", *profSecs, *apiProf)
		}
		done <- err
	}()
	return done
}
