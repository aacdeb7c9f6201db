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

// Command scale measures the manager at size on a local cluster (issue #17): two manager
// replicas, built from this tree, run as their own processes with leader election, so that the
// heap and RSS they report on their /metrics are theirs alone; the harness creates the
// workloads, watches claims through informers, and reads the replicas' metrics (including the
// per-resource API request counter of --api-request-metrics) over loopback.
//
// Workloads, chosen with -phases:
//
//	detached  the first rows: detached claims on the built-in backend (-detached-rows, default
//	          200×10 and 1000×10), steady-state writes per held claim and per lock per lease, and
//	          Held claims whose expireTime is past, sampled by listing
//	ungated   -locks Deployments of -pods-per-lock pods annotated for a lock, no scheduling gate
//	gated     the same with the lockwarden scheduling gate in the pod template
//	churn     on the gated pods (else the ungated): every holder pod deleted the moment its claim
//	          is seen Held, for -churn
//	failover  then the leader killed by PID (-failover-signal), some holders ended at the same
//	          moment; the times until the new leader, every held claim renewed, the queues
//	          drained; holds lost
//	claims    -detached-claims detached claims on -locks locks, with the pods' measurements
//	          (and churn and failover when those phases are chosen); it reports where it stops
//
// It prints figures and never fails on a timing; it exits non-zero only when something does not
// work at all (a lock never granted within -bound, no new leader). Run it with make bench-scale.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

func scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = locksv1alpha1.AddToScheme(s)
	return s
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// row is one size of the detached rows.
type row struct{ locks, perLock int }

func parseRows(s string) ([]row, error) {
	var out []row
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		a, b, ok := strings.Cut(f, "x")
		l, err1 := strconv.Atoi(a)
		p, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || l <= 0 || p <= 0 {
			return nil, fmt.Errorf("-detached-rows: %q is not LOCKSxCLAIMS, e.g. 200x10", f)
		}
		out = append(out, row{l, p})
	}
	return out, nil
}

// allPhases in the order they run.
var allPhases = []string{"detached", "ungated", "gated", "churn", "failover", "claims"}

// config is the command line.
type config struct {
	kubeconfig, manager, workdir          string
	clusterDir                            string
	locks, podsPerLock                    int
	leases                                []time.Duration
	rows                                  []row
	detachedClaims, creators              int
	phases                                map[string]bool
	steady, churn, sample, bound          time.Duration
	failoverDeletes                       int
	failoverSignal                        syscall.Signal
	leaderLease, leaderRenew, leaderRetry time.Duration
	workers                               int
	managerArgs                           []string
	profileDir                            string
	writeDoc                              bool
	doc, docBlock                         string
}

