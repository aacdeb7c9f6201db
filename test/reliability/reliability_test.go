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
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/faultproxy"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

var (
	setFlag      = flag.String("set", "smoke", "scenario set: smoke or full")
	seedFlag     = flag.Uint64("seed", 0, "seed of the workload and fault plans; 0 picks one (printed)")
	scenarioFlag = flag.String("scenario", "", "run only scenarios whose name matches this regexp")
	docFlag      = flag.String("doc", "", "write the results table between the markers of this file (docs/reliability.md)")
)

const (
	// ttl is the lock lease, the API's minimum, so that runs are quick.
	ttl = 5 * time.Second
	// leLease is controller-runtime's default leader-election lease (the manager has no flag
	// for it): a standby takes over at most about this long after the leader stops renewing.
	leLease = 15 * time.Second
)

// faultKind names a fault.
type faultKind string

const (
	faultLeaderKill     faultKind = "leader-kill"     // SIGKILL the leader, restart it at heal
	faultLeaderPause    faultKind = "leader-pause"    // SIGSTOP the leader longer than the LE lease
	faultAPIRefuse      faultKind = "api-refuse"      // partition leader→API server, resetting
	faultAPIBlackhole   faultKind = "api-blackhole"   // partition leader→API server, stalling
	faultAPILatency     faultKind = "api-latency"     // 300 ms each way on leader→API server
	faultRedisRestart   faultKind = "redis-restart"   // SIGKILL Redis, restart it empty at heal
	faultRedisPause     faultKind = "redis-pause"     // SIGSTOP Redis
	faultRedisBlackhole faultKind = "redis-blackhole" // partition managers→Redis, stalling
	faultRedisRefuse    faultKind = "redis-refuse"    // partition managers→Redis, resetting
)

// redisOnly are the faults that need the Redis backend.
var redisOnly = map[faultKind]bool{faultRedisRestart: true, faultRedisPause: true, faultRedisBlackhole: true, faultRedisRefuse: true}

// fault is one planned fault: start after the workload began, lasting dur.
type fault struct {
	kind       faultKind
	start, dur time.Duration
}

func (f fault) String() string {
	return fmt.Sprintf("%s@%s/%s", f.kind, f.start.Round(time.Second), f.dur.Round(time.Second))
}

// scenario is one named run: a backend, a replica count and a fault plan (fixed kinds, seeded
// timings), or random kinds drawn from the seed.
type scenario struct {
	name     string
	backend  string // "kubernetes" or "redis"
	replicas int
	kinds    []faultKind // the faults, in order; nil with random > 0 draws them
	random   int         // draw 1..random faults from the seed
	workload time.Duration
}

func smokeScenarios() []scenario {
	return []scenario{
		{name: "redis-restart", backend: "redis", replicas: 1, kinds: []faultKind{faultRedisRestart}, workload: 30 * time.Second},
		{name: "leader-pause", backend: "kubernetes", replicas: 2, kinds: []faultKind{faultLeaderPause}, workload: 35 * time.Second},
		{name: "leader-kill", backend: "redis", replicas: 2, kinds: []faultKind{faultLeaderKill}, workload: 30 * time.Second},
		{name: "api-partition", backend: "redis", replicas: 1, kinds: []faultKind{faultAPIBlackhole}, workload: 30 * time.Second},
	}
}

func fullScenarios() []scenario {
	var out []scenario
	all := []faultKind{faultLeaderKill, faultLeaderPause, faultAPIRefuse, faultAPIBlackhole, faultAPILatency,
		faultRedisRestart, faultRedisPause, faultRedisBlackhole, faultRedisRefuse}
	for _, backend := range []string{"kubernetes", "redis"} {
		out = append(out, scenario{name: "baseline", backend: backend, replicas: 1, workload: 40 * time.Second})
		for _, k := range all {
			if redisOnly[k] && backend != "redis" {
				continue
			}
			replicas := 1
			if k == faultLeaderKill || k == faultLeaderPause || k == faultAPIRefuse || k == faultAPIBlackhole {
				replicas = 2
			}
			out = append(out, scenario{name: string(k), backend: backend, replicas: replicas, kinds: []faultKind{k}, workload: 45 * time.Second})
		}
		out = append(out, scenario{name: "random-3", backend: backend, replicas: 2, random: 3, workload: 75 * time.Second})
	}
	return out
}

