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
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/lockwarden/lockwarden/test/bench/proccpu"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runner runs the phases against one cluster and one pair of managers.
type runner struct {
	cfg                config
	rc                 *rest.Config
	c                  client.Client
	m                  *managers
	nodes, podCapacity int
	res                *results
	// lease is the leaseDurationSeconds of the workload that runs (one of -lease).
	lease time.Duration
	// lastWorkload is set while the last workload runs.
	lastWorkload bool
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}

// fail records that something did not work at all; the run goes on with the next workload and
// exits non-zero at the end.
func (r *runner) fail(w *workloadResult, err error) {
	msg := fmt.Sprintf("%s: %v", w.name, err)
	logf("FAILED: %s", msg)
	r.res.failures = append(r.res.failures, msg)
	if w.stopped == "" {
		w.stopped = err.Error()
	}
}

func (r *runner) runPhases(ctx context.Context) {
	cfg := r.cfg
	var runs []func()
	for _, lease := range cfg.leases {
		at := func(run func()) func() { return func() { r.lease = lease; run() } }
		if cfg.phases["detached"] {
			for _, row := range cfg.rows {
				runs = append(runs, at(func() { r.detachedRow(ctx, row) }))
			}
		}
		for _, gated := range []bool{false, true} {
			name := map[bool]string{false: "ungated", true: "gated"}[gated]
			if !cfg.phases[name] {
				continue
			}
			// Churn and failover run on the gated pods when those run, else on the ungated.
			last := gated || !cfg.phases["gated"]
			runs = append(runs, at(func() { r.podsWorkload(ctx, gated, last && cfg.phases["churn"], last && cfg.phases["failover"]) }))
		}
		if cfg.phases["claims"] && cfg.detachedClaims > 0 {
			runs = append(runs, at(func() { r.claimsWorkload(ctx) }))
		}
	}
	for i, run := range runs {
		if ctx.Err() != nil {
			return
		}
		// The cluster goes after the last workload: its namespace need not be waited for.
		r.lastWorkload = i == len(runs)-1
		run()
	}
}

// named adds the workload's lease to its name, short name and namespace when the run has more
// than one lease.
func (r *runner) named(name, short, ns string) (string, string, string) {
	if len(r.cfg.leases) < 2 {
		return name, short, ns
	}
	secs := int(r.lease.Seconds())
	return fmt.Sprintf("%s, lease %d s", name, secs), fmt.Sprintf("%s, %d s", short, secs), fmt.Sprintf("%s-lease%d", ns, secs)
}

// workload is one namespace of locks with its tracker.
type workload struct {
	ns    string
	t     *tracker
	locks int
	pods  bool
}

func (r *runner) begin(ctx context.Context, ns string, t *tracker, locks int, pods bool) (*workload, error) {
	if err := createNamespace(ctx, r.c, ns, r.cfg.bound); err != nil {
		return nil, err
	}
	if err := startTracker(ctx, r.rc, ns, t, pods); err != nil {
		return nil, err
	}
	return &workload{ns: ns, t: t, locks: locks, pods: pods}, nil
}

// end deletes the workload's namespace and records how long that took.
func (r *runner) end(ctx context.Context, wl *workload, w *workloadResult) {
	r.res.lost = append(r.res.lost, wl.t.lossesSince(0)...)
	if r.lastWorkload {
		// The cluster is deleted next: no need to wait for the namespace (100,000 claims to
		// release take long).
		_ = r.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wl.ns}})
		wl.t.close()
		return
	}
	start := time.Now()
	logf("%s: deleting namespace %s", w.name, wl.ns)
	if err := deleteNamespace(ctx, r.c, wl.ns, r.cfg.bound); err != nil {
		w.cleanupErr = err.Error()
		logf("%s: %v", w.name, err)
	}
	// The tracker stops after the deletion, so that a hold lost on the way is still seen; what
	// the deletion released is not a loss (the namespace's claims were deleted by the harness).
	wl.t.close()
	w.cleanup = time.Since(start)
	logf("%s: namespace gone after %s", w.name, dur(w.cleanup))
}

