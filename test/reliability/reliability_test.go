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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/failpoint"
	"github.com/lockwarden/lockwarden/internal/mutant"
	"github.com/lockwarden/lockwarden/internal/testutil/etcdtest"
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
	// defaultTTL is the lock lease of most scenarios, the API's minimum, so that runs are quick.
	defaultTTL = 5 * time.Second
	// leLease is the manager's default leader-election lease (--leader-election-lease-duration):
	// a standby takes over at most about this long after the leader stops renewing.
	leLease = 15 * time.Second
	// samplePeriod is how often the sampler compares Held claims with the backend.
	samplePeriod = 250 * time.Millisecond
	// sampleMargin: a claim whose expireTime is less than this ahead may have lost its backend
	// key legitimately (its renewals fail); such samples are not counted (see CheckBackendSamples).
	sampleMargin = time.Second
)

// faultKind names a fault.
type faultKind string

const (
	faultLeaderKill     faultKind = "leader-kill"         // SIGKILL the leader, restart it at heal
	faultLeaderPause    faultKind = "leader-pause"        // SIGSTOP the leader longer than the LE lease
	faultAPIRefuse      faultKind = "api-refuse"          // partition leader→API server, resetting
	faultAPIBlackhole   faultKind = "api-blackhole"       // partition leader→API server, stalling
	faultAPILatency     faultKind = "api-latency"         // 300 ms each way on leader→API server
	faultRedisRestart   faultKind = "redis-restart"       // SIGKILL Redis, restart it empty at heal
	faultRedisPause     faultKind = "redis-pause"         // SIGSTOP Redis
	faultRedisBlackhole faultKind = "redis-blackhole"     // partition managers→Redis, stalling
	faultRedisRefuse    faultKind = "redis-refuse"        // partition managers→Redis, resetting
	faultRedisFlush     faultKind = "redis-flush"         // FLUSHALL: Redis loses every key but stays up (a failover to a replica that missed the writes)
	faultEtcdRestart    faultKind = "etcd-restart"        // SIGKILL the etcd member, restart it (with its data) at heal
	faultEtcdBlackhole  faultKind = "etcd-blackhole"      // partition managers→etcd, stalling
	faultEtcdRefuse     faultKind = "etcd-refuse"         // partition managers→etcd, resetting
	faultRedisLatency   faultKind = "redis-latency"       // 100 ms each way on managers→Redis
	faultEtcdLatency    faultKind = "etcd-latency"        // 100 ms each way on managers→etcd
	faultZKRestart      faultKind = "zookeeper-restart"   // SIGKILL ZooKeeper, restart it (with its data) at heal
	faultZKBlackhole    faultKind = "zookeeper-blackhole" // partition managers→ZooKeeper, stalling
	faultPGRestart      faultKind = "postgresql-restart"  // SIGKILL PostgreSQL, restart it (with its data) at heal
	faultPGBlackhole    faultKind = "postgresql-blackhole"
	faultMariaRestart   faultKind = "mariadb-restart" // SIGKILL MariaDB, restart it (with its data) at heal
	faultMariaBlackhole faultKind = "mariadb-blackhole"
	// Redlock: three independent Redis nodes, each behind its own proxy.
	faultRedlockNodeRestart       faultKind = "redlock-node-restart"       // SIGKILL one node, restart it empty at heal
	faultRedlockNodeBlackhole     faultKind = "redlock-node-blackhole"     // partition managers→one node
	faultRedlockMajorityBlackhole faultKind = "redlock-majority-blackhole" // partition managers→two of the three nodes
	faultLockRecreate             faultKind = "lock-recreate"              // delete lock-0, re-create it with the same name at heal
	faultClockForward             faultKind = "clock-forward"              // step the leader's clock 2×TTL ahead, back at heal
	faultClockBack                faultKind = "clock-back"                 // step the leader's clock 2×TTL behind, back at heal
	// faultLeaderDeposed stops the leader at its next grant, between the backend acquire and the
	// claim's status write (failpoint grant-status), keeps it stopped until a standby has taken
	// over and that claim has ended, then lets it go on: a deposed leader in mid-handoff.
	faultLeaderDeposed faultKind = "leader-deposed"
)

// backendLatency is the delay each way of a backend-latency fault: a round trip of 200 ms stays
// under the backends' per-call timeouts (500 ms for Redis), so calls slow down but succeed.
const backendLatency = 100 * time.Millisecond

// backendFaults are the faults that need one backend; every other fault hits the managers.
var backendFaults = map[faultKind]string{
	faultRedisRestart: "redis", faultRedisPause: "redis", faultRedisBlackhole: "redis", faultRedisRefuse: "redis",
	faultRedisLatency: "redis", faultRedisFlush: "redis",
	faultEtcdRestart: "etcd", faultEtcdBlackhole: "etcd", faultEtcdRefuse: "etcd", faultEtcdLatency: "etcd",
	faultZKRestart: "zookeeper", faultZKBlackhole: "zookeeper",
	faultPGRestart: "postgresql", faultPGBlackhole: "postgresql",
	faultMariaRestart: "mariadb", faultMariaBlackhole: "mariadb",
	faultRedlockNodeRestart: "redlock", faultRedlockNodeBlackhole: "redlock", faultRedlockMajorityBlackhole: "redlock",
}

// staleFault is the fault that cuts the holders of a stale-writer scenario off: a partition of
// the managers' link to the backend, or a pause of the leader for the built-in backend (which
// lives behind the API link).
func staleFault(backend string) faultKind {
	return map[string]faultKind{
		"kubernetes": faultLeaderPause, "redis": faultRedisBlackhole, "etcd": faultEtcdBlackhole,
		"zookeeper": faultZKBlackhole, "postgresql": faultPGBlackhole, "mariadb": faultMariaBlackhole,
		"redlock": faultRedlockMajorityBlackhole,
	}[backend]
}

