//go:build reliability

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

package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"

	"github.com/lockwarden/lockwarden/internal/testutil/faultproxy"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

// locks is how many locks a run creates (lock-0, lock-1).
const locks = 2

// run is one scenario's run: what its phases share. Each group of fields is set by the phase
// named above it and read by the phases after it.
type run struct {
	t    *testing.T
	e    *env     // the API server and the manager binary
	srv  *servers // the backend servers, shared by the scenarios
	s    scenario
	seed uint64 // the scenario's seed: its fault plan and its claimants' choices

	// newRun
	ttl     time.Duration // the locks' lease
	plan    []fault
	started time.Time // the times of the fault plan count from here
	ctx     context.Context
	cancel  context.CancelFunc

	// startRun
	auditFrom     int64  // where the run's part of the API server's audit log begins
	ns            string // the run's namespace
	backendRef    string // its LockBackend ("" for the built-in backend)
	be            backendEnv
	managers      []*manager           // the replicas, in start order
	resources     map[string]*resource // each lock's fenced resource, by namespace/name
	obs           *observer            // what the backend showed of each lock, over time
	stopObserving context.CancelFunc

	// errMu guards harnessErrs, what went wrong in the harness itself (errf), logged at the end.
	errMu       sync.Mutex
	harnessErrs []string

	// startWorkload
	outside           *outsideClient // the client outside lockwarden, if the scenario has one
	rec               *recorder      // the claims' history, from the API
	smp               *sampler       // Held claims against the backend, and API snapshots
	stopSampling      context.CancelFunc
	stopNew, draining chan struct{}    // closed when the workload stops, and at the drain deadline
	claimants         sync.WaitGroup   // the running claimants
	zombies           atomic.Int64     // holds whose claimant wrote on after its claim ended
	slowHolders       []chan struct{}  // closed when each pinned claimant (claimant 0 of a lock) began to hold
	roles             *roleWatch       // the pods' role labels and the locks' records (standby and gated runs)
	admissions        *admissionLog    // what the gated pods read when scheduled, or the init containers' token files
	inits             *initContainers  // the lockctl acquire init containers (lockctl-acquire runs)
	jobs              *jobWatch        // the Jobs, resumed and ended (jobs runs)
	commands          *commandLog      // the lockctl holders' runs (commands runs)
	decksMu           sync.Mutex       // guards decks
	decks             map[int]*endDeck // how each lock's Jobs end, by lock number (jobs runs)

	// injectFaults
	grantsBeforeFault int         // grants seen just before the first fault (locks if there was none)
	recreated         *recreation // the lock-recreate fault, if one ran
	faults            faultsRun

	// drain and findOrphans
	grants        []Grant   // every claim's history at the drain deadline, but the re-entries'
	reentries     []Grant   // the re-entries' claims' histories (reentry runs)
	observedUntil time.Time // when the observer stopped
	orphaned      []string  // backend keys that outlived their claims
}

// runScenario runs one scenario with seed: it starts the managers and the locks, runs the workload
// while it injects the faults, drains, tears down, and checks what it recorded.
func runScenario(t *testing.T, e *env, srv *servers, s scenario, seed uint64) Result {
	r := newRun(t, e, srv, s, seed)
	defer r.stop()
	r.startRun()
	r.startWorkload()
	r.injectFaults()
	r.drain()
	r.findOrphans()
	r.teardown()
	return r.check()
}