func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench-scale", flag.ContinueOnError)
	fs.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the local cluster's kubeconfig")
	fs.StringVar(&c.manager, "manager", "", "the manager binary built from this tree (make bench-scale builds it)")
	fs.StringVar(&c.clusterDir, "cluster-dir", "", "the local cluster's kwokctl directory (its pids/ name the cluster's processes, whose CPU the windows account for; make bench-scale sets it)")
	fs.StringVar(&c.workdir, "workdir", "", "directory for the managers' logs (default: a new temporary directory)")
	fs.IntVar(&c.locks, "locks", 1000, "DistributedLocks of the pod workloads and of the claims workload")
	fs.IntVar(&c.podsPerLock, "pods-per-lock", 10, "pods per lock (one Deployment per lock)")
	leases := fs.String("lease", "30s,10s", "every lock's leaseDurationSeconds (whole seconds, 5s..1h); comma-separated, every workload runs once at each (30s is the API's default, 10s a stress lease: three times the renewals and expiry checks)")
	rows := fs.String("detached-rows", "200x10,1000x10", "sizes of the detached rows, LOCKSxCLAIMS, comma-separated")
	fs.IntVar(&c.detachedClaims, "detached-claims", 100000, "detached claims of the claims workload, spread over -locks locks (0 skips it)")
	fs.IntVar(&c.creators, "creators", 16, "parallel creates of detached claims")
	phases := fs.String("phases", strings.Join(allPhases, ","), "what to run, comma-separated: "+strings.Join(allPhases, ","))
	fs.DurationVar(&c.steady, "steady", 60*time.Second, "steady-state window in which requests, writes, memory and expired holds are counted")
	fs.DurationVar(&c.churn, "churn", 60*time.Second, "how long holders are ended continuously")
	fs.DurationVar(&c.sample, "sample", 2*time.Second, "pause between two looks for Held claims past their status.expireTime")
	fs.DurationVar(&c.bound, "bound", 10*time.Minute, "the generous bound after which something that should happen counts as not working at all")
	fs.IntVar(&c.failoverDeletes, "failover-deletes", 0, "holders ended at the moment the leader is killed (default: a tenth of the locks)")
	sig := fs.String("failover-signal", "KILL", "how the leader is killed: KILL (a crash: the standby waits for the election Lease to expire) or TERM (a graceful stop, which gives the Lease up)")
	fs.DurationVar(&c.leaderLease, "leader-lease", 0, "the managers' --leader-election-lease-duration (default: 0.4 × -lease, at most the manager's default 15s, so that a crashed leader's successor resumes before a lease runs out)")
	fs.IntVar(&c.workers, "workers", 0, "the managers' --claim-workers (default: the manager's default)")
	extra := fs.String("manager-args", "", "further flags for both managers, space-separated")
	fs.StringVar(&c.profileDir, "profile-dir", "", "when set, run the managers with --pprof-bind-address and write the leader's heap profile at rest and CPU profile under churn here")
	fs.BoolVar(&c.writeDoc, "write-doc", false, "write the results into -doc between its scale markers")
	fs.StringVar(&c.doc, "doc", "docs/scale.md", "the file -write-doc writes into")
	fs.StringVar(&c.docBlock, "doc-block", "", "with -write-doc, the named block of -doc to write (its markers name it), for a run of some phases beside the full run's block; empty: the full run's block")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.rows, err = parseRows(*rows); err != nil {
		return c, err
	}
	c.phases = map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slicesContains(allPhases, p) {
			return c, fmt.Errorf("-phases: unknown phase %q (known: %s)", p, strings.Join(allPhases, ","))
		}
		c.phases[p] = true
	}
	switch strings.ToUpper(strings.TrimPrefix(*sig, "SIG")) {
	case "KILL":
		c.failoverSignal = syscall.SIGKILL
	case "TERM":
		c.failoverSignal = syscall.SIGTERM
	default:
		return c, fmt.Errorf("-failover-signal: %q is neither KILL nor TERM", *sig)
	}
	if c.leases, err = parseLeases(*leases); err != nil {
		return c, err
	}
	if c.failoverDeletes == 0 {
		c.failoverDeletes = max(1, c.locks/10)
	}
	// The managers run once for every lease: their election is timed by the shortest.
	c.leaderLease, c.leaderRenew, c.leaderRetry = leaderTimings(c.leaderLease, slices.Min(c.leases))
	c.managerArgs = strings.Fields(*extra)
	switch {
	case c.manager == "":
		return c, errors.New("-manager is required: the manager binary to run (make bench-scale builds it)")
	case c.kubeconfig == "":
		return c, errors.New("-kubeconfig (or KUBECONFIG) is required: the local cluster to run on")
	case c.locks <= 0 || c.podsPerLock <= 0:
		return c, errors.New("-locks and -pods-per-lock must be positive")
	}
	return c, nil
}

// parseLeases reads -lease: one or more leaseDurationSeconds, each whole seconds from 5s to 1h.
func parseLeases(s string) ([]time.Duration, error) {
	var leases []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 5*time.Second || d > time.Hour || d%time.Second != 0 {
			return nil, fmt.Errorf("-lease %s: whole seconds from 5s to 1h (leaseDurationSeconds)", f)
		}
		if slices.Contains(leases, d) {
			return nil, fmt.Errorf("-lease %s: given twice", f)
		}
		leases = append(leases, d)
	}
	if len(leases) == 0 {
		return nil, errors.New("-lease: at least one lease")
	}
	return leases, nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// leaderTimings derives the managers' leader election timings: the lease asked for, else 0.4 of
// the locks' lease (a crashed leader's successor must resume the holds before they run out:
// docs/design.md §3, Failure), at most client-go's default 15s; the renew deadline two thirds of it
// and the retry period a fifth, as client-go's defaults are proportioned (15s/10s/2s).
func leaderTimings(asked, lockLease time.Duration) (lease, renew, retry time.Duration) {
	lease = asked
	if lease <= 0 {
		lease = min(15*time.Second, lockLease*2/5)
	}
	renew = (lease * 2 / 3).Truncate(10 * time.Millisecond)
	retry = min(2*time.Second, lease/5)
	return lease, renew, retry
}

func main() {
	cfg, err := parseConfig(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(2)
	}
	// The informers' reflectors log through controller-runtime's logger: keep the output to figures.
	ctrl.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := run(ctx, cfg)
	stop()
	os.Exit(code)
}