// plan draws the timing (and, for random scenarios, the kinds) of a scenario's faults from rng:
// each lasts 1–3×TTL (a SIGSTOP of the leader outlasts the leader-election lease so that the
// standby takes over and the paused one wakes up stale), and starts 1.5–3×TTL after the previous
// one healed (after the workload began, for the first).
func (s scenario) plan(rng *rand.Rand) []fault {
	kinds := s.kinds
	if s.random > 0 {
		pool := []faultKind{faultLeaderKill, faultLeaderPause, faultAPIRefuse, faultAPIBlackhole, faultAPILatency}
		if s.backend == "redis" {
			pool = append(pool, faultRedisRestart, faultRedisPause, faultRedisBlackhole, faultRedisRefuse)
		}
		for range 1 + rng.IntN(s.random) {
			kinds = append(kinds, pool[rng.IntN(len(pool))])
		}
	}
	var out []fault
	var at time.Duration
	for _, k := range kinds {
		start := at + ttl*3/2 + time.Duration(rng.Int64N(int64(ttl*3/2)))
		dur := ttl + time.Duration(rng.Int64N(int64(2*ttl)))
		if k == faultLeaderPause {
			dur = max(dur, leLease+3*time.Second)
		}
		out = append(out, fault{kind: k, start: start, dur: dur})
		at = start + dur
	}
	return out
}

func TestReliability(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64() % 1_000_000
	}
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	var scenarios []scenario
	switch *setFlag {
	case "smoke":
		scenarios = smokeScenarios()
	case "full":
		scenarios = fullScenarios()
	default:
		t.Fatalf("-set must be smoke or full, not %q", *setFlag)
	}
	match := regexp.MustCompile(*scenarioFlag)

	e := startEnv(t)
	redis := redistest.Start(t, redistest.Options{})

	var results []Result
	for i, s := range scenarios {
		id := s.backend + "/" + s.name
		if !match.MatchString(id) {
			continue
		}
		// Each scenario's seed derives from the run's seed and its place, so that one scenario
		// replays alone with -scenario and the same -seed.
		sseed := seed*1000 + uint64(i)
		t.Run(id, func(t *testing.T) {
			r := runScenario(t, e, redis, s, sseed)
			results = append(results, r)
			if !r.Passed() {
				t.Errorf("scenario %s seed %d failed: %d safety violations, porcupine %s, %d stuck, valid %v\n%s",
					id, sseed, r.Safety(), r.Linearizable, len(r.Liveness.Stuck), r.Valid, strings.Join(append(r.Violations, r.Liveness.Stuck...), "\n"))
			}
		})
	}
	table := Table(results)
	t.Logf("results (seed %d):\n%s", seed, table)
	fmt.Println(table)
	if *docFlag != "" {
		content := fmt.Sprintf("Set `%s`, seed %d, generated %s on %d CPUs.\n\n%s", *setFlag, seed, time.Now().UTC().Format(time.DateOnly), numCPU(), table)
		if err := WriteBetweenMarkers(*docFlag, content); err != nil {
			t.Errorf("writing %s: %v", *docFlag, err)
		}
	}
}