// faultsOf lists the faults of one backend, sorted.
func faultsOf(backend string) []faultKind {
	var out []faultKind
	for k, b := range backendFaults {
		if b == backend {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// managerFault says whether a fault hits a manager (and so may need a leader election).
func managerFault(k faultKind) bool {
	return k == faultLeaderKill || k == faultLeaderPause || k == faultAPIRefuse || k == faultAPIBlackhole || k == faultAPILatency ||
		k == faultClockForward || k == faultClockBack || k == faultLeaderDeposed
}

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
	backend  string // "kubernetes", "redis", "etcd", "zookeeper", "postgresql", "mariadb" or "redlock"
	replicas int
	kinds    []faultKind // the faults, in order; nil with random > 0 draws them
	random   int         // draw 1..random faults from the seed
	workload time.Duration
	// ttl is the locks' leaseDurationSeconds; 0 means defaultTTL.
	ttl time.Duration
	// unit scales the fault plan's timings (start and duration); 0 means the TTL.
	unit time.Duration
	// staleWriter makes the run exercise fencing every time: the first hold of claimant 0 on
	// each lock is a slow one (it writes until the controller ends its claim), the first fault
	// is injected as soon as those holds began and lasts at least 1.5×TTL, so that each slow
	// holder's claim ends while it writes, it goes on as a zombie, and the fenced register must
	// reject it. The run fails if no write was rejected.
	staleWriter bool
	// noLoss fails the run if any hold ended Lost.
	noLoss bool
	// longHold makes claimant 0 of each lock hold from its first grant until the workload ends
	// (writing every TTL/5, as a slow holder does, with no fault to end it), and fails the run
	// unless some hold lasted at least longHold: holds far longer than any lease, which renewal
	// must keep alive however many renewals they take.
	longHold time.Duration
	// killBeforeRefresh injects the first fault when a Held claim's status.expireTime is just
	// over an eighth of the TTL ahead, the moment before the controller refreshes it: the worst
	// time for a failover (regression of the first default-failover finding).
	killBeforeRefresh bool
	// outsideHolder (Redis only): a client outside lockwarden holds lock-0's key with the
	// standard protocol (SET NX PX) for 2×TTL from before the first claim, and a claimant gives
	// up waiting behind it (deletes its Pending claim). No claim may be Held while it holds, and
	// nothing may free its key.
	outsideHolder bool
	// ends, when set, replaces the mix of ways a hold ends; keepEnded keeps ended claims until
	// the drain, so that a late write about them lands on an object that still exists.
	ends      []EndKind
	keepEnded bool
	// lockDelay is the locks' lockDelaySeconds (whole seconds), and lossPolicy their
	// lossPolicy (empty: the default, Notify). A delay turns on the lock-delay checker and
	// requires that some grant followed a hold that ended without a release; Evict turns on the
	// evicted checker, requires a lost hold, and makes claimants that lost theirs wait for their
	// eviction.
	lockDelay  time.Duration
	lossPolicy locksv1alpha1.LossPolicy
	// places is the locks' maxHolders (0 or 1: a mutex), and exclusiveEvery makes every
	// exclusiveEvery-th claimant of a lock (the first included) ask for it Exclusive (0: none),
	// with claimants claimants per lock (0: 3). With places above 1 the places checker replaces
	// mutual exclusion, only holders that hold alone write to the fenced register (the others
	// read), and linearizability is checked over the holds that hold alone.
	places         int32
	exclusiveEvery int
	claimants      int
	// mutant runs the managers with this deliberate bug (internal/mutant), and with the bugs in
	// alsoMutants; the run must then fail, and expect must be among the checkers that failed it.
	mutant      string
	alsoMutants []mutant.Name
	expect      string
}

// lockPlaces is the locks' number of places.
func (s scenario) lockPlaces() int32 { return max(s.places, 1) }

// exclusiveClaimant says whether claimant i of a lock asks for it Exclusive.
func (s scenario) exclusiveClaimant(i int) bool {
	return s.exclusiveEvery > 0 && i%s.exclusiveEvery == 0
}

// claimantsPerLock is how many claimants ask for each lock.
func (s scenario) claimantsPerLock() int {
	if s.claimants == 0 {
		return 3
	}
	return s.claimants
}

func (s scenario) lockTTL() time.Duration {
	if s.ttl == 0 {
		return defaultTTL
	}
	return s.ttl
}

// id names a scenario in logs, -scenario and the table; a mutant's run is named after it.
func (s scenario) id() string {
	if s.mutant != "" {
		return "mutant/" + s.mutant + "/" + s.backend + "/" + s.name
	}
	return s.backend + "/" + s.name
}

func smokeScenarios() []scenario {
	return []scenario{
		// Fencing exercised on every run: Redis cut off from the manager while two slow holders
		// write; after the heal the next waiters get higher tokens and the slow ones, now stale,
		// must be rejected.
		{name: "stale-writer", backend: "redis", replicas: 1, kinds: []faultKind{faultRedisBlackhole}, staleWriter: true, workload: 20 * time.Second},
		{name: "redis-restart", backend: "redis", replicas: 1, kinds: []faultKind{faultRedisRestart}, workload: 25 * time.Second},
		{name: "leader-pause", backend: "kubernetes", replicas: 2, kinds: []faultKind{faultLeaderPause}, workload: 30 * time.Second},
		deposedLeader("kubernetes"),
		outsideHolder(),
		lossEvict(),
		// Shared places with writers among the readers, across a leader's death.
		readWrite("kubernetes", faultLeaderKill, 2),
		// Two deliberate bugs that the harness must catch (make test-reliability-mutants runs all).
		mutantScenario(mutant.TokenLower),
		mutantScenario(mutant.GrantUnacquired),
	}
}

// deposedLeader is a leader-deposed fault on backend: the claims end only by their pod's end, so
// that the claim the stopped leader was granting still exists when it wakes.
func deposedLeader(backend string) scenario {
	return scenario{name: "deposed-leader", backend: backend, replicas: 2, kinds: []faultKind{faultLeaderDeposed},
		ends: []EndKind{EndPodDelete, EndSilentDeath}, keepEnded: true, workload: 30 * time.Second}
}

// lossEvict is a run with lossPolicy Evict and a lock delay of 3 s (with the 5 s lease): Redis
// is cut off from the manager while two slow holders write (as in stale-writer), so that their
// holds end Lost while their pods live; each must be evicted, and no lock may be granted within
// the delay after a loss, a pod's death or deletion. Holds also end with a pod that Succeeded,
// which frees the lock at once.
func lossEvict() scenario {
	return scenario{name: "loss-evict", backend: "redis", replicas: 1, kinds: []faultKind{faultRedisBlackhole}, staleWriter: true,
		lockDelay: 3 * time.Second, lossPolicy: locksv1alpha1.LossPolicyEvict,
		ends: []EndKind{EndRelease, EndPodDelete, EndSilentDeath, EndSucceeded, EndHang}, workload: 20 * time.Second}
}

// sharedScenarios are the shared-lock workloads on backend, with its first fault: a semaphore
// (locks of 3 places, 6 claimants each) and a read/write lock (the same, with every third
// claimant a writer that asks for the lock Exclusive). The places checker and the API snapshots
// check that no lock ever has more holders than places, nor anyone beside an Exclusive holder.
func sharedScenarios(backend string) []scenario {
	kind := faultLeaderKill
	if kinds := faultsOf(backend); len(kinds) > 0 {
		kind = kinds[0]
	}
	replicas := 1
	if managerFault(kind) {
		replicas = 2
	}
	return []scenario{
		{name: "semaphore", backend: backend, replicas: replicas, kinds: []faultKind{kind}, places: 3, claimants: 6, workload: 40 * time.Second},
		readWrite(backend, kind, replicas),
	}
}

// readWrite is the read/write workload on backend with one fault of kind.
func readWrite(backend string, kind faultKind, replicas int) scenario {
	return scenario{name: "read-write", backend: backend, replicas: replicas, kinds: []faultKind{kind}, places: 3, claimants: 6, exclusiveEvery: 3, workload: 40 * time.Second}
}

// longHolds is a fault-free run on the built-in backend at the default 30 s lease in which one
// claimant of each lock holds for about four minutes: no hold may be Lost, and one must last at
// least 200 s. A session whose renewal history filled up with the regular 10 s renewals once
// judged every hold older than its 17th renewal lapsed (under three minutes); the mutant
// keep-covered-gaps brings that back.
func longHolds() scenario {
	return scenario{name: "long-hold", backend: "kubernetes", replicas: 1, ttl: 30 * time.Second,
		longHold: 200 * time.Second, noLoss: true, workload: 4 * time.Minute}
}

// evictionBound is how long after a hold was seen Lost its pod must be seen evicted: the
// eviction reconciler acts on the claim's Lost status at once; the bound leaves room for a retry
// after a failed call (a conflict on the claim's status, the API server slow).
const evictionBound = 15 * time.Second

// outsideHolder is a run with a client outside lockwarden holding a key (Redis).
func outsideHolder() scenario {
	return scenario{name: "outside-holder", backend: "redis", replicas: 1, outsideHolder: true, workload: 20 * time.Second}
}

// mutantScenario is the short seeded run that must catch mutant m, and the checker that must.
func mutantScenario(m mutant.Name) scenario {
	var s scenario
	switch m {
	case mutant.GrantUnacquired:
		s, s.expect = outsideHolder(), "backend-view"
	case mutant.ReleaseUnchecked:
		s, s.expect = outsideHolder(), "outside-holder"
	case mutant.TokenReuse:
		s = scenario{name: "baseline", backend: "redis", replicas: 1, workload: 15 * time.Second, expect: "tokens"}
	case mutant.KeepDeadHolder:
		s = scenario{name: "baseline", backend: "redis", replicas: 1, workload: 15 * time.Second, expect: "stuck"}
	case mutant.TokenLower:
		s = scenario{name: "baseline", backend: "kubernetes", replicas: 1, workload: 15 * time.Second, expect: "tokens"}
	case mutant.BlindStatus:
		// The leader guard already keeps a leader that was stopped from writing when it wakes;
		// the resourceVersion precondition is the defense behind it (a write delayed in the
		// network, a stop between the guard's check and the write). To see what the
		// precondition alone holds, the guard is off too.
		s, s.expect = deposedLeader("redis"), "final-is-final"
		s.alsoMutants = []mutant.Name{mutant.NoStallGuard}
	case mutant.RenewLost:
		// Redis loses its keys and stays up: renewals answer "lost", which the mutant ignores.
		s = scenario{name: "redis-flush", backend: "redis", replicas: 1, kinds: []faultKind{faultRedisFlush}, staleWriter: true, workload: 20 * time.Second, expect: "phantom"}
	case mutant.NoStallGuard:
		s, s.expect = deposedLeader("kubernetes"), "deposed-leader"
	case mutant.IgnoreLockDelay:
		// Every pod deleted or dead, and every loss, is followed by a waiter granted at once.
		s, s.expect = lossEvict(), "lock-delay"
	case mutant.KeepCoveredGaps:
		s, s.expect = longHolds(), "no-loss"
	case mutant.IgnorePlaces:
		s = scenario{name: "semaphore", backend: "kubernetes", replicas: 1, places: 3, claimants: 6, workload: 20 * time.Second, expect: "places"}
	case mutant.WriterBesideReaders:
		// The mutant acts only when a writer heads the queue while readers hold, and places
		// sees it only if a reader still holds after the writer's grant. Holds that end by a
		// hang end together when the workload stops, and the drain releases at once: in 20 s
		// a first writer that hung for the whole workload left no such moment (seed 132836,
		// caught by backend-view only). 40 s without hangs leaves several per lock.
		s = readWrite("kubernetes", faultLeaderKill, 2)
		s.kinds, s.replicas, s.expect = nil, 1, "places"
		s.ends = []EndKind{EndRelease, EndPodDelete, EndSilentDeath}
	default:
		panic("no scenario for mutant " + string(m))
	}
	s.mutant = string(m)
	return s
}

// mutantScenarios runs every mutant.
func mutantScenarios() []scenario {
	var out []scenario
	for _, m := range mutant.All {
		out = append(out, mutantScenario(m))
	}
	return out
}

func fullScenarios() []scenario {
	var out []scenario
	// The manager faults act on the controller, whatever the backend; they run in full on the
	// built-in backend (whose lock expiry the manager's clock decides), in part on the others.
	managerKinds := map[string][]faultKind{
		"kubernetes": {faultLeaderKill, faultLeaderPause, faultAPIBlackhole, faultAPILatency, faultClockForward, faultClockBack},
		"redis":      {faultLeaderKill, faultLeaderPause, faultAPIRefuse},
		"etcd":       {faultLeaderKill, faultAPIBlackhole},
		// A new leader resumes holds that another process's session made.
		"zookeeper": {faultLeaderKill},
	}
	for _, backend := range []string{"kubernetes", "redis", "etcd", "zookeeper", "postgresql", "mariadb", "redlock"} {
		// No fault, so no hold may be lost: a hang (the pod alive) must keep its lock too.
		out = append(out, scenario{name: "baseline", backend: backend, replicas: 1, noLoss: true, workload: 40 * time.Second})
		kinds := append(slices.Clip(managerKinds[backend]), faultsOf(backend)...)
		for _, k := range kinds {
			replicas := 1
			if managerFault(k) && k != faultAPILatency {
				replicas = 2
			}
			// One Redlock node of three down leaves a majority: no hold may be lost to it.
			noLoss := k == faultRedlockNodeRestart || k == faultRedlockNodeBlackhole
			out = append(out, scenario{name: string(k), backend: backend, replicas: replicas, kinds: []faultKind{k}, noLoss: noLoss, workload: 40 * time.Second})
		}
		if backend != "kubernetes" {
			// The leader's clock jumps forward, then back, with a standby beside it. These stores
			// decide by themselves when a key is free: a leader whose clock runs ahead may give
			// holds up early (Lost), but must never grant a key the store still holds.
			out = append(out, scenario{name: "clock-jumps", backend: backend, replicas: 2, kinds: []faultKind{faultClockForward, faultClockBack}, workload: 40 * time.Second})
		}
		// A holder cut off (by a pause of the leader, or a partition of the backend) while it
		// writes: fencing must reject it.
		stale := staleFault(backend)
		replicas := 1
		if stale == faultLeaderPause {
			replicas = 2
		}
		out = append(out, scenario{name: "stale-writer", backend: backend, replicas: replicas, kinds: []faultKind{stale}, staleWriter: true, workload: 30 * time.Second})
		if backend == "kubernetes" || backend == "redis" {
			// Tokens across deletion and re-creation of a lock within one TTL (the token logic
			// is the controller's, the same on every backend), and a leader deposed in the
			// middle of a grant.
			out = append(out, scenario{name: "lock-recreate", backend: backend, replicas: 1, kinds: []faultKind{faultLockRecreate}, workload: 40 * time.Second})
			out = append(out, deposedLeader(backend))
		}
		if backend == "redis" {
			out = append(out, outsideHolder(), lossEvict())
		}
		if backend == "kubernetes" {
			out = append(out, scenario{name: "random-3", backend: backend, replicas: 2, random: 3, workload: 75 * time.Second})
		}
		out = append(out, sharedScenarios(backend)...)
	}
	out = append(out, longHolds())
	// Killing the leader with default settings (leader election 15 s/10 s/2 s, lock lease 30 s)
	// loses no held lock.
	out = append(out, scenario{name: "default-failover", backend: "kubernetes", replicas: 2, kinds: []faultKind{faultLeaderKill},
		ttl: 30 * time.Second, unit: 10 * time.Second, noLoss: true, killBeforeRefresh: true, workload: 60 * time.Second})
	return out
}

// plan draws the timing (and, for random scenarios, the kinds) of a scenario's faults from rng:
// each lasts 1–3 units (the TTL, unless the scenario says otherwise; a SIGSTOP of the leader
// outlasts the leader-election lease so that the standby takes over and the paused one wakes up
// stale), and starts 1.5–3 units after the previous one healed (after the workload began, for
// the first).
func (s scenario) plan(rng *rand.Rand) []fault {
	unit := s.unit
	if unit == 0 {
		unit = s.lockTTL()
	}
	kinds := s.kinds
	if s.random > 0 {
		pool := append([]faultKind{faultLeaderKill, faultLeaderPause, faultAPIRefuse, faultAPIBlackhole, faultAPILatency}, faultsOf(s.backend)...)
		for range 1 + rng.IntN(s.random) {
			kinds = append(kinds, pool[rng.IntN(len(pool))])
		}
	}
	var out []fault
	var at time.Duration
	for _, k := range kinds {
		start := at + unit*3/2 + time.Duration(rng.Int64N(int64(unit*3/2)))
		dur := unit + time.Duration(rng.Int64N(int64(2*unit)))
		switch k {
		case faultLeaderPause:
			dur = max(dur, leLease+3*time.Second)
		case faultLeaderDeposed:
			dur = leLease + 4*unit // the longest it may stay stopped; it resumes once the claim ended
		case faultLockRecreate:
			dur = unit / 5 // re-created within one TTL of its deletion: the token floor must hold
		}
		if s.staleWriter {
			dur = max(dur, s.lockTTL()*3/2)
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
	case "mutants":
		scenarios = mutantScenarios()
	default:
		t.Fatalf("-set must be smoke, full or mutants, not %q", *setFlag)
	}
	match := regexp.MustCompile(*scenarioFlag)
	needs := map[string]bool{}
	for _, s := range scenarios {
		if match.MatchString(s.id()) {
			needs[s.backend] = true
		}
	}

	e := startEnv(t)
	srv := &servers{}
	if needs["redis"] {
		goredis.SetLogger(quietLogger{}) // the direct client's dial errors while Redis is down are expected
		srv.redis = redistest.Start(t, redistest.Options{})
		srv.redisClient = srv.redis.Client()
	}
	if needs["etcd"] {
		srv.etcd = etcdtest.Start(t)
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.etcd.Endpoint()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		srv.etcdClient = c
	}

	srv.startOthers(t, needs)

	var results []Result
	var mutants []MutantResult
	for i, s := range scenarios {
		id := s.id()
		if !match.MatchString(id) {
			continue
		}
		// Each scenario's seed derives from the run's seed and its place, so that one scenario
		// replays alone with -scenario and the same -seed.
		sseed := seed*1000 + uint64(i)
		t.Run(id, func(t *testing.T) {
			r := runScenario(t, e, srv, s, sseed)
			if s.mutant != "" {
				// A deliberately broken manager: the run must fail, and the table says which
				// checkers failed it.
				m := MutantResult{Mutant: s.mutant, Scenario: s.backend + "/" + s.name, Seed: sseed, Expect: s.expect, Caught: r.Caught(), Duration: r.Duration}
				for _, v := range r.Violations {
					if v.Checker == s.expect {
						m.Example = v.String()
						break
					}
				}
				if m.Example == "" && s.expect == "stuck" && len(r.Liveness.Stuck) > 0 {
					m.Example = "stuck: " + r.Liveness.Stuck[0] + " still waiting at the end of the run"
				}
				if m.Example == "" && s.expect == "no-loss" && r.NoLossRequired && r.Lost > 0 {
					m.Example = fmt.Sprintf("no-loss: %d held lock(s) lost, none allowed", r.Lost)
				}
				mutants = append(mutants, m)
				t.Logf("mutant %s caught by %v", s.mutant, m.Caught)
				for _, v := range r.Violations {
					t.Logf("  %s", v)
				}
				if !slices.Contains(m.Caught, s.expect) {
					t.Errorf("mutant %s survived scenario %s seed %d: checker %s did not fail the run (caught by %v)", s.mutant, m.Scenario, sseed, s.expect, m.Caught)
				}
				return
			}
			results = append(results, r)
			if !r.Passed() {
				var problems []string
				for _, v := range r.Violations {
					problems = append(problems, v.String())
				}
				problems = append(append(append(problems, r.Liveness.Stuck...), r.Orphans...), r.Unmet()...)
				t.Errorf("scenario %s seed %d failed: %d safety violations, porcupine %s, %d stuck, %d orphaned, valid %v\n%s",
					id, sseed, r.Safety(), r.Linearizable, len(r.Liveness.Stuck), len(r.Orphans), r.Valid, strings.Join(problems, "\n"))
			}
		})
	}
	stamp := fmt.Sprintf("Set `%s`, seed %d, generated %s on %d CPUs.", *setFlag, seed, time.Now().UTC().Format(time.DateOnly), numCPU())
	if len(results) > 0 {
		table := Table(results)
		t.Logf("results (seed %d):\n%s", seed, table)
		fmt.Println(table)
		if *docFlag != "" {
			if err := WriteBetweenMarkers(*docFlag, stamp+"\n\n"+table); err != nil {
				t.Errorf("writing %s: %v", *docFlag, err)
			}
		}
	}
	if len(mutants) > 0 {
		mt := MutantTable(mutants)
		t.Logf("mutants (seed %d):\n%s", seed, mt)
		fmt.Println(mt)
		if *docFlag != "" && *setFlag == "mutants" {
			if err := WriteBetween(*docFlag, BeginMutantMarker, EndMutantMarker, stamp+"\n\n"+mt); err != nil {
				t.Errorf("writing %s: %v", *docFlag, err)
			}
		}
	}
}

// quietLogger drops go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// servers are the real backend servers, shared by the scenarios, with direct (unproxied)
// clients for the sampler.
type servers struct {
	redis       *redistest.Server
	redisClient *goredis.Client
	etcd        *etcdtest.Member
	etcdClient  *clientv3.Client
	otherServers
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
		return "", backendEnv{reader: recordReader{c: e.c}}
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

// recreation records a lock-recreate fault: the last token the deleted lock issued, and when its
// successor was created.
type recreation struct {
	lock      string
	floor     int64
	createdAt time.Time
	failed    int // claims that ended Failed with LockNotFound
}

func runScenario(t *testing.T, e *env, srv *servers, s scenario, seed uint64) Result {
	ttl := s.lockTTL()
	rng := rand.New(rand.NewPCG(seed, 0x10c4))
	plan := s.plan(rng)
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
	t.Logf("scenario %s seed %d replicas %d ttl %s faults %s", s.id(), seed, s.replicas, ttl, strings.Join(planText, ", "))
	started := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rel-"}}
	if err := e.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	backendRef, be := setupBackend(ctx, t, e, srv, s, ns.Name)
	be.reader = identityReader{be.reader}

	var managers []*manager
	for i := range s.replicas {
		bugs := s.mutant
		for _, m := range s.alsoMutants {
			bugs += "," + string(m)
		}
		managers = append(managers, e.startManager(t, fmt.Sprintf("%s-manager-%d", ns.Name, i), strings.TrimPrefix(bugs, ",")))
	}
	defer func() {
		for _, m := range managers {
			m.shutdown()
		}
	}()
	if _, err := waitLeader(ctx, managers, 60*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, managerLogs(managers))
	}

	const locks = 2
	claimantsPerLock := s.claimantsPerLock()
	res := map[string]*resource{}
	lockSpec := func(name string) *locksv1alpha1.DistributedLock {
		return &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
			Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: int32(ttl / time.Second),
				LockDelaySeconds: int32(s.lockDelay / time.Second), LossPolicy: s.lossPolicy, MaxHolders: s.lockPlaces(),
				BackendRef: locksv1alpha1.BackendReference{Name: backendRef}}}
	}
	var etcdWatch *clientv3.Client
	if s.backend == "etcd" {
		etcdWatch = srv.etcdClient
	}
	obs := newObserver(be.reader, etcdWatch)
	obs.places = int(s.lockPlaces())
	if s.backend == "zookeeper" {
		obs.zk = srv.zkConn
	}
	observeCtx, stopObserving := context.WithCancel(ctx)
	if s.backend == "kubernetes" {
		go obs.watchRecords(observeCtx, e.c)
	}
	for l := range locks {
		name := fmt.Sprintf("lock-%d", l)
		if err := e.c.Create(ctx, lockSpec(name)); err != nil {
			t.Fatal(err)
		}
		res[ns.Name+"/"+name] = &resource{}
		obs.watch(observeCtx, ns.Name+"/"+name, "lockwarden/"+ns.Name+"/"+name)
	}

	var errMu sync.Mutex
	var harnessErrs []string
	errf := func(format string, args ...any) {
		errMu.Lock()
		harnessErrs = append(harnessErrs, fmt.Sprintf(format, args...))
		errMu.Unlock()
	}

	// A client outside lockwarden takes lock-0's key before any claim exists.
	var outside *outsideClient
	if s.outsideHolder {
		outside = holdOutside(ctx, srv.redisClient, "lockwarden/"+ns.Name+"/lock-0", 2*ttl)
	}

	rec := newRecorder()
	go rec.run(ctx, e.c, ns.Name)
	smp := &sampler{c: e.c, ns: ns.Name, reader: be.reader, period: samplePeriod}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	go smp.run(sampleCtx)

	// The workload runs for s.workload, and at least until the last fault healed (as it
	// happened, see below) plus 2×TTL; then nothing new starts and the queue drains. Waits end
	// at the drain deadline: the convergence window (2×TTL), plus the longest critical section,
	// plus a leader-election lease when a fault hit a manager.
	hitManager := false
	for _, f := range plan {
		hitManager = hitManager || managerFault(f.kind)
	}
	stopNew, drain := make(chan struct{}), make(chan struct{})

	var wg sync.WaitGroup
	var zombies atomic.Int64
	var slowHolders []chan struct{}
	for l := range locks {
		lock := fmt.Sprintf("lock-%d", l)
		for i := range claimantsPerLock {
			cl := &claimant{c: e.c, rec: rec, ns: ns.Name, lock: lock, id: i, res: res[ns.Name+"/"+lock],
				rng: rand.New(rand.NewPCG(seed, uint64(l*100+i))), ttl: ttl, writes: 5,
				stopNew: stopNew, drain: drain, silentDeathDetection: ttl / 2, errs: errf, zombies: &zombies,
				ends: s.ends, keepEnded: s.keepEnded, awaitEviction: s.lossPolicy == locksv1alpha1.LossPolicyEvict,
				mode: locksv1alpha1.LockModeShared, alone: s.lockPlaces() == 1}
			if s.exclusiveClaimant(i) {
				cl.mode, cl.alone = locksv1alpha1.LockModeExclusive, true
			}
			if (s.staleWriter || s.longHold > 0) && i == 0 {
				cl.pinned = make(chan struct{})
				slowHolders = append(slowHolders, cl.pinned)
			}
			if s.outsideHolder && l == 0 && i == claimantsPerLock-1 {
				cl.giveUpAfter = ttl / 2 // gives up behind the outside holder, once
			}
			wg.Add(1)
			go func() { defer wg.Done(); cl.run(ctx) }()
		}
	}

	// Faults, in plan order, each healed before the next.
	var grantsBeforeFault int
	fc := faultContext{t: t, ttl: s.lockTTL(), started: started, managers: managers, srv: srv, be: be, rec: rec,
		beforeFirst: func() {
			for _, g := range rec.results() {
				if !g.Acquired.IsZero() {
					grantsBeforeFault++
				}
			}
		}}
	if s.staleWriter {
		fc.trigger = func() bool {
			deadline := time.After(60 * time.Second)
			for _, ch := range slowHolders {
				select {
				case <-ch:
				case <-deadline:
					return false
				}
			}
			time.Sleep(ttl / 5) // a write or two first
			return true
		}
	}
	if s.killBeforeRefresh {
		fc.trigger = func() bool {
			time.Sleep(time.Until(started.Add(plan[0].start))) // the planned time, then the right moment
			deadline := time.Now().Add(2 * ttl)
			for time.Now().Before(deadline) {
				var list locksv1alpha1.LockClaimList
				if err := e.c.List(ctx, &list, client.InNamespace(ns.Name)); err == nil {
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
	}
	var recreated *recreation
	fc.recreate = func(dur time.Duration) string {
		recreated = recreateLock(ctx, e.c, lockSpec("lock-0"), dur)
		return fmt.Sprintf("lock-0 deleted (last token %d) and re-created at %.1fs", recreated.floor, recreated.createdAt.Sub(started).Seconds())
	}
	faults := runFaults(fc, plan)
	if len(plan) == 0 {
		grantsBeforeFault = locks
	}
	healed := time.Since(started)
	workload := max(s.workload, healed+2*ttl)
	drainAfter := workload + 2*ttl + 2*ttl
	if hitManager {
		drainAfter += leLease
	}
	time.AfterFunc(workload-healed, func() { close(stopNew) })
	time.AfterFunc(drainAfter-healed, func() { close(drain) })

	wg.Wait()               // every claimant finished, or gave up waiting at the drain deadline
	grants := rec.results() // Pending now: still waiting after the drain deadline
	stopSampling()
	observedUntil := time.Now()
	stopObserving()

	// No backend key may outlive its claim: after a TTL (and a margin) every key still held must
	// belong to a claim the API shows Held.
	time.Sleep(ttl + sampleMargin)
	orphaned, orphanErr := orphans(ctx, e.c, be.reader, ns.Name)
	if orphanErr != nil {
		errf("listing backend keys: %v", orphanErr)
	}
	if outside != nil {
		orphaned = slices.DeleteFunc(orphaned, func(o string) bool { return strings.Contains(o, outsideIdentity) })
	}

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
	r := Result{Scenario: s.name, Backend: s.backend, Seed: seed, Faults: strings.Join(faults.ran, ", "), TTL: ttl,
		FencingRequired: s.staleWriter, NoLossRequired: s.noLoss, Orphans: orphaned,
		LockDelayRequired: s.lockDelay > 0, EvictionRequired: s.lossPolicy == locksv1alpha1.LossPolicyEvict,
		LongHoldRequired: s.longHold, LongestHold: LongestHold(grants), PlacesRequired: s.lockPlaces() > 1}
	if r.Faults == "" {
		r.Faults = "none"
	}
	if s.outsideHolder {
		r.Faults = "outside holder 2×TTL"
	}
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
		r.Violations = append(r.Violations, findings("register", prefixed(lock, CheckRegisterLog(log)))...)
		st := ClassifyWrites(lock, grants, log)
		r.Stale.Rejected += st.Rejected
		r.Stale.InWindow += st.InWindow
		r.Stale.AfterNewer += st.AfterNewer
		r.Stale.HolderRejected += st.HolderRejected
		if st.AfterNewer > 0 {
			r.Violations = append(r.Violations, Finding{"stale-window", fmt.Sprintf("%s: %d stale writes accepted after the register had seen a newer token", lock, st.AfterNewer)})
		}
		if st.HolderRejected > 0 {
			r.Violations = append(r.Violations, Finding{"stale-window", fmt.Sprintf("%s: %d writes of a current holder rejected (a newer token reached the resource during its hold)", lock, st.HolderRejected)})
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
	r.Violations = append(r.Violations, findings("tokens", CheckTokens(grants))...)
	placesOf := func(string) int { return int(s.lockPlaces()) }
	if s.lockPlaces() > 1 {
		r.Violations = append(r.Violations, findings("places", CheckPlaces(grants, placesOf))...)
	} else {
		r.Violations = append(r.Violations, findings("exclusion", CheckExclusion(grants))...)
	}
	r.Violations = append(r.Violations, findings("final-is-final", CheckFinalIsFinal(grants))...)
	samples, snapshots := smp.results()
	r.HeldSamples = len(samples)
	for _, smp := range samples {
		if smp.Backend.Known && slices.Contains(smp.Backend.Places, smp.Identity) {
			r.PlaceSamples++
		}
	}
	r.Violations = append(r.Violations, findings("phantom", CheckBackendSamples(samples, sampleMargin, ttl/3+time.Second))...)
	r.Violations = append(r.Violations, findings("api-snapshot", CheckControllerExclusion(snapshots, sampleMargin, placesOf))...)
	timelines := obs.results(observedUntil)
	for _, tl := range timelines {
		r.ViewStates += len(tl.States)
	}
	view := CheckBackendView(timelines, grants, ViewGrace)
	r.Violations = append(r.Violations, findings("backend-view", view.Violations)...)
	r.ViewAllowed, r.ViewLongest = view.Allowed, view.Longest
	r.Violations = append(r.Violations, findings("deposed-leader", faults.deposed)...)
	if s.lockDelay > 0 {
		delay := CheckLockDelay(grants, s.lockDelay)
		r.Violations = append(r.Violations, findings("lock-delay", delay.Violations)...)
		r.DelayedGrants = delay.Checked
	}
	if s.lossPolicy == locksv1alpha1.LossPolicyEvict {
		r.Violations = append(r.Violations, findings("evicted", CheckEvicted(grants, evictionBound))...)
		for _, g := range grants {
			if g.Lost && !earliest(g.Evicted, g.PodGone).IsZero() {
				r.Evictions++
			}
		}
	}
	if outside != nil {
		r.Violations = append(r.Violations, findings("outside-holder", outside.problems())...)
	}
	if recreated != nil {
		r.Violations = append(r.Violations, findings("token-floor", CheckTokensAbove(grants, ns.Name+"/"+recreated.lock, recreated.createdAt, recreated.floor))...)
		for _, g := range grants {
			if g.Lock == ns.Name+"/"+recreated.lock && g.Reason == string(locksv1alpha1.ReasonLockNotFound) {
				recreated.failed++
			}
		}
		faults.log = append(faults.log, fmt.Sprintf("%d claims of %s ended with reason LockNotFound", recreated.failed, recreated.lock))
	}
	rec.mu.Lock()
	r.Violations = append(r.Violations, findings("history", rec.errs)...)
	rec.mu.Unlock()
	html := filepath.Join(os.TempDir(), fmt.Sprintf("lockwarden-reliability-%s-%s-%d.html", s.backend, s.name, seed))
	// The fenced-mutex model covers the holds that hold alone (all of them on a mutex).
	lin, err := CheckLinearizable(Operations(started, holdsAlone(grants), writes), 5*time.Minute, html)
	if err != nil {
		t.Errorf("porcupine visualization: %v", err)
	}
	r.Linearizable = string(lin)
	if lin != "Ok" {
		t.Logf("porcupine: %s; history at %s", lin, html)
	}
	r.Liveness = ComputeLiveness(grants)
	r.Lost = r.Liveness.Lost
	r.Duration = time.Since(started)

	errMu.Lock()
	for _, h := range harnessErrs {
		t.Logf("harness: %s", h)
	}
	errMu.Unlock()
	for _, l := range faults.log {
		t.Logf("fault: %s", l)
	}
	if s.longHold > 0 {
		t.Logf("longest hold that was not lost %s (required %s)", r.LongestHold.Round(time.Second), s.longHold)
	}
	if s.lockDelay > 0 || s.lossPolicy != "" {
		t.Logf("grants after a hold that ended without a release %d (lock delay %s), lost holds whose pod was evicted %d of %d",
			r.DelayedGrants, s.lockDelay, r.Evictions, r.Liveness.Lost)
	}
	t.Logf("writes %d, rejected by fencing %d, stale in the window %d, stale at the shadow %d, zombie holders %d, lost holds %d, held samples %d, backend states %d, mismatches within grace %d (longest %s)",
		r.Writes, r.Rejected, r.Stale.InWindow, r.ShadowStale, zombies.Load(), r.Lost, r.HeldSamples, r.ViewStates, r.ViewAllowed, r.ViewLongest)
	if s.lockPlaces() > 1 {
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
		t.Logf("held samples whose identity held a place %d of %d (backend unreadable in %d), backend states with places %d",
			r.PlaceSamples, len(samples), unknown, withPlaces)
	}
	for _, m := range managers {
		t.Logf("manager %s restarts %d, log %s", m.name, m.restarts, m.log)
	}
	if !r.Passed() && s.mutant == "" {
		t.Logf("grants:\n%s\n%s", describeGrants(grants), managerLogs(managers))
		for _, g := range grants {
			if g.Lost {
				t.Logf("lost: %s", describeLoss(g, samples))
			}
		}
	}
	return r
}

// prefixed puts "lock: " before each line.
func prefixed(lock string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = lock + ": " + l
	}
	return out
}

// recreateLock deletes lock, waits until it is gone, waits out the rest of dur, and creates it
// again with the same name and spec. It returns the last token the deleted lock issued (read
// after the deletion was requested, when no more can be issued) and when the new one was created.
func recreateLock(ctx context.Context, c client.Client, lock *locksv1alpha1.DistributedLock, dur time.Duration) *recreation {
	rc := &recreation{lock: lock.Name}
	begin := time.Now()
	var cur locksv1alpha1.DistributedLock
	if err := c.Get(ctx, client.ObjectKeyFromObject(lock), &cur); err == nil {
		rc.floor = cur.Status.FencingToken
	}
	_ = c.Delete(ctx, &cur)
	deadline := time.Now().Add(dur + 60*time.Second)
	for time.Now().Before(deadline) {
		err := c.Get(ctx, client.ObjectKeyFromObject(lock), &cur)
		if apierrors.IsNotFound(err) {
			break
		}
		if err == nil {
			rc.floor = max(rc.floor, cur.Status.FencingToken)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Until(begin.Add(dur)))
	fresh := lock.DeepCopy()
	_ = c.Create(ctx, fresh)
	rc.createdAt = fresh.CreationTimestamp.Time
	if rc.createdAt.IsZero() {
		rc.createdAt = time.Now()
	}
	return rc
}

// faultContext is what runFaults needs.
type faultContext struct {
	t        *testing.T
	ttl      time.Duration // the locks' lease
	started  time.Time
	managers []*manager
	srv      *servers
	be       backendEnv
	// beforeFirst runs just before the first fault (to count the grants that make a run valid).
	beforeFirst func()
	// trigger, when set, replaces the first fault's start time: it blocks until the moment has
	// come and says whether it did.
	trigger func() bool
	// recreate performs a lock-recreate fault lasting dur and describes it.
	recreate func(dur time.Duration) string
	// rec is the claim history, which a deposed-leader fault waits on.
	rec *recorder
}

// faultsRun is what runFaults did.
type faultsRun struct {
	// log narrates it, with times since the scenario started.
	log []string
	// ran lists the faults as they actually ran (start/duration), or as skipped.
	ran []string
	// deposed lists what a deposed leader did after it woke that it must not do.
	deposed []string
}

// runFaults injects the plan's faults at their times and heals each.
func runFaults(fc faultContext, plan []fault) faultsRun {
	t := fc.t
	var out faultsRun
	logf := func(format string, args ...any) {
		out.log = append(out.log, fmt.Sprintf("%6.1fs ", time.Since(fc.started).Seconds())+fmt.Sprintf(format, args...))
	}
	for i, f := range plan {
		if i == 0 && fc.trigger != nil {
			if !fc.trigger() {
				logf("the moment to inject never came; injecting anyway")
			}
		} else {
			time.Sleep(time.Until(fc.started.Add(f.start)))
		}
		if i == 0 {
			fc.beforeFirst()
		}
		var leader *manager
		if managerFault(f.kind) {
			var err error
			if leader, err = waitLeader(context.Background(), fc.managers, 30*time.Second); err != nil {
				logf("%s skipped: %v", f.kind, err)
				out.ran = append(out.ran, string(f.kind)+" skipped (no leader)")
				continue
			}
		}
		injected := time.Since(fc.started)
		logf("inject %s (%s)", f.kind, f.dur)
		heal := func() {}
		switch f.kind {
		case faultLeaderDeposed:
			what, ok := deposeLeader(fc, leader, f.dur, logf)
			out.deposed = append(out.deposed, what...)
			if !ok {
				out.ran = append(out.ran, string(f.kind)+" skipped (no grant within the fault's time)")
			} else {
				out.ran = append(out.ran, fmt.Sprintf("%s@%s/%s", f.kind, injected.Round(time.Second), (time.Since(fc.started)-injected).Round(time.Second)))
			}
			logf("healed %s", f.kind)
			continue
		case faultLeaderKill:
			if err := leader.kill(); err != nil {
				t.Errorf("killing %s: %v", leader.name, err)
			}
			heal = func() {
				if err := leader.restart(); err != nil {
					t.Errorf("restarting %s: %v", leader.name, err)
				}
			}
		case faultClockForward, faultClockBack:
			offset := 2 * fc.ttl
			if f.kind == faultClockBack {
				offset = -offset
			}
			if err := leader.jumpClock(offset); err != nil {
				t.Errorf("stepping the clock of %s: %v", leader.name, err)
			}
			heal = func() { _ = leader.jumpClock(0) }
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
		case faultRedisRestart, faultEtcdRestart, faultZKRestart, faultPGRestart, faultMariaRestart, faultRedlockNodeRestart:
			server := fc.srv.restartTarget(f.kind)
			server.Kill()
			heal = server.Restart
		case faultRedisPause:
			fc.srv.redis.Pause()
			heal = fc.srv.redis.Resume
		case faultRedisFlush:
			if err := fc.srv.redisClient.FlushAll(context.Background()).Err(); err != nil {
				t.Errorf("flushing Redis: %v", err)
			}
		case faultRedlockNodeBlackhole, faultRedlockMajorityBlackhole:
			cut := fc.be.nodeProxies[:1]
			if f.kind == faultRedlockMajorityBlackhole {
				cut = fc.be.nodeProxies[:2]
			}
			for _, p := range cut {
				p.Partition(faultproxy.Blackhole)
			}
			heal = func() {
				for _, p := range cut {
					p.Heal()
				}
			}
		case faultRedisBlackhole, faultEtcdBlackhole, faultZKBlackhole, faultPGBlackhole, faultMariaBlackhole:
			fc.be.proxy.Partition(faultproxy.Blackhole)
			heal = fc.be.proxy.Heal
		case faultRedisRefuse, faultEtcdRefuse:
			fc.be.proxy.Partition(faultproxy.Refuse)
			heal = fc.be.proxy.Heal
		case faultRedisLatency, faultEtcdLatency:
			fc.be.proxy.SetLatency(faultproxy.Upstream, backendLatency)
			fc.be.proxy.SetLatency(faultproxy.Downstream, backendLatency)
			heal = fc.be.proxy.Heal
		case faultLockRecreate:
			logf("%s", fc.recreate(f.dur))
			logf("healed %s", f.kind)
			out.ran = append(out.ran, fmt.Sprintf("%s@%s/%s", f.kind, injected.Round(time.Second), (time.Since(fc.started)-injected).Round(time.Second)))
			continue
		}
		time.Sleep(f.dur)
		heal()
		logf("healed %s", f.kind)
		out.ran = append(out.ran, fmt.Sprintf("%s@%s/%s", f.kind, injected.Round(time.Second), (time.Since(fc.started)-injected).Round(time.Second)))
	}
	return out
}

// deposeLeader arms the leader's grant-status pause point and waits (at most limit) until the
// leader stops there. It then waits until a standby has become leader and the claim the stopped
// leader was granting has been seen ended (the new leader granted it and its pod ended; at most
// 4×TTL after the takeover, the longest critical section and a silent death's detection), and
// lets the stopped one go on. From then until that run of the process ends, the deposed leader
// must write nothing that counts: it returns every grant its log shows (a token issued by a
// deposed leader), and whether the fault happened at all.
func deposeLeader(fc faultContext, leader *manager, limit time.Duration, logf func(string, ...any)) ([]string, bool) {
	deadline := time.Now().Add(limit)
	if err := leader.armFailpoint(string(failpoint.GrantStatus)); err != nil {
		fc.t.Errorf("arming %s: %v", leader.name, err)
		return nil, false
	}
	var claim string
	for claim == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		claim = leader.stoppedAt()
	}
	if claim == "" {
		leader.disarmFailpoint()
		logf("%s never reached a grant", leader.name)
		return nil, false
	}
	leader.markStopped()
	_, name, _ := strings.Cut(claim, "/")
	logf("%s stopped before writing the grant of %s", leader.name, claim)
	var others []*manager
	for _, m := range fc.managers {
		if m != leader {
			others = append(others, m)
		}
	}
	if _, err := waitLeader(context.Background(), others, leLease+10*time.Second); err != nil {
		logf("no standby took over: %v", err)
	} else {
		logf("a standby took over")
	}
	ended := fc.rec.endedChan(name)
	select {
	case <-ended:
		for _, g := range fc.rec.results() {
			if g.Claim == name {
				logf("%s was seen ended: Held at %s with token %d, then %s (%s: %s)", name, stamp(g.Acquired), g.Token, g.Phase, g.Reason, g.Message)
			}
		}
	case <-time.After(4 * fc.ttl):
		logf("%s was not seen ended in time", name)
	}
	woke := leader.logSize()
	_ = leader.resume()
	leader.disarmFailpoint()
	logf("%s resumed", leader.name)
	// The deposed run ends when it learns it lost the election (it exits; the supervisor starts
	// a fresh one) or, at the latest, when the next run begins.
	time.Sleep(leLease)
	var out []string
	for _, line := range strings.Split(leader.logSince(woke), "\n") {
		if strings.Contains(line, "Starting manager") {
			break // a new run of the process: a standby again, allowed to lead later
		}
		if strings.Contains(line, "Lock granted") || strings.Contains(line, "Resumed hold") {
			out = append(out, fmt.Sprintf("%s, deposed, after it woke: %s", leader.name, strings.TrimSpace(line)))
		}
	}
	return out, true
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