// run runs the phases and prints the results; it returns the exit code.
func run(ctx context.Context, cfg config) int {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		return 2
	}
	// The observer must measure the manager, not itself: no client-side limit.
	rc.QPS, rc.Burst = -1, 0
	c, err := client.New(rc, client.Options{Scheme: scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		return 2
	}
	if cfg.workdir == "" {
		if cfg.workdir, err = os.MkdirTemp("", "lockwarden-bench-scale-"); err != nil {
			fmt.Fprintln(os.Stderr, "bench-scale:", err)
			return 2
		}
	}
	if cfg.profileDir != "" {
		if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "bench-scale:", err)
			return 2
		}
	}
	nodes, podCapacity, err := nodeCapacity(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale: reading the nodes:", err)
		return 2
	}
	logf("starting two manager replicas (%s), logs in %s", cfg.manager, cfg.workdir)
	m, err := startManagers(ctx, managerConfig{binary: cfg.manager, kubeconfig: cfg.kubeconfig, logDir: cfg.workdir,
		leaderLease: cfg.leaderLease, leaderRenew: cfg.leaderRenew, leaderRetry: cfg.leaderRetry,
		workers: cfg.workers, pprof: cfg.profileDir != "", extraArgs: cfg.managerArgs})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		return 1
	}
	defer m.stop()
	r := &runner{cfg: cfg, rc: rc, c: c, m: m, nodes: nodes, podCapacity: podCapacity, res: &results{}}
	r.res.settings = r.settings()
	fmt.Println(r.res.settings)
	r.runPhases(ctx)
	r.res.unexpected = m.unexpectedExits()

	block := r.res.markdown()
	fmt.Println()
	fmt.Print(block)
	if cfg.writeDoc {
		if err := writeBlock(cfg.doc, cfg.docBlock, block); err != nil {
			fmt.Fprintln(os.Stderr, "bench-scale:", err)
			return 1
		}
		fmt.Printf("\nresults written into %s\n", cfg.doc)
	}
	if len(r.res.failures) > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}

// nodeCapacity counts the nodes and the pods they can take.
func nodeCapacity(ctx context.Context, c client.Client) (nodes, pods int, err error) {
	list := &corev1.NodeList{}
	if err := c.List(ctx, list); err != nil {
		return 0, 0, err
	}
	for _, n := range list.Items {
		pods += int(n.Status.Allocatable.Pods().Value())
	}
	return len(list.Items), pods, nil
}

// settings says what the run measured, with what.
func (r *runner) settings() string {
	cfg := r.cfg
	var phases []string
	for _, p := range allPhases {
		if cfg.phases[p] {
			phases = append(phases, p)
		}
	}
	workers := "the default claim workers"
	if cfg.workers > 0 {
		workers = fmt.Sprintf("%d claim workers", cfg.workers)
	}
	extra := ""
	if len(cfg.managerArgs) > 0 {
		extra = ", " + strings.Join(cfg.managerArgs, " ")
	}
	return fmt.Sprintf("One run of `make bench-scale` (%s, %s, %d cores, %d kwok nodes taking %d pods): phases %s; "+
		"%d locks × %d pods per lock, detached rows %s, %d detached claims; leases %s; steady windows %s, churn %s; "+
		"two manager replicas (separate processes, leader election %s / %s / %s, %s, no client-side limit%s), "+
		"built-in backend; holders ended at the failover: %d (signal %s).",
		revision(), time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), r.nodes, r.podCapacity, strings.Join(phases, ","),
		cfg.locks, cfg.podsPerLock, rowsString(cfg.rows), cfg.detachedClaims, leasesString(cfg.leases), cfg.steady, cfg.churn,
		cfg.leaderLease, cfg.leaderRenew, cfg.leaderRetry, workers, extra, cfg.failoverDeletes, signalName(cfg.failoverSignal))
}

func leasesString(leases []time.Duration) string {
	s := make([]string, len(leases))
	for i, l := range leases {
		s[i] = dur(l)
	}
	return strings.Join(s, " and ")
}

func rowsString(rows []row) string {
	var s []string
	for _, r := range rows {
		s = append(s, fmt.Sprintf("%d×%d", r.locks, r.perLock))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func signalName(s syscall.Signal) string {
	if s == syscall.SIGKILL {
		return "KILL"
	}
	return "TERM"
}

// revision names the commit measured, "+dirty" when the tree has changes.
func revision() string {
	out, err := execOutput("git", "describe", "--always", "--dirty=+dirty")
	if err != nil {
		return "unknown commit"
	}
	return "commit " + strings.TrimSpace(out)
}