// detachedRow is one of the first rows: detached claims, then the steady state.
func (r *runner) detachedRow(ctx context.Context, row row) {
	name, short, ns := r.named(fmt.Sprintf("detached %d locks × %d claims", row.locks, row.perLock),
		fmt.Sprintf("detached %d×%d", row.locks, row.perLock), fmt.Sprintf("scale-detached-%dx%d", row.locks, row.perLock))
	w := &workloadResult{name: name, short: short, madeWhat: "claims"}
	r.res.workloads = append(r.res.workloads, w)
	logf("%s", w.name)
	wl, err := r.begin(ctx, ns, newTracker(row.locks, row.locks*row.perLock, 0), row.locks, false)
	if err != nil {
		r.fail(w, err)
		return
	}
	defer r.end(ctx, wl, w)
	r.detached(ctx, wl, w, row.perLock, false, false, false)
}

// claimsWorkload is -detached-claims claims on -locks locks, measured as the pods are.
func (r *runner) claimsWorkload(ctx context.Context) {
	perLock := max(1, r.cfg.detachedClaims/r.cfg.locks)
	name, short, ns := r.named(fmt.Sprintf("detached, %d claims on %d locks", r.cfg.locks*perLock, r.cfg.locks),
		fmt.Sprintf("%d claims", r.cfg.locks*perLock), "scale-claims")
	w := &workloadResult{name: name, short: short, madeWhat: "claims"}
	r.res.workloads = append(r.res.workloads, w)
	logf("%s", w.name)
	wl, err := r.begin(ctx, ns, newTracker(r.cfg.locks, r.cfg.locks*perLock, 0), r.cfg.locks, false)
	if err != nil {
		r.fail(w, err)
		return
	}
	defer r.end(ctx, wl, w)
	r.detached(ctx, wl, w, perLock, r.cfg.phases["churn"], r.cfg.phases["failover"], true)
}

// detached creates locks and detached claims, waits for every head to hold, and measures. With
// soft (the claims workload, which goes as far as the machine allows) stopping short is a
// figure, not a failure.
func (r *runner) detached(ctx context.Context, wl *workload, w *workloadResult, perLock int, churn, failover, soft bool) {
	stop := func(step string, err error) {
		if soft {
			w.stopped = fmt.Sprintf("%s: %v%s", step, err, r.why(ctx))
			logf("%s: stopped: %s", w.name, w.stopped)
			return
		}
		r.fail(w, fmt.Errorf("%s: %w", step, err))
	}
	if err := createLocks(ctx, r.c, wl.ns, wl.locks, r.lease); err != nil {
		stop("creating locks", err)
		return
	}
	start := time.Now()
	last, err := createClaims(ctx, r.c, wl.ns, wl.locks, perLock, r.cfg.creators)
	w.createSpan = last.Sub(start)
	if err != nil {
		w.made = wl.t.snapshot().claimsSeen
		stop(fmt.Sprintf("creating %d claims", wl.locks*perLock), err)
		return
	}
	w.made = wl.locks * perLock
	logf("%s: %d claims created in %s", w.name, w.made, dur(w.createSpan))
	if err := wl.t.waitFor(ctx, r.cfg.bound, "every lock held", func(s snapshot) bool { return s.heldLocks == wl.locks }); err != nil {
		stop("granting", err)
		return
	}
	w.toHeld = wl.t.snapshot().allHeldAt.Sub(last)
	logf("%s: every lock held %s", w.name, relative(w.toHeld, "the last claim was created"))
	r.measure(ctx, wl, w, churn, failover, stop)
}

// measure runs the steady window, then churn and failover when asked.
func (r *runner) measure(ctx context.Context, wl *workload, w *workloadResult, churn, failover bool, stop func(string, error)) {
	if err := r.settle(ctx, wl); err != nil {
		stop("settling", err)
		return
	}
	s, err := r.steadyWindow(ctx, wl, w.short)
	if err != nil {
		stop("steady state", err)
		return
	}
	w.steady = &s
	logf("%s: steady: %.2f claim status writes per held claim per lease, %.2f lock writes per lock per lease, heap %s",
		w.name, s.claimStatusWrites, s.lockWrites, mib(s.mem.max.heap))
	if churn {
		c, err := r.churnWindow(ctx, wl, w.short)
		if err != nil {
			stop("churn", err)
			return
		}
		w.churn = &c
		logf("%s: churn: %.0f handoffs/s, %s", w.name, c.perSec(), c.latency.cell())
		if err := r.quiesce(ctx, wl); err != nil {
			stop("after churn", err)
			return
		}
	}
	if failover {
		f, err := r.failoverPhase(ctx, wl)
		if f != nil {
			w.failover = f
		}
		if err != nil {
			stop("failover", err)
			return
		}
		logf("%s: failover: new leader after %s, held claims renewed after %s, drained after %s, %d holds lost",
			w.name, dur(f.newLeader), dur(f.resumed), dur(f.drain), len(f.lost))
	}
}