// newRun plans the scenario's faults from seed, logs the plan and starts the run's clock and
// context.
func newRun(t *testing.T, e *env, srv *servers, s scenario, seed uint64) *run {
	r := &run{t: t, e: e, srv: srv, s: s, seed: seed, ttl: s.lockTTL()}
	rng := rand.New(rand.NewPCG(seed, 0x10c4))
	r.plan = s.plan(rng)
	t.Logf("scenario %s seed %d replicas %d ttl %s faults %s", s.id(), seed, s.replicas, r.ttl, strings.Join(planText(s, r.plan), ", "))
	r.started = time.Now()
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// planText describes the fault plan for the log.
func planText(s scenario, plan []fault) []string {
	var planText []string
	for i, f := range plan {
		switch {
		case i == 0 && s.killBeforeRefresh:
			planText = append(planText, fmt.Sprintf("%s@before-refresh/%s", f.kind, f.dur.Round(time.Second)))
		case i == 0 && s.staleWriter:
			// Injected when the slow holders began, not at a planned time.
			planText = append(planText, fmt.Sprintf("%s@slow-holders/%s", f.kind, f.dur.Round(time.Second)))
		default:
			planText = append(planText, f.String())
		}
	}
	if len(planText) == 0 {
		planText = []string{"none"}
	}
	return planText
}

// stop shuts the managers down, then cancels the run's context. runScenario defers it, so that
// it runs when a phase fails too.
func (r *run) stop() {
	for _, m := range r.managers {
		m.shutdown()
	}
	r.cancel()
}

// startRun creates the namespace and the backend, starts the managers and waits for a leader,
// then creates the locks.
func (r *run) startRun() {
	t, e, s := r.t, r.e, r.s
	r.auditFrom = fileSize(e.audit)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rel-"}}
	if err := e.c.Create(r.ctx, ns); err != nil {
		t.Fatal(err)
	}
	r.ns = ns.Name
	if err := rbacenv.AllowClaims(r.ctx, e.c, r.ns); err != nil { // gated and standby pods ask by annotation
		t.Fatal(err)
	}
	r.backendRef, r.be = setupBackend(r.ctx, t, e, r.srv, s, r.ns)
	r.be.reader = identityReader{r.be.reader}

	var managers []*manager
	for i := range s.replicas {
		managers = append(managers, e.startManager(t, fmt.Sprintf("%s-manager-%d", r.ns, i), strings.Join(s.mutants(), ",")))
	}
	r.managers = managers
	if _, err := waitLeader(r.ctx, r.managers, 60*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, managerLogs(r.managers))
	}
	r.createLocks()
}

// lockSpec is the run's lock named name, as the scenario configures it.
func (r *run) lockSpec(name string) *locksv1alpha1.DistributedLock {
	s := r.s
	l := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name},
		Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: int32(r.ttl / time.Second),
			LockDelaySeconds: int32(s.lockDelay / time.Second), LossPolicy: s.lossPolicy, MaxHolders: s.lockPlaces(),
			BackendRef: locksv1alpha1.BackendReference{Name: r.backendRef}}}
	if s.standby {
		loss := int32(standbyNodeLoss / time.Second)
		l.Spec.HolderNodeLossSeconds = &loss
	}
	return l
}

// createLocks starts the observer and creates the locks, each with a fenced resource and
// observed on the backend.
func (r *run) createLocks() {
	s := r.s
	r.resources = map[string]*resource{}
	var etcdWatch *clientv3.Client
	if s.backend == "etcd" {
		etcdWatch = r.srv.etcdClient
	}
	r.obs = newObserver(r.be.reader, etcdWatch)
	r.obs.places = int(s.lockPlaces())
	if s.backend == "zookeeper" {
		r.obs.zk = r.srv.zkConn
	}
	observeCtx, stopObserving := context.WithCancel(r.ctx)
	r.stopObserving = stopObserving
	if s.backend == "kubernetes" {
		go r.obs.watchRecords(observeCtx, r.e.registryReader())
	}
	for l := range locks {
		name := fmt.Sprintf("lock-%d", l)
		if err := r.e.c.Create(r.ctx, r.lockSpec(name)); err != nil {
			r.t.Fatal(err)
		}
		r.resources[r.ns+"/"+name] = &resource{}
		r.obs.watch(observeCtx, r.ns+"/"+name, "lockwarden/"+r.ns+"/"+name)
	}
}

// errf records an error of the harness itself; the run logs them at the end.
func (r *run) errf(format string, args ...any) {
	r.errMu.Lock()
	r.harnessErrs = append(r.harnessErrs, fmt.Sprintf(format, args...))
	r.errMu.Unlock()
}

