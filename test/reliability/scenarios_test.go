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
	"math/rand/v2"
	"slices"
	"time"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/mutant"
)

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
	// standby makes the claimants the replicas of an active/passive Deployment
	// (standby_test.go): each creates pods annotated lock-wait: Standby on a Node of its own,
	// whose claims the controller makes, on locks with holderNodeLossSeconds of 2 s; their holds
	// end in turn by the pod's deletion, at once or graceful, and by the node's loss (ends, when
	// set, replaces that turn). The role-label checkers judge the pods' labels, and the fenced
	// register must have refused the writes of a holder cut off with its node.
	standby bool
	// gated makes the claimants pods that wait behind lockwarden's scheduling gate
	// (gated_test.go), scheduled by the real kube-scheduler once the controller lifts the gate;
	// their holds end in turn by the pod's exit (0 or a death) and its deletion, at once or
	// graceful (ends, when set, replaces that turn). The gates and admissions checkers judge
	// the gates, and the role-label checkers the pods' labels.
	gated bool
	// reentry makes every hold re-enter its lock: after its first write the claimant makes a
	// second claim for its pod on the lock, which must share the hold and its token at once
	// (reentry.go), writes once more, and deletes it; the lock must stay held for the first.
	reentry bool
	// initAcquire makes the claimants pods whose init container runs the real `lockctl acquire`
	// (acquire_run_test.go): lockctl makes the pod's claim, and the pod's main container starts
	// with the token lockctl wrote; holds end as gated pods' do.
	initAcquire bool
	// jobs makes the claimants create Jobs that ask for the lock by annotation, suspended
	// (jobs_run_test.go), on locks with lockDelaySeconds of jobLockDelay: the controller makes
	// each Job's claim and resumes the Job with its token once the claim holds; the claimant
	// runs it (writes with that token), then completes it, fails it, deletes it, or kills one of
	// its pods mid-run and completes it (ends, when set, replaces that mix). The jobs checkers
	// judge the Jobs' history beside the claims'.
	jobs bool
	// commands makes the claimants `lockctl run` processes outside any pod (commands_run_test.go),
	// each behind a fault proxy of its own, whose COMMANDs stamp their critical sections; the
	// commands checker judges the stamps: never two COMMANDs at once on a lock.
	commands bool
	// severalLocks makes claimant 0 of each lock a holder of both locks together (spec.lockNames,
	// named in the two orders by the two claimants: crossing claims), among one-lock claimants;
	// its holds write to both registers, each with its lock's token. The history checker fails a
	// claim seen Held without a token for every one of its locks.
	severalLocks bool
	// mutant runs the managers with this deliberate bug (internal/mutant), and with the bugs in
	// alsoMutants; the run must then fail, and expect must be among the checkers that failed it.
	mutant      string
	alsoMutants []mutant.Name
	expect      string
}