// why says what may have stopped a workload: a manager that exited, and the leader's memory.
func (r *runner) why(ctx context.Context) string {
	s := ""
	if u := r.m.unexpectedExits(); len(u) > 0 {
		s += "; " + u[len(u)-1]
	}
	if l, err := r.m.leader(ctx); err == nil {
		if mem, err := r.m.memory(ctx, l); err == nil {
			s += fmt.Sprintf("; leader heap %s, RSS %s", mib(mem.heap), mib(mem.rss))
		}
	} else {
		s += "; " + err.Error()
	}
	return s
}

// podsWorkload runs Deployments of annotated pods, gated or not.
func (r *runner) podsWorkload(ctx context.Context, gated, churn, failover bool) {
	name, short := "pods, no scheduling gate", "pods, ungated"
	if gated {
		name, short = "pods, scheduling gate", "pods, gated"
	}
	locks, per := r.cfg.locks, r.cfg.podsPerLock
	ns := "scale-ungated"
	if gated {
		ns = "scale-gated"
	}
	name, short, ns = r.named(fmt.Sprintf("%s, %d locks × %d pods", name, locks, per), short, ns)
	w := &workloadResult{name: name, short: short, madeWhat: "pods"}
	r.res.workloads = append(r.res.workloads, w)
	if !gated && locks*per > r.podCapacity {
		w.stopped = fmt.Sprintf("skipped: %d ungated pods need places on nodes, which take %d (%d nodes); add nodes (NODES=)", locks*per, r.podCapacity, r.nodes)
		logf("%s: %s", w.name, w.stopped)
		return
	}
	logf("%s", w.name)
	wl, err := r.begin(ctx, ns, newTracker(locks, locks*per, locks*per), locks, true)
	if err != nil {
		r.fail(w, err)
		return
	}
	defer r.end(ctx, wl, w)
	stop := func(step string, err error) { r.fail(w, fmt.Errorf("%s: %w%s", step, err, r.why(ctx))) }
	if err := createLocks(ctx, r.c, ns, locks, r.lease); err != nil {
		stop("creating locks", err)
		return
	}
	if err := createDeployments(ctx, r.c, ns, locks, per, gated); err != nil {
		stop("creating Deployments", err)
		return
	}
	if err := wl.t.waitFor(ctx, r.cfg.bound, "every pod created", func(s snapshot) bool { return s.podsSeen >= locks*per }); err != nil {
		stop("creating pods", err)
		return
	}
	s := wl.t.snapshot()
	w.made, w.createSpan = locks*per, s.lastPodAt.Sub(s.firstPodAt)
	logf("%s: %d pods created in %s", w.name, w.made, dur(w.createSpan))
	if err := wl.t.waitFor(ctx, r.cfg.bound, "every lock held and every pod's claim created",
		func(s snapshot) bool { return s.heldLocks == locks && s.claimsSeen >= locks*per }); err != nil {
		stop("granting", err)
		return
	}
	s = wl.t.snapshot()
	w.toHeld, w.toClaims, w.hasClaimsTime = s.allHeldAt.Sub(s.lastPodAt), s.allClaimsAt.Sub(s.lastPodAt), true
	logf("%s: every lock held %s; every pod's claim created %s", w.name,
		relative(w.toHeld, "the last pod was created"), relative(w.toClaims, "the last pod was created"))
	r.measure(ctx, wl, w, churn, failover, stop)
}

// settle waits until every claim has had its first status written (the queue positions of the
// waiters, written right after creation) and the workload is quiet, so that the steady window
// counts only what held locks cost.
func (r *runner) settle(ctx context.Context, wl *workload) error {
	if err := wl.t.waitFor(ctx, r.cfg.bound, "every claim's first status", func(s snapshot) bool { return s.withStatus == s.claims }); err != nil {
		return err
	}
	return r.quiesce(ctx, wl)
}

// quiesceQuiet is how long no grant must be seen before a window counts as steady: longer than
// the manager holds back a lock's waiting count (5 s, waitingCountDelay in the lock engine), so
// that the counts of the last claims queued are written before the window, not counted in it as
// steady-state lock writes (a window that began 3 s after the last grant counted 0.3 to 0.6 lock
// writes per lock per lease, all of them those counts).
const quiesceQuiet = 6 * time.Second