// startWorkload starts the outside holder, the recorder, the sampler and the claimants.
func (r *run) startWorkload() {
	// A client outside lockwarden takes lock-0's key before any claim exists.
	if r.s.outsideHolder {
		r.outside = holdOutside(r.ctx, r.srv.redisClient, "lockwarden/"+r.ns+"/lock-0", 2*r.ttl)
	}

	r.rec = newRecorder()
	r.rec.adopt = r.s.commands
	if r.s.restartsAPIServer() {
		go r.rec.runFromRegistry(r.ctx, r.e.registry, r.ns)
	} else {
		go r.rec.run(r.ctx, r.e.c, r.ns)
	}
	if r.s.standby || r.s.gated {
		r.createNodes()
		r.roles = watchRoles(r.ctx, r.e.c, r.ns)
	}
	if r.s.gated {
		r.admissions = &admissionLog{}
		if err := r.e.startScheduler(); err != nil {
			r.t.Fatal(err)
		}
	}
	if r.s.initAcquire {
		r.admissions = &admissionLog{}
		var err error
		if r.inits, err = r.newInitContainers(); err != nil {
			r.t.Fatal(err)
		}
	}
	if r.s.jobs {
		r.jobs = watchJobs(r.ctx, r.e.c, r.ns)
	}
	r.smp = &sampler{c: r.e.c, ns: r.ns, reader: r.be.reader, period: samplePeriod}
	sampleCtx, stopSampling := context.WithCancel(r.ctx)
	r.stopSampling = stopSampling
	go r.smp.run(sampleCtx)

	r.stopNew, r.draining = make(chan struct{}), make(chan struct{})
	if r.s.commands {
		r.commands = &commandLog{live: map[*commandClaimant]*liveCommand{}}
		if err := r.installHolderRBAC(holderRBAC, holderAccount(r.ns)); err != nil {
			r.t.Fatal(err)
		}
	}
	for l := range locks {
		lock := fmt.Sprintf("lock-%d", l)
		for i := range r.s.claimantsPerLock() {
			cl := r.newClaimant(l, lock, i)
			run := cl.run
			if r.s.jobs {
				run = r.jobClaimant(cl, l).run
			}
			if r.s.commands {
				cc, err := r.newCommandClaimant(cl)
				if err != nil {
					r.t.Fatal(err)
				}
				run = cc.run
			}
			r.claimants.Add(1)
			go func() { defer r.claimants.Done(); run(r.ctx) }()
		}
	}
}

// newClaimant is claimant i of lock number l, named lock.
func (r *run) newClaimant(l int, lock string, i int) *claimant {
	s, ttl := r.s, r.ttl
	cl := &claimant{c: r.e.c, rec: r.rec, ns: r.ns, lock: lock, id: i, res: r.resources[r.ns+"/"+lock],
		rng: rand.New(rand.NewPCG(r.seed, uint64(l*100+i))), ttl: ttl, writes: 5,
		stopNew: r.stopNew, drain: r.draining, silentDeathDetection: ttl / 2, errs: r.errf, zombies: &r.zombies,
		ends: s.ends, keepEnded: s.keepEnded, awaitEviction: s.lossPolicy == locksv1alpha1.LossPolicyEvict,
		mode: locksv1alpha1.LockModeShared, alone: s.lockPlaces() == 1}
	if s.standby {
		cl.node, cl.rotateEnds, cl.ends = nodeName(r.ns, lock, i), true, s.standbyEnds()
	}
	cl.reenter = s.reentry
	if s.gated {
		cl.gated, cl.admitted, cl.rotateEnds, cl.ends = true, r.admissions.add, true, s.gatedEnds()
	}
	if s.initAcquire {
		cl.initContainer = func(ctx context.Context, pod *corev1.Pod) (int64, bool) { return r.inits.acquire(ctx, cl, pod) }
		cl.admitted, cl.rotateEnds, cl.ends = r.admissions.add, true, s.gatedEnds()
	}
	if s.exclusiveClaimant(i) {
		cl.mode, cl.alone = locksv1alpha1.LockModeExclusive, true
	}
	if s.severalLocks && i == 0 {
		// Lock l and the next, in that order: the claimants of lock-0 and lock-1 name the two in
		// opposite orders.
		cl.several = []string{lock, fmt.Sprintf("lock-%d", (l+1)%locks)}
		cl.resOf = func(name string) *resource { return r.resources[r.ns+"/"+name] }
	}
	if (s.staleWriter || s.longHold > 0) && i == 0 {
		cl.pinned = make(chan struct{})
		r.slowHolders = append(r.slowHolders, cl.pinned)
	}
	if s.outsideHolder && l == 0 && i == s.claimantsPerLock()-1 {
		cl.giveUpAfter = ttl / 2 // gives up behind the outside holder, once
	}
	return cl
}