// mutants lists the scenario's deliberate bugs, its mutant first; none for a scenario that runs
// no mutant.
func (s scenario) mutants() []string {
	if s.mutant == "" {
		return nil
	}
	out := []string{s.mutant}
	for _, m := range s.alsoMutants {
		out = append(out, string(m))
	}
	return out
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
		// Standby pods: holders deleted, deleted gracefully and cut off by their node's loss
		// (last, so that the seeds of the others stay as they were).
		standby(""),
		// Jobs as holders: completed, failed, deleted, and with a pod killed mid-run.
		jobs(""),
		// lockctl run as holders, one cut off from the API server while its command runs.
		commandRuns(faultHolderPartition),
		// Gated pods, scheduled by kube-scheduler once their gate is lifted, across a leader's
		// death.
		gated(faultLeaderKill),
		// Crossing claims of both locks at once, across a leader's death (last, as above).
		severalLocks("kubernetes", faultLeaderKill),
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

// severalLocks is crossing claims of both locks together beside one-lock claims, with a fault of
// kind ("" for none).
func severalLocks(backend string, kind faultKind) scenario {
	return withFault(scenario{name: "several-locks", backend: backend, replicas: 1, severalLocks: true, workload: 30 * time.Second}, kind)
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

// standby is the standby workload on the built-in backend with a fault of kind ("" for none):
// replicas of an active/passive Deployment whose holders are killed, deleted gracefully and cut
// off with their node, while the fault hits the managers (two replicas) or the backend.
func standby(kind faultKind) scenario {
	// Without a fault every hold ends by the claimant's doing: none may be lost.
	return withFault(scenario{name: "standby", backend: "kubernetes", replicas: 1, standby: true, noLoss: kind == "", workload: 30 * time.Second}, kind)
}

// withFault is the workload scenario s with a fault of kind, or s itself for "": named after
// the fault, 40 s long, with two replicas when the fault hits the managers.
func withFault(s scenario, kind faultKind) scenario {
	if kind == "" {
		return s
	}
	s.name, s.kinds, s.workload = s.name+"-"+string(kind), []faultKind{kind}, 40*time.Second
	if managerFault(kind) {
		s.replicas = 2
	}
	return s
}

// jobs is the jobs workload on the built-in backend with a fault of kind ("" for none): Jobs
// resumed by the controller once their claim holds, which complete, fail, are deleted or lose a
// pod mid-run, while the fault hits the managers (two replicas).
func jobs(kind faultKind) scenario {
	// Without a fault every hold ends by the Job's end: none may be lost.
	return withFault(scenario{name: "jobs", backend: "kubernetes", replicas: 1, jobs: true, lockDelay: jobLockDelay, noLoss: kind == "", workload: 30 * time.Second}, kind)
}

// commandRuns is the commands workload on the built-in backend with a fault of kind ("" for
// none): lockctl run holders whose COMMANDs finish, are interrupted, or die with their machine.
func commandRuns(kind faultKind) scenario {
	// The locks follow lockctl's advice: lockDelaySeconds at least --grace, so that a COMMAND
	// is gone before the next holder starts even if it takes its grace to stop.
	return withFault(scenario{name: "lockctl-run", backend: "kubernetes", replicas: 1, commands: true, lockDelay: commandGrace, workload: 40 * time.Second}, kind)
}

// reentry is a run on backend whose holds each re-enter their lock once, with a fault of kind
// ("" for none; two replicas when it hits the managers).
func reentry(backend string, kind faultKind) scenario {
	return withFault(scenario{name: "reentry", backend: backend, replicas: 1, reentry: true, workload: 30 * time.Second}, kind)
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
		// Every hold ends by its pod's deletion or death, without a fault: each is followed by a
		// waiter granted at once. (In loss-evict the Redis cut-off could take most of the run,
		// and the grants after it came later than the delay anyway: run seed 435620 missed it.)
		s = scenario{name: "lock-delay", backend: "redis", replicas: 1, lockDelay: 3 * time.Second,
			ends: []EndKind{EndPodDelete, EndSilentDeath}, workload: 20 * time.Second, expect: "lock-delay"}
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
	case mutant.KeepHolderLabel:
		// Every hold ends by its node's loss: the cut-off pod keeps its label while the next
		// pod is labelled holder.
		s = standby("")
		s.ends, s.workload, s.expect = []EndKind{EndNodeLoss}, 20*time.Second, "holder-labels"
	case mutant.ResumeUnheld:
		// Every Job that queues behind a running one is resumed at once.
		s = jobs("")
		s.workload, s.expect = 20*time.Second, "job-runs"
	case mutant.RecordAnyHolder:
		// Every waiting pod is marked holder beside the one that holds: its gate lifted, it is
		// scheduled and runs beside the holder.
		s = gated("")
		s.workload, s.expect = 20*time.Second, "gates"
	case mutant.JoinAnyHold:
		// Every waiting claim joins the current holder's hold: two pods hold the mutex at once.
		s = reentry("kubernetes", "")
		s.workload, s.expect = 20*time.Second, "exclusion"
	case mutant.ResumeLapsed:
		// The leader is killed while Redis holds keys; the standby takes over only after the
		// 15 s leader-election lease, three leases after their last renewal: every hold lapsed.
		// Claimant 0 of each lock holds from its first grant to the end, so that a holder still
		// lives when the new leader resumes its hold (the first run, whose holds all ended
		// during the failover, let the mutant survive: seed 594850017).
		s = scenario{name: "leader-kill", backend: "redis", replicas: 2, kinds: []faultKind{faultLeaderKill}, workload: 40 * time.Second,
			longHold: 20 * time.Second, expect: "lapse"}
	case mutant.IgnoreLocalDeadline:
		// A holder cut off from the API server runs its command on past the grant to the next.
		s = commandRuns(faultHolderPartition)
		s.workload, s.expect = 30*time.Second, "commands"
	case mutant.GrantOneByOne:
		// Every claim of two locks is reported Held with its home lock alone.
		s = severalLocks("kubernetes", "")
		s.workload, s.expect = 20*time.Second, "history"
	case mutant.TerminatingHolderLabel:
		// Every hold ends by a graceful deletion: the terminating pod stays labelled holder for
		// its TTL/2..1.5×TTL of termination, longer than the 2 s grace.
		s = standby("")
		s.ends, s.workload, s.expect = []EndKind{EndGracefulDelete}, 20*time.Second, "holder-record"
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
			if hitsManagers(k) && k != faultAPILatency {
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
	// Standby pods (after the others, so that their seeds stay as they were): without a fault,
	// across a leader's death, its partition from the API server and its pause past the
	// leader-election lease, and while Redis is cut off from the managers.
	out = append(out, standby(""), standby(faultLeaderKill), standby(faultAPIBlackhole), standby(faultLeaderPause))
	redis := standby(faultRedisBlackhole)
	redis.backend = "redis"
	out = append(out, redis)
	// Jobs as holders (after the others, so that their seeds stay as they were): without a
	// fault, across a leader's death, its partition from the API server and its pause past the
	// leader-election lease.
	out = append(out, jobs(""), jobs(faultLeaderKill), jobs(faultAPIBlackhole), jobs(faultLeaderPause))
	// lockctl run holders (after the others, so that their seeds stay as they were): without a
	// fault, a holder cut off from the API server, and a leader's death.
	out = append(out, commandRuns(""), commandRuns(faultHolderPartition), commandRuns(faultLeaderKill))
	// Faults under the API server (after the others, so that their seeds stay as they were): the
	// kube-apiserver or its etcd stopped for 1–3 TTLs, with two replicas; on the built-in backend,
	// whose locks live there, and on Redis, whose do not.
	for _, s := range []struct {
		backend string
		kind    faultKind
	}{{"kubernetes", faultAPIServerPause}, {"kubernetes", faultAPIEtcdPause}, {"redis", faultAPIServerPause}} {
		out = append(out, scenario{name: string(s.kind), backend: s.backend, replicas: 2, kinds: []faultKind{s.kind}, workload: 40 * time.Second})
	}
	// The same killed and started again (after the others): the API server with its etcd
	// compacted, so that every watch resumes into 410 Gone and lists again, and its etcd.
	for _, s := range []struct {
		backend string
		kind    faultKind
	}{{"kubernetes", faultAPIServerRestart}, {"kubernetes", faultAPIEtcdRestart}, {"redis", faultAPIServerRestart}} {
		out = append(out, scenario{name: string(s.kind), backend: s.backend, replicas: 2, kinds: []faultKind{s.kind}, workload: 40 * time.Second})
	}
	// A lockctl holder cut off one way (after the others): deaf (heard, hearing nothing) and
	// mute (hearing, not heard).
	out = append(out, commandRuns(faultHolderDeaf), commandRuns(faultHolderMute))
	// Gated pods scheduled by kube-scheduler (after the others): without a fault, across a
	// leader's death, and with the API server stopped for 1–3 TTLs.
	pause := gated(faultAPIServerPause)
	pause.replicas = 2
	out = append(out, gated(""), gated(faultLeaderKill), pause)
	// Holds that re-enter their lock (after the others): without a fault, and across a leader's
	// death, on the built-in backend and on Redis.
	out = append(out, reentry("kubernetes", ""), reentry("kubernetes", faultLeaderKill), reentry("redis", faultLeaderKill))
	// Pods whose init container runs lockctl acquire (after the others): without a fault, across
	// a leader's death, and with the API server stopped for 1–3 TTLs while they wait.
	initPause := initAcquire(faultAPIServerPause)
	initPause.replicas = 2
	out = append(out, initAcquire(""), initAcquire(faultLeaderKill), initPause)
	// Crossing claims of both locks at once beside one-lock claims (after the others): on every
	// backend without a fault, across a leader's death and pause, and with the API server cut off
	// from the leader, on the built-in backend and Redis.
	for _, backend := range []string{"kubernetes", "redis", "etcd", "zookeeper", "postgresql", "mariadb", "redlock"} {
		out = append(out, severalLocks(backend, ""))
	}
	out = append(out, severalLocks("kubernetes", faultLeaderKill), severalLocks("kubernetes", faultLeaderPause),
		severalLocks("kubernetes", faultAPIBlackhole), severalLocks("redis", faultLeaderKill), severalLocks("etcd", faultLeaderKill))
	return out
}

// restartsAPIServer says whether the scenario kills the API server, after which every watch of
// the API that resumes from before the fault may be answered 410 Gone: its claim history is read
// from the API server's etcd instead (recorder.runFromRegistry).
func (s scenario) restartsAPIServer() bool {
	return slices.Contains(s.kinds, faultAPIServerRestart)
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
