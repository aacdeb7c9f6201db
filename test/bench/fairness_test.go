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

package bench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/fairqueue"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
)

var (
	fairLocks        = flag.Int("fair-locks", 1000, "locks of the noisy namespace")
	fairClaims       = flag.Int("fair-claims", 10, "claims waiting on each lock of the noisy namespace (locks × claims are kept there throughout)")
	fairGrants       = flag.Int("fair-grants", 200, "grants of the quiet namespace to time in each phase")
	fairBudget       = flag.Duration("fair-budget", 90*time.Second, "time the quiet namespace's grants of a phase for at most this long (fewer than -fair-grants if they are slow)")
	fairBound        = flag.Duration("fair-bound", 5*time.Minute, "after this, a quiet grant not seen Held counts as not working")
	fairDoc          = flag.String("fair-doc", "", "write the fairness table into this file's fairness block (make bench-fairness: docs/scale.md)")
	fairPerNamespace = flag.String("fair-namespace-workers", "1,2", "after the runs without a bound, one run with turns and each of these bounds on a namespace's passes in flight (--namespace-workers), comma-separated")
	fairRates        = flag.String("fair-namespace-rates", "10,25", "then one run with turns, -fair-rate-workers passes in flight and each of these bounds on a namespace's passes begun per second (--namespace-rate), comma-separated")
	fairRateWorkers  = flag.Int("fair-rate-workers", 1, "the bound on a namespace's passes in flight (--namespace-workers) beside each rate of -fair-namespace-rates; 0 for none")
	fairQuietGap     = flag.Duration("fair-quiet-gap", 100*time.Millisecond, "pause between the quiet namespace's grants, so that it asks for a few a second as a quiet tenant does (0: the next claim the moment the last is Held)")
	fairBoundedOnly  = flag.Bool("fair-bounded-only", false, "skip the runs first come, first served and with turns alone (for trying bounds; the table then has only the bounded rows)")
)

// fairPhase is the quiet namespace's grant latency in one phase.
type fairPhase struct {
	grants quantiles
	// noisyHandoffs per second in the noisy namespace meanwhile (0 when idle).
	noisyRate float64
}

// fairRun is one manager's figures: the quiet namespace's grants idle and beside the noisy one.
type fairRun struct {
	queue       string
	idle, noisy fairPhase
}