func runScenario(t *testing.T, e *env, redis *redistest.Server, s scenario, seed uint64) Result {
	rng := rand.New(rand.NewPCG(seed, 0x10c4))
	plan := s.plan(rng)
	var planText []string
	for _, f := range plan {
		planText = append(planText, f.String())
	}
	faultsText := strings.Join(planText, ", ")
	if faultsText == "" {
		faultsText = "none"
	}
	t.Logf("scenario %s/%s seed %d replicas %d faults %s", s.backend, s.name, seed, s.replicas, faultsText)
	started := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rel-"}}
	if err := e.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}

	redisProxy, err := faultproxy.New(redis.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer redisProxy.Close()
	backendRef := ""
	if s.backend == "redis" {
		backendRef = ns.Name // one LockBackend per scenario, named after its namespace
		lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: backendRef},
			Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
				Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(redisProxy.Addr())}}}
		if err := e.c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.c.Delete(context.Background(), lb) }()
	}

	var managers []*manager
	for i := range s.replicas {
		managers = append(managers, e.startManager(t, fmt.Sprintf("%s-manager-%d", ns.Name, i)))
	}
	defer func() {
		for _, m := range managers {
			m.shutdown()
		}
	}()
	if _, err := waitLeader(ctx, managers, 60*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, managerLogs(managers))
	}

	const locks, claimantsPerLock = 2, 3
	res := map[string]*resource{}
	for l := range locks {
		name := fmt.Sprintf("lock-%d", l)
		dl := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
			Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: int32(ttl / time.Second),
				BackendRef: locksv1alpha1.BackendReference{Name: backendRef}}}
		if err := e.c.Create(ctx, dl); err != nil {
			t.Fatal(err)
		}
		res[ns.Name+"/"+name] = &resource{}
	}

	rec := newRecorder()
	go rec.run(ctx, e.c, ns.Name)

	var errMu sync.Mutex
	var harnessErrs []string
	errf := func(format string, args ...any) {
		errMu.Lock()
		harnessErrs = append(harnessErrs, fmt.Sprintf(format, args...))
		errMu.Unlock()
	}

	// The workload runs for s.workload, and at least until the last fault healed plus 2×TTL;
	// then nothing new starts and the queue drains. Waits end at the drain deadline: the
	// convergence window (2×TTL), plus the longest critical section, plus a leader-election
	// lease when a fault hit a manager.
	workload := s.workload
	lastHeal := time.Duration(0)
	managerFault := false
	for _, f := range plan {
		lastHeal = max(lastHeal, f.start+f.dur)
		managerFault = managerFault || !redisOnly[f.kind]
	}
	workload = max(workload, lastHeal+2*ttl)
	drainAfter := workload + 2*ttl + 2*ttl
	if managerFault {
		drainAfter += leLease
	}
	stopNew, drain := make(chan struct{}), make(chan struct{})
	time.AfterFunc(workload, func() { close(stopNew) })
	time.AfterFunc(drainAfter, func() { close(drain) })

	var wg sync.WaitGroup
	for l := range locks {
		lock := fmt.Sprintf("lock-%d", l)
		for i := range claimantsPerLock {
			cl := &claimant{c: e.c, rec: rec, ns: ns.Name, lock: lock, id: i, res: res[ns.Name+"/"+lock],
				rng: rand.New(rand.NewPCG(seed, uint64(l*100+i))), ttl: ttl, writes: 5,
				stopNew: stopNew, drain: drain, silentDeathDetection: ttl / 2, errs: errf}
			wg.Add(1)
			go func() { defer wg.Done(); cl.run(ctx) }()
		}
	}

	// Faults, in plan order, each healed before the next.
	var grantsBeforeFault int
	faultLog := runFaults(t, plan, started, managers, redis, redisProxy, func() {
		for _, g := range rec.results() {
			if !g.Acquired.IsZero() {
				grantsBeforeFault++
			}
		}
	})
	if len(plan) == 0 {
		grantsBeforeFault = locks
	}

	wg.Wait()               // every claimant finished, or gave up waiting at the drain deadline
	grants := rec.results() // Pending now: still waiting after the drain deadline

	// Teardown: claims and pods go; the finalizers need a manager, so wait for them.
	_ = e.c.DeleteAllOf(ctx, &locksv1alpha1.LockClaim{}, client.InNamespace(ns.Name))
	_ = e.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns.Name), client.GracePeriodSeconds(0))
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var left locksv1alpha1.LockClaimList
		if err := e.c.List(ctx, &left, client.InNamespace(ns.Name)); err == nil && len(left.Items) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()

	// Checks.
	r := Result{Scenario: s.name, Backend: s.backend, Seed: seed, Faults: faultsText, TTL: ttl, Duration: time.Since(started)}
	r.Valid = grantsBeforeFault >= locks // a fault injected into an idle system proves nothing
	writes := map[string][]Write{}
	for lock, rs := range res {
		log := rs.fenced.Log()
		writes[lock] = log
		for _, w := range log {
			r.Writes++
			if !w.Accepted {
				r.Rejected++
			}
		}
		for _, v := range CheckRegisterLog(log) {
			r.Violations = append(r.Violations, lock+": "+v)
		}
		_, stale, overlaps := rs.shadow.Counts()
		r.ShadowStale += stale
		r.ShadowOverlaps += overlaps
	}
	for _, g := range grants {
		if !g.Acquired.IsZero() {
			r.Grants++
		}
	}
	r.Violations = append(r.Violations, CheckTokens(grants)...)
	r.Violations = append(r.Violations, CheckExclusion(grants)...)
	rec.mu.Lock()
	r.Violations = append(r.Violations, rec.errs...)
	rec.mu.Unlock()
	html := filepath.Join(os.TempDir(), fmt.Sprintf("lockwarden-reliability-%s-%s-%d.html", s.backend, s.name, seed))
	lin, err := CheckLinearizable(Operations(started, grants, writes), 5*time.Minute, html)
	if err != nil {
		t.Errorf("porcupine visualization: %v", err)
	}
	r.Linearizable = string(lin)
	if lin != "Ok" {
		t.Logf("porcupine: %s; history at %s", lin, html)
	}
	r.Liveness = ComputeLiveness(grants)
	r.Lost = r.Liveness.Lost

	errMu.Lock()
	for _, h := range harnessErrs {
		t.Logf("harness: %s", h)
	}
	errMu.Unlock()
	for _, l := range faultLog {
		t.Logf("fault: %s", l)
	}
	for _, m := range managers {
		t.Logf("manager %s restarts %d, log %s", m.name, m.restarts, m.log)
	}
	if !r.Passed() {
		t.Logf("grants:\n%s\n%s", describeGrants(grants), managerLogs(managers))
	}
	return r
}