// injectFaults runs the fault plan and counts the grants before the first fault.
func (r *run) injectFaults() {
	// Faults, in plan order, each healed before the next.
	fc := faultContext{t: r.t, ttl: r.s.lockTTL(), started: r.started, managers: r.managers, srv: r.srv, be: r.be, rec: r.rec, audit: r.e.audit, auditFrom: r.auditFrom, controlPlane: r.e,
		beforeFirst: func() {
			for _, g := range r.rec.results() {
				if !g.Acquired.IsZero() {
					r.grantsBeforeFault++
				}
			}
		}}
	if r.s.staleWriter || r.s.longHold > 0 {
		// The fault must find the pinned holders holding: a stale writer's partition cuts them
		// off, and a long hold must live through the fault (a leader's death, for the
		// resume-lapsed mutant) for what happens to it there to be seen.
		fc.trigger = r.slowHoldersBegan
	}
	if r.s.killBeforeRefresh {
		fc.trigger = r.beforeRefresh
	}
	fc.partitionHolder = r.partitionHolder
	fc.recreate = func(dur time.Duration) string {
		r.recreated = recreateLock(r.ctx, r.e.c, r.lockSpec("lock-0"), dur)
		return fmt.Sprintf("lock-0 deleted (last token %d) and re-created at %.1fs", r.recreated.floor, r.recreated.createdAt.Sub(r.started).Seconds())
	}
	r.faults = runFaults(fc, r.plan)
	if len(r.plan) == 0 {
		r.grantsBeforeFault = locks
	}
}