// TestFairness measures what one namespace's churn does to another's grants (issue: guardrails,
// docs/scale.md "Fairness"). A quiet namespace takes uncontended grants one at a time (claim
// created → seen Held), first with nothing else running (idle), then beside a noisy namespace that
// keeps fair-locks × fair-claims claims and hands every one of its locks on the moment it is
// granted (an open loop at the manager's capacity). It runs once per work queue, each time with a fresh
// manager: with the work queues first come, first served (controller-runtime's default), with
// namespaces taking turns (fairqueue), with turns and each namespace bounded to
// -fair-namespace-workers passes in flight, and with turns and each of -fair-namespace-rates
// passes begun per second. A benchmark: it prints figures and asserts none.
func TestFairness(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx := t.Context()
	cfg, err := ctrl.GetConfig()
	must(t, err)
	ocfg := rest.CopyConfig(cfg)
	ocfg.QPS, ocfg.Burst = 1000, 2000
	c, err := client.NewWithWatch(ocfg, client.Options{Scheme: lockenv.Scheme()})
	must(t, err)
	_ = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNS}})
	b := &bench{cfg: cfg, c: c}

	fmt.Printf("lockwarden fairness: a quiet namespace's %d grants, idle and beside a noisy namespace of %d locks × %d claims in open-loop churn; %d claim workers\n",
		*fairGrants, *fairLocks, *fairClaims, *workers)
	var runs []fairRun
	type mode struct {
		name  string
		queue fairqueue.Options
	}
	var modes []mode
	if !*fairBoundedOnly {
		modes = append(modes, mode{"first come, first served (controller-runtime's default)", fairqueue.Options{FirstComeFirstServed: true}},
			mode{"namespaces take turns (fairqueue)", fairqueue.Options{}})
	}
	for _, f := range strings.Split(*fairPerNamespace, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			t.Fatalf("-fair-namespace-workers: %q is not a bound of 1 or more", f)
		}
		modes = append(modes, mode{fmt.Sprintf("turns, at most %d of a namespace's passes at once (`--namespace-workers=%d`)", n, n),
			fairqueue.Options{MaxPerNamespace: n}})
	}
	for _, f := range strings.Split(*fairRates, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r <= 0 {
			t.Fatalf("-fair-namespace-rates: %q is not a rate above 0", f)
		}
		name := fmt.Sprintf("turns, at most %s of a namespace's passes begun a second (`--namespace-rate=%s`)", f, f)
		if *fairRateWorkers > 0 {
			name = fmt.Sprintf("turns, at most %d of a namespace's passes at once and %s begun a second (`--namespace-workers=%d --namespace-rate=%s`)",
				*fairRateWorkers, f, *fairRateWorkers, f)
		}
		modes = append(modes, mode{name, fairqueue.Options{MaxPerNamespace: *fairRateWorkers, NamespaceRate: r}})
	}
	for i, mode := range modes {
		fmt.Printf("queue: %s\n", mode.name)
		mgr, err := lockenv.StartManager(cfg, lockenv.ManagerOptions{Namespace: systemNS, QPS: float32(*qps), Burst: *burst,
			Workers: *workers, Queue: mode.queue, Restartable: true})
		must(t, err)
		run := fairRun{queue: mode.name}
		quiet := fmt.Sprintf("fair-quiet-%d", i)
		noisy := fmt.Sprintf("fair-noisy-%d", i)
		b.fairNamespace(t, ctx, quiet)
		run.idle = b.quietGrants(t, ctx, quiet, "idle", 0)
		stop, rate := b.noisyChurn(t, ctx, noisy, *fairLocks, *fairClaims)
		run.noisy = b.quietGrants(t, ctx, quiet, "beside the noisy namespace", *fairGrants)
		stop()
		run.noisy.noisyRate = rate()
		fmt.Printf("  %-58s %.0f handoffs/s\n", "noisy namespace meanwhile", run.noisy.noisyRate)
		// The noisy namespace goes with this manager, so that the next starts from a quiet cluster.
		must(t, deleteAndWait(ctx, c, noisy, 5*time.Minute))
		must(t, deleteAndWait(ctx, c, quiet, time.Minute))
		must(t, mgr.Stop())
		runs = append(runs, run)
	}

	block := fairMarkdown(runs)
	fmt.Println()
	fmt.Print(block)
	if *fairDoc != "" {
		must(t, writeBlockBetween(*fairDoc, fairBegin, fairEnd, block))
		fmt.Printf("\nresults written into %s\n", *fairDoc)
	}
}

const (
	fairBegin = "<!-- fairness:begin: written by make bench-fairness, not by hand -->"
	fairEnd   = "<!-- fairness:end -->"
)

// fairNamespace creates ns.
func (b *bench) fairNamespace(t *testing.T, ctx context.Context, ns string) {
	must(t, b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
}

// quietGrants times grants one at a time in ns, each on a lock of its own made beforehand (from
// index first on), so that each is an uncontended grant: claim created → seen Held by a watch.
func (b *bench) quietGrants(t *testing.T, ctx context.Context, ns, phase string, first int) fairPhase {
	n := *fairGrants
	parallel(t, 16, n, func(i int) error {
		return b.c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("quiet-%04d", first+i)}})
	})
	for i := range n {
		must(t, waitLockReady(ctx, b.c, ns, fmt.Sprintf("quiet-%04d", first+i)))
	}
	held := watchHeld(ctx, b.c, ns)
	lat := make([]time.Duration, 0, n)
	started := time.Now()
	for i := range n {
		if time.Since(started) > *fairBudget {
			break // a starved phase is timed on fewer grants: the table gives n
		}
		name := fmt.Sprintf("quiet-%04d", first+i)
		start := time.Now()
		must(t, b.c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: locksv1alpha1.LockClaimSpec{LockName: name}}))
		if err := waitForWithin(ctx, held, name, *fairBound); err != nil {
			t.Fatalf("%v: the quiet namespace was starved for longer than -fair-bound", err)
		}
		lat = append(lat, time.Since(start))
		time.Sleep(*fairQuietGap)
	}
	return fairPhase{grants: report("quiet grants, "+phase+" (claim created → Held)", lat)}
}