// runFaults injects the plan's faults at their times and heals each; before the first it calls
// beforeFirst (to count the operations that make the run valid). It returns what it did.
func runFaults(t *testing.T, plan []fault, started time.Time, managers []*manager, redis *redistest.Server, redisProxy *faultproxy.Proxy, beforeFirst func()) []string {
	var log []string
	logf := func(format string, args ...any) {
		log = append(log, fmt.Sprintf("%6.1fs ", time.Since(started).Seconds())+fmt.Sprintf(format, args...))
	}
	for i, f := range plan {
		time.Sleep(time.Until(started.Add(f.start)))
		if i == 0 {
			beforeFirst()
		}
		var leader *manager
		if f.kind == faultLeaderKill || f.kind == faultLeaderPause || f.kind == faultAPIRefuse || f.kind == faultAPIBlackhole || f.kind == faultAPILatency {
			var err error
			if leader, err = waitLeader(context.Background(), managers, 30*time.Second); err != nil {
				logf("%s skipped: %v", f.kind, err)
				continue
			}
		}
		logf("inject %s (%s)", f.kind, f.dur)
		var heal func()
		switch f.kind {
		case faultLeaderKill:
			if err := leader.kill(); err != nil {
				t.Errorf("killing %s: %v", leader.name, err)
			}
			heal = func() {
				if err := leader.restart(); err != nil {
					t.Errorf("restarting %s: %v", leader.name, err)
				}
			}
		case faultLeaderPause:
			if err := leader.pause(); err != nil {
				t.Errorf("pausing %s: %v", leader.name, err)
			}
			heal = func() { _ = leader.resume() }
		case faultAPIRefuse:
			leader.api.Partition(faultproxy.Refuse)
			heal = leader.api.Heal
		case faultAPIBlackhole:
			leader.api.Partition(faultproxy.Blackhole)
			heal = leader.api.Heal
		case faultAPILatency:
			leader.api.SetLatency(faultproxy.Upstream, 300*time.Millisecond)
			leader.api.SetLatency(faultproxy.Downstream, 300*time.Millisecond)
			heal = leader.api.Heal
		case faultRedisRestart:
			redis.Kill()
			heal = redis.Restart
		case faultRedisPause:
			redis.Pause()
			heal = redis.Resume
		case faultRedisBlackhole:
			redisProxy.Partition(faultproxy.Blackhole)
			heal = redisProxy.Heal
		case faultRedisRefuse:
			redisProxy.Partition(faultproxy.Refuse)
			heal = redisProxy.Heal
		}
		time.Sleep(f.dur)
		heal()
		logf("healed %s", f.kind)
	}
	return log
}

func describeGrants(grants []Grant) string {
	var b strings.Builder
	for _, g := range grants {
		fmt.Fprintf(&b, "  %s %s token %d created %s acquired %s end %s@%s released %s lost %v pending %v\n",
			g.Lock, g.Claim, g.Token, stamp(g.Created), stamp(g.Acquired), g.End, stamp(g.EndAt), stamp(g.Released), g.Lost, g.Pending)
	}
	return b.String()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000")
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

func numCPU() int { return runtime.NumCPU() }
