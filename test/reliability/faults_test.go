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
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/failpoint"
	"github.com/lockwarden/lockwarden/internal/testutil/faultproxy"
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
	// faultHolderPartition cuts a lockctl holder whose COMMAND runs off from the API server, both
	// ways (commands runs): its hold's local deadline must stop the COMMAND before the next grant.
	faultHolderPartition faultKind = "holder-partition"
	// The same one way only. faultHolderDeaf stalls what the API server sends the holder while
	// its requests still arrive: it is heard but hears nothing, and only its local deadline can
	// stop its COMMAND. faultHolderMute stalls what the holder sends while the API server's
	// replies and watch events still reach it: its heartbeat is not heard, its claim ends, and
	// it must hear that on its watch and stop its COMMAND.
	faultHolderDeaf faultKind = "holder-partition-deaf"
	faultHolderMute faultKind = "holder-partition-mute"
	// Faults under the API server: SIGSTOP of envtest's kube-apiserver, or of the etcd it stores
	// everything in, SIGCONT at heal. Every client of the API (the managers, the holders, and the
	// harness's own reads) waits meanwhile.
	faultAPIServerPause faultKind = "apiserver-pause"
	faultAPIEtcdPause   faultKind = "apiserver-etcd-pause"
	// faultAPIServerRestart SIGKILLs kube-apiserver and compacts its etcd to the latest
	// revision; at heal the API server starts again on the same port with an empty watch cache,
	// so every watch that resumes from a resourceVersion before the fault is answered 410 Gone
	// and must list again. faultAPIEtcdRestart SIGKILLs the API server's etcd and starts it
	// again with its data at heal.
	faultAPIServerRestart faultKind = "apiserver-restart"
	faultAPIEtcdRestart   faultKind = "apiserver-etcd-restart"
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

// controlPlaneFault says whether a fault hits the API server or its etcd: every manager feels it,
// as it feels a manager fault, but there is no leader to aim at.
func controlPlaneFault(k faultKind) bool {
	return k == faultAPIServerPause || k == faultAPIEtcdPause || k == faultAPIServerRestart || k == faultAPIEtcdRestart
}

// hitsManagers says whether a fault disturbs the managers (a manager fault or one under the API
// server): such scenarios run two replicas, and their drain waits a leader-election lease more.
func hitsManagers(k faultKind) bool { return managerFault(k) || controlPlaneFault(k) }

// fault is one planned fault: start after the workload began, lasting dur.
type fault struct {
	kind       faultKind
	start, dur time.Duration
}

func (f fault) String() string {
	return fmt.Sprintf("%s@%s/%s", f.kind, f.start.Round(time.Second), f.dur.Round(time.Second))
}

// recreation records a lock-recreate fault: the last token the deleted lock issued, and when its
// successor was created.
type recreation struct {
	lock      string
	floor     int64
	createdAt time.Time
	failed    int // claims that ended Failed with LockNotFound
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
	// partitionHolder performs a holder-partition fault (both ways, or one way by mode) lasting
	// dur, describes it and says whether it found a holder to cut off.
	partitionHolder func(dur time.Duration, mode faultproxy.Mode) (string, bool)
	// rec is the claim history, which a deposed-leader fault waits on.
	rec *recorder
	// controlPlane has the processes of the API server and its etcd, which a fault under the
	// API server pauses.
	controlPlane *env
	// audit is the API server's audit log, where a deposed leader's writes are looked for, from
	// offset auditFrom (the run's start) on.
	audit     string
	auditFrom int64
}

// faultsRun is what runFaults did.
type faultsRun struct {
	// log narrates it, with times since the scenario started.
	log []string
	// ran lists the faults as they actually ran (start/duration), or as skipped.
	ran []string
	// skipped says, for each fault that did not happen, why: the run then proves nothing about
	// it and fails.
	skipped []string
	// deposed lists what a deposed leader did after it woke that it must not do.
	deposed []string
	// spans are the faults that ran, each from its injection to its heal.
	spans []Span
	// startups are the apiserver-restart faults, each from the kill to a second after the
	// restarted API server answered /readyz: its authorizer may refuse every request meanwhile.
	startups []Span
}

// runFaults injects the plan's faults at their times and heals each.
func runFaults(fc faultContext, plan []fault) faultsRun {
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
				out.skip(f.kind, "no leader")
				continue
			}
		}
		injected := time.Since(fc.started)
		logf("inject %s (%s)", f.kind, f.dur)
		switch f.kind {
		case faultLeaderDeposed:
			what, ok := deposeLeader(fc, leader, f.dur, logf)
			out.deposed = append(out.deposed, what...)
			if !ok {
				out.skip(f.kind, "no grant within the fault's time")
			} else {
				out.healed(fc.started, f.kind, injected)
			}
			logf("healed %s", f.kind)
			continue
		case faultHolderPartition, faultHolderDeaf, faultHolderMute:
			mode := map[faultKind]faultproxy.Mode{faultHolderPartition: faultproxy.Blackhole,
				faultHolderDeaf: faultproxy.BlackholeDownstream, faultHolderMute: faultproxy.BlackholeUpstream}[f.kind]
			what, ok := fc.partitionHolder(f.dur, mode)
			logf("%s", what)
			if !ok {
				out.skip(f.kind, what)
			} else {
				out.healed(fc.started, f.kind, injected)
			}
			continue
		case faultLockRecreate:
			logf("%s", fc.recreate(f.dur))
			logf("healed %s", f.kind)
			out.healed(fc.started, f.kind, injected)
			continue
		}
		heal := inject(fc, leader, f.kind)
		time.Sleep(f.dur)
		heal()
		logf("healed %s", f.kind)
		out.healed(fc.started, f.kind, injected)
	}
	return out
}