// noisyChurn fills ns with locks × perLock claims (queueMany) and then, until stop, deletes every
// claim the moment it is seen Held and queues a new one at the tail of its lock, so that ns keeps
// locks × perLock claims and every lock hands on as fast as the manager grants. rate is the
// handoffs per second from the churn's start to stop.
func (b *bench) noisyChurn(t *testing.T, ctx context.Context, ns string, locks, perLock int) (stop func(), rate func() float64) {
	held, name := b.queueMany(t, ctx, ns, locks, perLock)
	churn, cancel := context.WithCancel(ctx)
	var handoffs atomic.Int64
	jobs := make(chan string, locks*perLock)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for n := range jobs {
				var l, i int
				if _, err := fmt.Sscanf(n, "many-%04d-%d", &l, &i); err != nil {
					continue
				}
				_ = b.c.Delete(churn, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}})
				_ = b.c.Create(churn, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(l, i+perLock)},
					Spec: locksv1alpha1.LockClaimSpec{LockName: fmt.Sprintf("many-%04d", l)}})
			}
		})
	}
	// Every lock's first claim is Held now: start by handing each on.
	for l := range locks {
		jobs <- name(l, 0)
	}
	var start, end time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case n := <-held:
				handoffs.Add(1)
				select {
				case jobs <- n:
				case <-churn.Done():
					return
				}
			case <-churn.Done():
				return
			}
		}
	}()
	// Let the churn reach its pace before the quiet namespace is timed.
	time.Sleep(5 * time.Second)
	handoffs.Store(0)
	start = time.Now()
	return func() {
			end = time.Now()
			cancel()
			<-done
			close(jobs)
			wg.Wait()
		}, func() float64 {
			return float64(handoffs.Load()) / end.Sub(start).Seconds()
		}
}

// deleteAndWait deletes namespace ns and waits until it is gone.
func deleteAndWait(ctx context.Context, c client.Client, ns string, bound time.Duration) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	deadline := time.Now().Add(bound)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s not gone within %s", ns, bound)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// fairMarkdown is the table docs/scale.md shows.
func fairMarkdown(runs []fairRun) string {
	var s strings.Builder
	pace := "one at a time"
	if *fairQuietGap > 0 {
		pace = fmt.Sprintf("one at a time, %s apart", *fairQuietGap)
	}
	fmt.Fprintf(&s, "One run of `make bench-fairness` (%s, %s, %d cores, the local cluster): a quiet namespace's %d uncontended grants %s, "+
		"idle and then beside a noisy namespace that keeps %d locks × %d claims (%d) and hands each lock on the moment it is granted "+
		"(each phase timed for at most %s: n is how many grants fit); %d claim workers; a fresh manager for each queue.\n\n",
		revision(), time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), *fairGrants, pace, *fairLocks, *fairClaims, *fairLocks**fairClaims, *fairBudget, *workers)
	s.WriteString("| work queue | quiet grant, idle: p50 / p99 (n) | beside the noisy namespace: p50 / p99 (n) | p99 ÷ idle p99 | noisy handoffs/s |\n")
	s.WriteString("|---|---|---|---|---|\n")
	for _, r := range runs {
		ratio := 0.0
		if r.idle.grants.P99 > 0 {
			ratio = float64(r.noisy.grants.P99) / float64(r.idle.grants.P99)
		}
		fmt.Fprintf(&s, "| %s | %s / %s (%d) | %s / %s (%d) | %.1f× | %.0f |\n", r.queue,
			fmtMS(r.idle.grants.P50), fmtMS(r.idle.grants.P99), r.idle.grants.N, fmtMS(r.noisy.grants.P50), fmtMS(r.noisy.grants.P99), r.noisy.grants.N, ratio, r.noisy.noisyRate)
	}
	return s.String()
}

// waitForWithin waits until held reports name, for at most bound.
func waitForWithin(ctx context.Context, held <-chan string, name string, bound time.Duration) error {
	timeout := time.After(bound)
	for {
		select {
		case n := <-held:
			if n == name {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("claim %s was not granted within %s", name, bound)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