// quiesce waits until every lock is held and no grant has been seen for quiesceQuiet: handoffs
// started before (the last ends of a churn) are over, and what the manager held back is written.
func (r *runner) quiesce(ctx context.Context, wl *workload) error {
	deadline := time.Now().Add(r.cfg.bound)
	for {
		before := wl.t.snapshot()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quiesceQuiet):
		}
		after := wl.t.snapshot()
		if after.grants == before.grants && after.heldLocks == wl.locks {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not quiet within %s: %d of %d locks held, %d grants in the last %s",
				r.cfg.bound, after.heldLocks, wl.locks, after.grants-before.grants, quiesceQuiet)
		}
	}
}

// steadyWindow counts the leader's requests, samples its memory and the Held claims past their
// expireTime, for -steady, with every lock held and nothing else happening.
func (r *runner) steadyWindow(ctx context.Context, wl *workload, label string) (steadyResult, error) {
	s := steadyResult{lease: r.lease, locks: wl.locks}
	leader, err := r.m.leader(ctx)
	if err != nil {
		return s, err
	}
	before, err := r.m.scrape(ctx, leader)
	if err != nil {
		return s, err
	}
	stopSampling := make(chan struct{})
	expired := sampleExpired(ctx, r.c, wl.t, wl.ns, r.cfg.sample, stopSampling)
	mem := sampleMemory(ctx, r.m, 2*time.Second, stopSampling)
	procs := r.watchedProcs(leader)
	cpu0 := proccpu.Take(procs)
	start := time.Now()
	select {
	case <-ctx.Done():
		close(stopSampling)
		return s, ctx.Err()
	case <-time.After(r.cfg.steady):
	}
	after, err := r.m.scrape(ctx, leader)
	s.window = time.Since(start)
	s.cpu = proccpu.Between(cpu0, proccpu.Take(procs), numCPU())
	close(stopSampling)
	s.expired, s.mem = <-expired, <-mem
	s.expired.log(label + ": steady")
	if err != nil {
		return s, fmt.Errorf("scraping the leader at the end of the window: %w", err)
	}
	if now, err := r.m.leader(ctx); err != nil || now != leader {
		s.note = "the leader changed during the steady window: its request counts cover only part of it"
	}
	s.held = len(wl.t.holders())
	if after.apiRequests().restartedSince(before.apiRequests()) {
		s.note = joinNote(s.note, "the leader's process restarted during the steady window: its request counts began again from zero, and none are given")
		return s, nil
	}
	s.requests = after.apiRequests().minus(before.apiRequests())
	s.conflicts = after.apiRequestsWithCode("409").minus(before.apiRequestsWithCode("409"))
	s.claimStatusWrites = perHeldPerLease(statusWrites(s.requests, claimsResource), s.held, s.window, s.lease)
	s.claimWrites = perHeldPerLease(s.requests.writesTo(claimsResource), s.held, s.window, s.lease)
	s.lockWrites = perHeldPerLease(s.requests.writesTo(locksResource), wl.locks, s.window, s.lease)
	if r.cfg.profileDir != "" {
		path := filepath.Join(r.cfg.profileDir, profileName(label, "heap"))
		if err := r.m.profile(ctx, leader, "heap", 0, path); err != nil {
			logf("heap profile: %v", err)
		} else {
			logf("heap profile of the leader at rest written to %s", path)
		}
	}
	return s, nil
}

const (
	claimsResource = "lockclaims.locks.lockwarden.io"
	locksResource  = "distributedlocks.locks.lockwarden.io"
)

// statusWrites sums the writes to a resource's status subresource.
func statusWrites(c apiCounts, resource string) float64 {
	var n float64
	for k, v := range c {
		if k.resource == resource && k.subresource == "status" && k.isWrite() {
			n += v
		}
	}
	return n
}

func profileName(label, kind string) string {
	b := []byte(label)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9') {
			b[i] = '-'
		}
	}
	return string(b) + "-" + kind + ".pb.gz"
}