// slowHoldersBegan is the trigger of a stale-writer or long-hold run: it waits (at most a minute) until every
// slow holder began holding, then for a write or two.
func (r *run) slowHoldersBegan() bool {
	deadline := time.After(60 * time.Second)
	for _, ch := range r.slowHolders {
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
	time.Sleep(r.ttl / 5) // a write or two first
	return true
}

// beforeRefresh is the trigger of a killBeforeRefresh run: from the first fault's planned time,
// it waits (at most 2×TTL) until a Held claim is about to be refreshed.
func (r *run) beforeRefresh() bool {
	ttl := r.ttl
	time.Sleep(time.Until(r.started.Add(r.plan[0].start))) // the planned time, then the right moment
	deadline := time.Now().Add(2 * ttl)
	for time.Now().Before(deadline) {
		var list locksv1alpha1.LockClaimList
		if err := r.e.c.List(r.ctx, &list, client.InNamespace(r.ns)); err == nil {
			for _, cl := range list.Items {
				if cl.Status.Phase != locksv1alpha1.ClaimHeld || cl.Status.ExpireTime == nil {
					continue
				}
				// An eighth of the TTL: the controller's refresh margin (refreshMargin).
				if ahead := time.Until(cl.Status.ExpireTime.Time); ahead > ttl/8+200*time.Millisecond && ahead < ttl/8+time.Second {
					return true
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// drain stops new claims when the workload ends, bounds every wait at the drain deadline, waits
// for the claimants, and stops the recorder's readers: the sampler and the observer.
func (r *run) drain() {
	ttl := r.ttl
	// The workload runs for s.workload, and at least until the last fault healed (as it
	// happened, see below) plus 2×TTL; then nothing new starts and the queue drains. Waits end
	// at the drain deadline: the convergence window (2×TTL), plus the longest critical section,
	// plus a leader-election lease when a fault hit a manager.
	hitManager := false
	for _, f := range r.plan {
		hitManager = hitManager || hitsManagers(f.kind)
	}
	healed := time.Since(r.started)
	workload := max(r.s.workload, healed+2*ttl)
	drainAfter := workload + 2*ttl + 2*ttl
	if hitManager {
		drainAfter += leLease
	}
	time.AfterFunc(workload-healed, func() { close(r.stopNew) })
	time.AfterFunc(drainAfter-healed, func() { close(r.draining) })

	// Every claimant finished, or gave up waiting at the drain deadline; Pending now is still
	// waiting after it.
	r.claimants.Wait()
	r.grants, r.reentries = splitReentries(r.rec.results())
	r.stopSampling()
	r.observedUntil = time.Now()
	r.stopObserving()
	if r.roles != nil {
		r.roles.results() // stops the role watch; checkRoles reads what it saw
	}
	if r.jobs != nil {
		r.jobs.results() // stops the Job watch; checkJobs reads what it saw
	}
}

// findOrphans lists the backend keys that outlived their claims.
func (r *run) findOrphans() {
	// No backend key may outlive its claim: after a TTL (and a margin) every key still held must
	// belong to a claim the API shows Held.
	time.Sleep(r.ttl + sampleMargin)
	orphaned, orphanErr := orphans(r.ctx, r.e.c, r.be.reader, r.ns)
	if orphanErr != nil {
		r.errf("listing backend keys: %v", orphanErr)
	}
	if r.outside != nil {
		orphaned = slices.DeleteFunc(orphaned, func(o string) bool { return strings.Contains(o, outsideIdentity) })
	}
	r.orphaned = orphaned
}

// teardown deletes the run's claims and pods, waits (at most 30 s) for the claims to go, and
// cancels the run's context.
func (r *run) teardown() {
	ctx, c, ns := r.ctx, r.e.c, r.ns
	// Teardown: Jobs (first, so that none asks for a claim again), claims and pods go; the
	// finalizers need a manager, so wait for them.
	if r.s.jobs {
		_ = c.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))
	}
	_ = c.DeleteAllOf(ctx, &locksv1alpha1.LockClaim{}, client.InNamespace(ns))
	_ = c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
	if r.s.standby || r.s.gated {
		r.deleteNodes()
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var left locksv1alpha1.LockClaimList
		if err := c.List(ctx, &left, client.InNamespace(ns)); err == nil && len(left.Items) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.cancel()
}

// check runs every checker over what the run recorded, logs what the run saw, and returns its
// result.
func (r *run) check() Result {
	// Checks.
	res := r.newResult()
	writes := r.checkWrites(&res)
	r.checkGrants(&res)
	samples, timelines := r.checkBackend(&res)
	r.checkScenario(&res)
	r.checkLinearizable(&res, writes)
	res.Liveness = ComputeLiveness(r.grants)
	res.Lost = res.Liveness.Lost
	res.Duration = time.Since(r.started)

	r.logRun(res, samples, timelines)
	return res
}

// newResult is the run's result before the checkers ran: what ran, and what the scenario
// requires.
func (r *run) newResult() Result {
	s := r.s
	res := Result{Scenario: s.name, Backend: s.backend, Seed: r.seed, Faults: strings.Join(r.faults.ran, ", "), TTL: r.ttl,
		FencingRequired: s.staleWriter, NoLossRequired: s.noLoss, Orphans: r.orphaned,
		// A commands run's holds end without a release only when its dice kill a holder or its
		// fault cuts one off: the delay is checked there, but not required.
		LockDelayRequired: s.lockDelay > 0 && !s.jobs && !s.commands, EvictionRequired: s.lossPolicy == locksv1alpha1.LossPolicyEvict,
		LongHoldRequired: s.longHold, LongestHold: LongestHold(r.grants), PlacesRequired: s.lockPlaces() > 1,
		HolderLabelsRequired: s.standby || s.gated, GatesRequired: s.gated, ReentryRequired: s.reentry, InitsRequired: s.initAcquire, JobsRequired: s.jobs, JobHandoffsRequired: s.jobs && len(s.kinds) == 0,
		CommandsRequired: s.commands, CommandStopRequired: slices.Contains(s.kinds, faultHolderPartition) || slices.Contains(s.kinds, faultHolderDeaf),
		CommandCutOffRequired: slices.Contains(s.kinds, faultHolderMute),
		FaultsSkipped:         r.faults.skipped}
	if s.standby && slices.Contains(s.standbyEnds(), EndNodeLoss) {
		// A node lost under a holder that goes on writing: its later writes must be refused.
		res.FencingRequired = true
	}
	if res.Faults == "" {
		res.Faults = "none"
	}
	if s.outsideHolder {
		res.Faults = "outside holder 2×TTL"
	}
	res.Valid = r.grantsBeforeFault >= locks // a fault injected into an idle system proves nothing
	return res
}

// checkWrites checks each lock's fenced register and classifies its stale writes; it returns
// each lock's writes.
func (r *run) checkWrites(res *Result) map[string][]Write {
	writes := map[string][]Write{}
	for lock, rs := range r.resources {
		log := rs.fenced.Log()
		writes[lock] = log
		for _, w := range log {
			res.Writes++
			if !w.Accepted {
				res.Rejected++
			}
		}
		res.Violations = append(res.Violations, findings("register", prefixed(lock, CheckRegisterLog(log)))...)
		st := ClassifyWrites(lock, r.grants, log)
		res.Stale.Rejected += st.Rejected
		res.Stale.InWindow += st.InWindow
		res.Stale.AfterNewer += st.AfterNewer
		res.Stale.HolderRejected += st.HolderRejected
		if st.AfterNewer > 0 {
			res.Violations = append(res.Violations, Finding{"stale-window", fmt.Sprintf("%s: %d stale writes accepted after the register had seen a newer token", lock, st.AfterNewer)})
		}
		if st.HolderRejected > 0 {
			res.Violations = append(res.Violations, Finding{"stale-window", fmt.Sprintf("%s: %d writes of a current holder rejected (a newer token reached the resource during its hold)", lock, st.HolderRejected)})
		}
		_, stale, overlaps := rs.shadow.Counts()
		res.ShadowStale += stale
		res.ShadowOverlaps += overlaps
	}
	return writes
}

// placesOf is the number of places of each of the run's locks.
func (r *run) placesOf(string) int { return int(r.s.lockPlaces()) }

// checkGrants checks the grants the recorder saw: tokens, exclusion (or places), and that a
// final phase stays final.
func (r *run) checkGrants(res *Result) {
	grants := r.grants
	for _, g := range grants {
		if !g.Acquired.IsZero() {
			res.Grants++
		}
	}
	res.Violations = append(res.Violations, findings("tokens", CheckTokens(grants))...)
	if r.s.lockPlaces() > 1 {
		res.Violations = append(res.Violations, findings("places", CheckPlaces(grants, r.placesOf))...)
	} else {
		res.Violations = append(res.Violations, findings("exclusion", CheckExclusion(grants))...)
	}
	res.Violations = append(res.Violations, findings("final-is-final", CheckFinalIsFinal(grants))...)
}

// checkBackend checks the sampler's Held samples and API snapshots, and the observer's backend
// timelines, against the grants; it returns the samples and the timelines.
func (r *run) checkBackend(res *Result) ([]HeldSample, []KeyTimeline) {
	samples, snapshots := r.smp.results()
	res.HeldSamples = len(samples)
	for _, smp := range samples {
		if smp.Backend.Known && slices.Contains(smp.Backend.Places, smp.Identity) {
			res.PlaceSamples++
		}
	}
	res.Violations = append(res.Violations, findings("phantom", CheckBackendSamples(samples, sampleMargin, r.ttl/3+time.Second))...)
	res.Violations = append(res.Violations, findings("api-snapshot", CheckControllerExclusion(snapshots, sampleMargin, r.placesOf))...)
	timelines := r.obs.results(r.observedUntil)
	for _, tl := range timelines {
		res.ViewStates += len(tl.States)
	}
	view := CheckBackendView(timelines, r.grants, ViewGrace)
	res.Violations = append(res.Violations, findings("backend-view", view.Violations)...)
	res.ViewAllowed, res.ViewLongest = view.Allowed, view.Longest
	res.Violations = append(res.Violations, findings("lapse", CheckNoResumedLapse(timelines, r.grants, LapseGap))...)
	return samples, timelines
}

// checkScenario runs the checkers that the scenario's faults and settings turn on (a deposed
// leader, a lock delay, eviction, an outside holder, a re-created lock), and adds the recorder's
// own findings.
func (r *run) checkScenario(res *Result) {
	s, grants, ns := r.s, r.grants, r.ns
	res.Violations = append(res.Violations, findings("deposed-leader", r.faults.deposed)...)
	if s.lockDelay > 0 && !s.jobs {
		// Jobs runs judge the delay from the recorded history instead (checkJobs).
		delay := CheckLockDelay(grants, s.lockDelay)
		res.Violations = append(res.Violations, findings("lock-delay", delay.Violations)...)
		res.DelayedGrants = delay.Checked
		if s.lockPlaces() == 1 {
			// The same by the API server's clock, for the holds whose pod the harness ended.
			writes, err := ReadAuditLog(r.e.audit, r.auditFrom)
			if err != nil {
				r.errf("%v", err)
			}
			audited := CheckLockDelayAudited(grants, writes, s.lockDelay)
			res.Violations = append(res.Violations, findings("lock-delay", audited.Violations)...)
			r.faults.log = append(r.faults.log, fmt.Sprintf("lock delay by the API server's clock: %d grants judged after a pod the harness ended", audited.Checked))
		}
	}
	if s.lossPolicy == locksv1alpha1.LossPolicyEvict {
		res.Violations = append(res.Violations, findings("evicted", CheckEvicted(grants, evictionBound))...)
		// Which pods were evicted, by the API server's account.
		writes, err := ReadAuditLog(r.e.audit, r.auditFrom)
		if err != nil {
			r.errf("%v", err)
		}
		res.Violations = append(res.Violations, findings("evicted", CheckEvictionTargets(grants, writes, evictionBound))...)
		for _, g := range grants {
			if g.Lost && !earliest(g.Evicted, g.PodGone).IsZero() {
				res.Evictions++
			}
		}
	}
	if r.outside != nil {
		res.Violations = append(res.Violations, findings("outside-holder", r.outside.problems())...)
	}
	if recreated := r.recreated; recreated != nil {
		res.Violations = append(res.Violations, findings("token-floor", CheckTokensAbove(grants, ns+"/"+recreated.lock, recreated.createdAt, recreated.floor))...)
		for _, g := range grants {
			if g.Lock == ns+"/"+recreated.lock && g.Reason == string(locksv1alpha1.ReasonLockNotFound) {
				recreated.failed++
			}
		}
		r.faults.log = append(r.faults.log, fmt.Sprintf("%d claims of %s ended with reason LockNotFound", recreated.failed, recreated.lock))
	}
	if r.roles != nil {
		r.checkRoles(res)
	}
	if r.inits != nil {
		r.inits.check(r, res)
	}
	if r.s.reentry {
		v, joined := CheckReentries(r.reentries, r.grants)
		res.Reentries = joined
		res.Violations = append(res.Violations, findings("reentry", v)...)
		r.t.Logf("re-entries: %d made, %d joined their hold", len(r.reentries), joined)
	}
	if r.jobs != nil {
		r.checkJobs(res)
	}
	if r.commands != nil {
		r.checkCommands(res)
	}
	r.rec.mu.Lock()
	res.Violations = append(res.Violations, findings("history", r.rec.errs)...)
	if r.s.severalLocks {
		// The run proves nothing of several locks unless some claim held them together.
		held := 0
		for _, rec := range r.rec.grants {
			if len(rec.locks) > 0 && !rec.g.Acquired.IsZero() {
				held++
			}
		}
		r.t.Logf("claims of several locks granted: %d", held)
		if held == 0 {
			res.Violations = append(res.Violations, Finding{"several-locks", "no claim of several locks was granted"})
		}
	}
	r.rec.mu.Unlock()
	for _, m := range r.managers {
		res.Violations = append(res.Violations, findings("rbac", prefixed(m.name, RBACRefusals(m.logSince(0), managerAccount.User(), r.faults.startups)))...)
	}
}

// checkLinearizable checks the history with porcupine, leaving its visualization in the
// temporary directory.
func (r *run) checkLinearizable(res *Result, writes map[string][]Write) {
	html := filepath.Join(os.TempDir(), fmt.Sprintf("lockwarden-reliability-%s-%s-%d.html", r.s.backend, r.s.name, r.seed))
	// The fenced-mutex model covers the holds that hold alone (all of them on a mutex).
	lin, err := CheckLinearizable(Operations(r.started, holdsAlone(r.grants), writes), 5*time.Minute, html)
	if err != nil {
		r.t.Errorf("porcupine visualization: %v", err)
	}
	res.Linearizable = string(lin)
	if lin != "Ok" {
		r.t.Logf("porcupine: %s; history at %s", lin, html)
	}
}

// logRun logs what the run saw: harness errors, the faults, the figures, the managers, and the
// grants and losses of a run that failed.
func (r *run) logRun(res Result, samples []HeldSample, timelines []KeyTimeline) {
	t, s := r.t, r.s
	r.errMu.Lock()
	for _, h := range r.harnessErrs {
		t.Logf("harness: %s", h)
	}
	r.errMu.Unlock()
	for _, l := range r.faults.log {
		t.Logf("fault: %s", l)
	}
	if s.longHold > 0 {
		t.Logf("longest hold that was not lost %s (required %s)", res.LongestHold.Round(time.Second), s.longHold)
	}
	if (s.lockDelay > 0 && !s.jobs) || s.lossPolicy != "" {
		t.Logf("grants after a hold that ended without a release %d (lock delay %s), lost holds whose pod was evicted %d of %d",
			res.DelayedGrants, s.lockDelay, res.Evictions, res.Liveness.Lost)
	}
	t.Logf("writes %d, rejected by fencing %d, stale in the window %d, stale at the shadow %d, zombie holders %d, lost holds %d, held samples %d, backend states %d, mismatches within grace %d (longest %s)",
		res.Writes, res.Rejected, res.Stale.InWindow, res.ShadowStale, r.zombies.Load(), res.Lost, res.HeldSamples, res.ViewStates, res.ViewAllowed, res.ViewLongest)
	if s.lockPlaces() > 1 {
		r.logPlaces(res, samples, timelines)
	}
	for _, m := range r.managers {
		t.Logf("manager %s restarts %d, log %s", m.name, m.restarts, m.log)
	}
	if !res.Passed() && s.mutant == "" {
		t.Logf("grants:\n%s\n%s", describeGrants(r.grants), managerLogs(r.managers))
		for _, g := range r.grants {
			if g.Lost {
				t.Logf("lost: %s", describeLoss(g, samples))
			}
		}
	}
}

// logPlaces logs what the store views saw of the places of a shared lock.
func (r *run) logPlaces(res Result, samples []HeldSample, timelines []KeyTimeline) {
	// What the store views saw of the places: a view that never saw one would let the
	// backend checks pass on nothing.
	unknown, withPlaces := 0, 0
	for _, smp := range samples {
		if !smp.Backend.Known {
			unknown++
		}
	}
	for _, tl := range timelines {
		for _, st := range tl.States {
			if len(st.Places) > 0 {
				withPlaces++
			}
		}
	}
	r.t.Logf("held samples whose identity held a place %d of %d (backend unreadable in %d), backend states with places %d",
		res.PlaceSamples, len(samples), unknown, withPlaces)
}

// backendEnv is one scenario's lock store: the proxy the managers reach it through (nil for the
// built-in backend, which lives behind each manager's API link; for Redlock, nodeProxies has one
// per node) and the harness's direct reader.
type backendEnv struct {
	proxy       *faultproxy.Proxy
	nodeProxies []*faultproxy.Proxy
	reader      backendReader
}

// setupBackend creates the scenario's LockBackend (named after its namespace) behind a fresh
// fault proxy, and returns its name ("" for the built-in backend).
func setupBackend(ctx context.Context, t *testing.T, e *env, srv *servers, s scenario, ns string) (string, backendEnv) {
	t.Helper()
	var upstream string
	switch s.backend {
	case "kubernetes":
		return "", backendEnv{reader: e.registryReader()}
	case "redis":
		upstream = srv.redis.Addr()
	case "etcd":
		upstream = strings.TrimPrefix(srv.etcd.Endpoint(), "http://")
	default:
		return setupOtherBackend(ctx, t, e, srv, s, ns)
	}
	proxy, err := faultproxy.New(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	var be backendEnv
	be.proxy = proxy
	switch s.backend {
	case "redis":
		lb.Spec = locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
			Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(proxy.Addr())}}
		be.reader = redisReader{c: srv.redisClient}
	case "etcd":
		lb.Spec = locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendEtcd,
			Etcd: &locksv1alpha1.EtcdBackend{Endpoints: []locksv1alpha1.EtcdEndpoint{locksv1alpha1.EtcdEndpoint("http://" + proxy.Addr())}}}
		be.reader = etcdReader{c: srv.etcdClient}
	}
	if err := e.c.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), lb) })
	return lb.Name, be
}