// skip records a fault of kind that did not happen, and why.
func (out *faultsRun) skip(kind faultKind, why string) {
	out.ran = append(out.ran, fmt.Sprintf("%s skipped (%s)", kind, why))
	out.skipped = append(out.skipped, fmt.Sprintf("%s did not happen: %s", kind, why))
}

// healed records a fault of kind that was injected at injected (since started) and has just
// healed: as it ran, and its span.
func (out *faultsRun) healed(started time.Time, kind faultKind, injected time.Duration) {
	lasted := time.Since(started) - injected
	out.ran = append(out.ran, fmt.Sprintf("%s@%s/%s", kind, injected.Round(time.Second), lasted.Round(time.Second)))
	out.spans = append(out.spans, Span{From: started.Add(injected), To: started.Add(injected + lasted)})
	if kind == faultAPIServerRestart {
		out.startups = append(out.startups, Span{From: started.Add(injected), To: started.Add(injected + lasted + time.Second)})
	}
}

// inject injects a fault that lasts until the returned heal is called; leader is the manager a
// manager fault hits.
func inject(fc faultContext, leader *manager, kind faultKind) (heal func()) {
	t := fc.t
	heal = func() {}
	switch kind {
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
		if kind == faultClockBack {
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
	case faultAPIServerPause, faultAPIEtcdPause:
		p := fc.controlPlane.apiserver
		if kind == faultAPIEtcdPause {
			p = fc.controlPlane.etcd
		}
		if err := p.signal(syscall.SIGSTOP); err != nil {
			t.Errorf("pausing: %v", err)
		}
		heal = func() { _ = p.signal(syscall.SIGCONT) }
	case faultAPIServerRestart:
		heal = restartAPIServerCompacted(t, fc.controlPlane)
	case faultAPIEtcdRestart:
		p := fc.controlPlane.etcd
		if err := p.kill(); err != nil {
			t.Errorf("killing: %v", err)
		}
		heal = func() {
			if err := p.restart(); err != nil {
				t.Error(err)
			}
		}
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
		server := fc.srv.restartTarget(kind)
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
		if kind == faultRedlockMajorityBlackhole {
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
	}
	return heal
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
	woke, wokeAt := leader.logSize(), time.Now()
	_ = leader.resume()
	leader.disarmFailpoint()
	logf("%s resumed", leader.name)
	// The deposed run ends when it learns it lost the election (it exits; the supervisor starts
	// a fresh one) or, at the latest, when the next run begins.
	time.Sleep(leLease)
	until := leader.exitedSince(wokeAt)
	if until.IsZero() {
		until = time.Now()
		logf("%s has not exited %s after it woke", leader.name, leLease)
	} else {
		logf("%s exited %.1fs after it woke", leader.name, until.Sub(wokeAt).Seconds())
	}
	out := deposedWrites(fc.audit, fc.auditFrom, leader.name, wokeAt, until, logf)
	// Its log too, which names the claim: a grant or a resumed hold it reports.
	for _, line := range strings.Split(leader.logSince(woke), "\n") {
		if strings.Contains(line, "Starting manager") {
			break // a new run of the process: a standby again, allowed to lead later
		}
		for _, act := range []string{"Lock granted", "Resumed hold", "Resumed place"} {
			if strings.Contains(line, act) {
				out = append(out, fmt.Sprintf("%s, deposed, logged after it woke: %s", leader.name, strings.TrimSpace(line)))
			}
		}
	}
	return out, true
}

// deposedWrites lists the writes of replica that the API server accepted between from and to,
// reading its audit log from offset off on. A log that shows no write of replica before from
// (when it led) would mean the checker cannot see the replica at all: that is a finding too.
func deposedWrites(audit string, off int64, replica string, from, to time.Time, logf func(string, ...any)) []string {
	writes, err := ReadAuditLog(audit, off)
	if err != nil {
		return []string{err.Error()}
	}
	led := AcceptedWrites(writes, replica, time.Time{}, from)
	if len(led) == 0 {
		return []string{fmt.Sprintf("the audit log shows no write of %s while it led: the checker cannot tell its writes apart", replica)}
	}
	tried := 0
	for _, w := range writes {
		if w.Replica == replica && !w.At.Before(from) && !w.At.After(to) {
			tried++
		}
	}
	var out []string
	for _, w := range AcceptedWrites(writes, replica, from, to) {
		out = append(out, fmt.Sprintf("%s, deposed, wrote after it woke: %s", replica, w))
	}
	logf("audit log: %d writes of %s while it led; after it woke, %d tried, %d accepted", len(led), replica, tried, len(out))
	return out
}