// churnWindow ends every holder the moment its claim is seen Held (deleting the holder pod, or
// the detached claim), for -churn, and counts the grants.
func (r *runner) churnWindow(ctx context.Context, wl *workload, label string) (churnResult, error) {
	c := churnResult{window: r.cfg.churn}
	leader, err := r.m.leader(ctx)
	if err != nil {
		return c, err
	}
	before, err := r.m.scrape(ctx, leader)
	if err != nil {
		return c, err
	}
	grants := make(chan grant, 1<<16)
	e := newEnder(ctx, r.c, wl.ns, wl.t, 32)
	stopSampling := make(chan struct{})
	expired := sampleExpired(ctx, r.c, wl.t, wl.ns, r.cfg.sample, stopSampling)
	mem := sampleMemory(ctx, r.m, 2*time.Second, stopSampling)
	var profiled chan error
	if r.cfg.profileDir != "" {
		// The leader's and the API server's CPU profiles over the same seconds: what each spends
		// a handoff on, the API server's being what bounds the rate on this machine.
		profiled = make(chan error, 2)
		secs := max(1, min(30, int(r.cfg.churn.Seconds())-2))
		path := filepath.Join(r.cfg.profileDir, profileName(label, "cpu-churn"))
		apiPath := filepath.Join(r.cfg.profileDir, profileName(label, "apiserver-cpu-churn"))
		go func() {
			err := r.m.profile(ctx, leader, "profile", secs, path)
			if err == nil {
				logf("CPU profile of the leader under churn (%d s) written to %s", secs, path)
			}
			profiled <- err
		}()
		go func() {
			err := apiServerProfile(ctx, r.rc, secs, apiPath)
			if err == nil {
				logf("CPU profile of the API server under churn (%d s) written to %s", secs, apiPath)
			}
			profiled <- err
		}()
	}

	procs := r.watchedProcs(leader)
	cpu0 := proccpu.Take(procs)
	g0 := wl.t.snapshot().grants
	_, h0 := wl.t.handoffsSince(0)
	wl.t.notifyGrants(grants)
	start := time.Now()
	// A detached claim is ended only while another waits behind it, so that no queue runs dry
	// (pods come back: their Deployment replaces them).
	endable := func(h heldClaim) bool { return h.pod != "" || wl.t.hasWaiters(h.lock) }
	for _, h := range wl.t.holders() {
		if endable(h) {
			e.work <- h
		}
	}
	lastGrant := start
	deadline := time.After(r.cfg.churn)
loop:
	for {
		select {
		case g := <-grants:
			lastGrant = g.at
			if h := (heldClaim{claim: g.claim, lock: g.lock, pod: g.pod}); endable(h) {
				e.work <- h
			}
		case <-deadline:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	wl.t.notifyGrants(nil)
	go func() {
		for range grants { // a send that began before notifyGrants(nil) must not block the informer
		}
	}()
	c.handoffs = wl.t.snapshot().grants - g0
	c.elapsed = lastGrant.Sub(start)
	lat, _ := wl.t.handoffsSince(h0)
	c.latency = quantilesOf(lat)
	after, err := r.m.scrape(ctx, leader)
	c.cpu = proccpu.Between(cpu0, proccpu.Take(procs), numCPU())
	close(stopSampling)
	c.expired, c.mem = <-expired, <-mem
	c.expired.log(label + ": churn")
	restarted := err == nil && after.apiRequests().restartedSince(before.apiRequests())
	if restarted {
		// The counts began again from zero: a difference would be negative, or too small.
		c.note = joinNote(c.note, "the leader's process restarted during churn: its request counts are not given")
	}
	if err == nil && !restarted {
		c.requests = after.apiRequests().minus(before.apiRequests())
		c.conflicts = after.apiRequestsWithCode("409").minus(before.apiRequestsWithCode("409"))
	}
	var endErr error
	c.endErrors, endErr = e.close()
	if c.endErrors > 0 {
		c.note = fmt.Sprintf("%d deletes of holders failed (last: %v)", c.endErrors, endErr)
	}
	if now, err := r.m.leader(ctx); err != nil || now != leader {
		c.note = joinNote(c.note, "the leader changed during churn")
	}
	if profiled != nil {
		for range cap(profiled) {
			if err := <-profiled; err != nil {
				logf("CPU profile: %v", err)
			}
		}
	}
	if c.handoffs == 0 {
		return c, fmt.Errorf("no handoff at all in %s of churn", r.cfg.churn)
	}
	return c, ctx.Err()
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// failoverPhase kills the leader by its PID and, at the same moment, ends the holders of some
// locks; then it times the new leader (the election Lease's holderIdentity changes), every other
// held claim renewed by the new leader (status.renewTime after the kill, same token), and the
// ended holders' locks granted again; it counts the holds lost. It restarts the killed replica
// as the new standby.
func (r *runner) failoverPhase(ctx context.Context, wl *workload) (*failoverResult, error) {
	f := &failoverResult{signal: "SIG" + signalName(r.cfg.failoverSignal)}
	leader, err := r.m.leader(ctx)
	if err != nil {
		return nil, err
	}
	survivor := r.m.other(leader)
	holderBefore, err := electionHolder(ctx, r.c)
	if err != nil {
		return nil, fmt.Errorf("reading the leader election Lease: %w", err)
	}
	held := wl.t.holders()
	slices.SortFunc(held, func(a, b heldClaim) int {
		switch {
		case a.lock < b.lock:
			return -1
		case a.lock > b.lock:
			return 1
		}
		return 0
	})
	// The holders ended at the kill: the first of the locks that have a claim waiting (pods
	// always do, soon: their Deployment replaces them).
	var ended, kept []heldClaim
	var endedLocks []string
	for _, h := range held {
		if len(ended) < r.cfg.failoverDeletes && (h.pod != "" || wl.t.hasWaiters(h.lock)) {
			ended, endedLocks = append(ended, h), append(endedLocks, h.lock)
		} else {
			kept = append(kept, h)
		}
	}
	k := len(ended)
	f.held, f.deleted = len(held), k
	stopSampling := make(chan struct{})
	expired := sampleExpired(ctx, r.c, wl.t, wl.ns, r.cfg.sample, stopSampling)
	losses0 := wl.t.snapshot().losses

	pid := leader.p.PID()
	f.killed = fmt.Sprintf("replica %s, pid %d, Lease holder %s", leader.name, pid, holderBefore)
	logf("failover: killing the leader, manager %s (pid %d, election Lease holder %s), with SIG%s; ending %d holders",
		leader.name, pid, holderBefore, signalName(r.cfg.failoverSignal), k)
	t0 := time.Now()
	if err := r.m.kill(leader, r.cfg.failoverSignal); err != nil {
		close(stopSampling)
		<-expired
		return f, fmt.Errorf("killing manager %s (pid %d): %w", leader.name, pid, err)
	}
	e := newEnder(ctx, r.c, wl.ns, wl.t, 32)
	for _, h := range ended {
		e.work <- h
	}
	deadline := time.Now().Add(r.cfg.bound)
	for !(f.leaderOK && f.resumeOK && f.drainOK) && time.Now().Before(deadline) && ctx.Err() == nil {
		now := time.Now()
		if !f.leaderOK {
			if h, err := electionHolder(ctx, r.c); err == nil && h != "" && h != holderBefore {
				f.leaderOK, f.newLeader = true, now.Sub(t0)
				f.survivor = fmt.Sprintf("replica %s, pid %d, Lease holder %s", survivor.name, survivor.p.PID(), h)
			}
		}
		if !f.resumeOK {
			if renewed, gone := wl.t.renewedAfter(kept, t0); renewed+gone == len(kept) {
				f.resumeOK, f.resumed = true, now.Sub(t0)
			}
		}
		if !f.drainOK && wl.t.grantedAfter(endedLocks, t0) == len(endedLocks) && wl.t.snapshot().heldLocks == wl.locks {
			f.drainOK, f.drain = true, now.Sub(t0)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A hold that runs out after the queues drained (a renewal the new leader left too late)
	// still belongs to the failover: keep watching for one lease.
	select {
	case <-ctx.Done():
	case <-time.After(r.lease):
	}
	close(stopSampling)
	f.expired = <-expired
	f.expired.log(wl.ns + ": failover")
	if n, err := e.close(); n > 0 {
		f.note = fmt.Sprintf("%d deletes of holders failed (last: %v)", n, err)
	}
	f.lost = wl.t.lossesSince(losses0)
	if l, err := r.m.leader(ctx); err != nil || l != survivor {
		f.note = joinNote(f.note, fmt.Sprintf("the survivor, manager %s, does not report itself leader", survivor.name))
	}
	logf("failover: restarting manager %s as the standby", leader.name)
	if err := r.m.restart(ctx, leader); err != nil {
		return f, err
	}
	if _, err := r.m.waitLeader(ctx, time.Minute); err != nil {
		return f, err
	}
	switch {
	case !f.leaderOK:
		return f, fmt.Errorf("no new leader within %s of killing the leader", r.cfg.bound)
	case !f.drainOK:
		return f, fmt.Errorf("the locks whose holders were ended at the kill were not all granted again within %s", r.cfg.bound)
	}
	return f, nil
}

// relative says "<d> after <event>", or before when d is negative.
func relative(d time.Duration, event string) string {
	if d < 0 {
		return dur(-d) + " before " + event
	}
	return dur(d) + " after " + event
}