// prefixed puts "lock: " before each line.
func prefixed(lock string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = lock + ": " + l
	}
	return out
}

// describeLoss tells what the sampler saw last of a hold that ended Lost: whether the backend
// still held it when the controller gave it up.
func describeLoss(g Grant, samples []HeldSample) string {
	var last *HeldSample
	for i := range samples {
		if samples[i].Claim == g.Claim && (last == nil || samples[i].At.After(last.At)) {
			last = &samples[i]
		}
	}
	if last == nil {
		return fmt.Sprintf("%s (token %d) seen Lost at %s; never sampled", g.Claim, g.Token, stamp(g.Released))
	}
	return fmt.Sprintf("%s (token %d) seen Lost at %s (%s: %s); last sampled Held at %s with status.expireTime %s; the backend then: known %v, held %v by %q, places %q",
		g.Claim, g.Token, stamp(g.Released), g.Reason, g.Message, stamp(last.At), stamp(last.ExpireTime), last.Backend.Known, last.Backend.Held, last.Backend.exclusiveHolder(), last.Backend.Places)
}

func describeGrants(grants []Grant) string {
	var b strings.Builder
	for _, g := range grants {
		fmt.Fprintf(&b, "  %s %s token %d created %s acquired %s end %s@%s released %s lost %v pending %v (controller: acquireTime %s releaseTime %s %s/%s)\n",
			g.Lock, g.Claim, g.Token, stamp(g.Created), stamp(g.Acquired), g.End, stamp(g.EndAt), stamp(g.Released), g.Lost, g.Pending,
			stamp(g.AcquireTime), stamp(g.ReleaseTime), g.Phase, g.Reason)
	}
	return b.String()
}

func managerLogs(managers []*manager) string {
	var b strings.Builder
	for _, m := range managers {
		b.WriteString(tail(m.log, 3000))
	}
	return b.String()
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return fmt.Sprintf("--- %s ---\n%s\n", path, data)
}
