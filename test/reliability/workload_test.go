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
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// recorder watches every LockClaim of a scenario's namespace on the real API server (directly,
// never through a fault proxy) and records when each claim was first seen Held and first seen no
// longer held. The watch is ordered by the API server, so the order it shows really happened.
type recorder struct {
	mu     sync.Mutex
	grants map[string]*claimRec // by claim name
	// replaced are the records of ended claims whose name a new claim took (the pod controller
	// replaces the ended claim of a Standby or still-gated pod with a new one of the same name):
	// a new object, with a record of its own, whose Held is no ended claim coming back.
	replaced []*claimRec
	errs     []string
	// early keeps the events of claims not expected yet: the controller makes a Standby pod's
	// claim, whose name the harness learns only from the pod's UID, and may be quicker.
	early map[string][]claimEvent
	// adopt records every claim of the namespace, expected or not: lockctl makes the claims of a
	// commands run, under names of its own.
	adopt bool
}

// claimEvent is one watch event of a claim and when it arrived.
type claimEvent struct {
	t   watch.EventType
	cl  *locksv1alpha1.LockClaim
	now time.Time
}

type claimRec struct {
	// uid is the claim object's, once seen.
	uid      types.UID
	g        Grant
	acquired chan struct{} // closed when first seen Held
	ended    chan struct{} // closed when first seen not held after Held, or final, or deleted
	// locks, for a claim of several locks, are its locks; parts, each one's token as first seen
	// Held. results gives such a claim one Grant per lock, so that every checker judges each
	// lock's holds as it judges one-lock claims'.
	locks []string
	parts []locksv1alpha1.ClaimLock
}

func newRecorder() *recorder {
	return &recorder{grants: map[string]*claimRec{}, early: map[string][]claimEvent{}}
}

// expect registers a claim before it is created, so that no event about it is missed; the events
// of a claim that someone else created first are replayed.
func (r *recorder) expect(lock, claim string) *claimRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := &claimRec{g: Grant{Lock: lock, Claim: claim}, acquired: make(chan struct{}), ended: make(chan struct{})}
	r.grants[claim] = rec
	for _, e := range r.early[claim] {
		r.observeLocked(e.t, e.cl, e.now)
	}
	delete(r.early, claim)
	return rec
}

func (r *recorder) update(claim string, f func(g *Grant)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec, ok := r.grants[claim]; ok {
		f(&rec.g)
	}
}

func (r *recorder) run(ctx context.Context, c client.WithWatch, ns string) {
	var list locksv1alpha1.LockClaimList
	for ctx.Err() == nil {
		if err := c.List(ctx, &list, client.InNamespace(ns)); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	rv := list.ResourceVersion
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, &locksv1alpha1.LockClaimList{}, &client.ListOptions{Namespace: ns,
			Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				// A watch that ends is resumed from the last resourceVersion seen, which loses
				// nothing; only a history the server no longer has (410 Gone) leaves a gap that
				// the checkers cannot see through. An error while the run is being torn down
				// (context canceled) is neither.
				if ctx.Err() != nil {
					break
				}
				if status, ok := ev.Object.(*metav1.Status); ok && status.Code == http.StatusGone {
					r.mu.Lock()
					r.errs = append(r.errs, fmt.Sprintf("claim history has a gap: the watch from resourceVersion %s expired: %s", rv, status.Message))
					r.mu.Unlock()
					w.Stop()
					return // the run fails on the gap; resuming cannot fill it
				}
				break
			}
			cl, ok := ev.Object.(*locksv1alpha1.LockClaim)
			if !ok {
				continue
			}
			rv = cl.ResourceVersion
			if ev.Type != watch.Bookmark {
				r.observe(ev.Type, cl, time.Now())
			}
		}
		w.Stop()
	}
}

// runFromRegistry is run reading the claims from the API server's etcd (registry.go) instead
// of a watch of the API server: a scenario that kills the API server and compacts its etcd
// answers every watch of the API that resumes from before the fault with 410 Gone, and a
// history re-listed after that could have lost a claim's changes. The harness's own etcd watch
// outlives the API server, and compaction does not end a watch already running.
func (r *recorder) runFromRegistry(ctx context.Context, etcd *clientv3.Client, ns string) {
	prefix := registryClaimsPrefix(ns)
	rev := int64(0) // the last revision observed; 0: list first
	for ctx.Err() == nil {
		if rev == 0 {
			resp, err := etcd.Get(ctx, prefix, clientv3.WithPrefix())
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for _, kv := range resp.Kvs {
				if cl, err := decodeClaimRecord(kv.Value, kv.ModRevision); err == nil {
					r.observe(watch.Added, cl, time.Now())
				}
			}
			rev = resp.Header.Revision
		}
		for wr := range etcd.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(rev+1)) {
			if err := wr.Err(); err != nil {
				if wr.CompactRevision != 0 && ctx.Err() == nil {
					r.mu.Lock()
					r.errs = append(r.errs, fmt.Sprintf("claim history has a gap: the etcd watch from revision %d was compacted at %d", rev+1, wr.CompactRevision))
					r.mu.Unlock()
					return
				}
				break
			}
			now := time.Now()
			for _, ev := range wr.Events {
				rev = ev.Kv.ModRevision
				kind, kv := watch.Modified, ev.Kv
				switch {
				case ev.Type == clientv3.EventTypeDelete:
					if ev.PrevKv == nil {
						continue
					}
					kind, kv = watch.Deleted, ev.PrevKv
				case ev.IsCreate():
					kind = watch.Added
				}
				cl, err := decodeClaimRecord(kv.Value, ev.Kv.ModRevision)
				if err != nil {
					r.mu.Lock()
					r.errs = append(r.errs, fmt.Sprintf("the stored claim %s at revision %d cannot be read: %v", ev.Kv.Key, ev.Kv.ModRevision, err))
					r.mu.Unlock()
					continue
				}
				r.observe(kind, cl, now)
			}
		}
	}
}

func (r *recorder) observe(t watch.EventType, cl *locksv1alpha1.LockClaim, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observeLocked(t, cl, now)
}

func (r *recorder) observeLocked(t watch.EventType, cl *locksv1alpha1.LockClaim, now time.Time) {
	rec, ok := r.grants[cl.Name]
	if !ok && r.adopt {
		rec = &claimRec{g: Grant{Lock: cl.Namespace + "/" + cl.Spec.LockName, Claim: cl.Name}, acquired: make(chan struct{}), ended: make(chan struct{})}
		r.grants[cl.Name], ok = rec, true
	}
	if !ok {
		r.early[cl.Name] = append(r.early[cl.Name], claimEvent{t: t, cl: cl, now: now})
		return
	}
	if rec.uid != "" && cl.UID != rec.uid && !rec.g.Released.IsZero() {
		// A new claim under an ended one's name: a record of its own.
		r.replaced = append(r.replaced, rec)
		rec = &claimRec{g: Grant{Lock: rec.g.Lock, Claim: cl.Name}, acquired: make(chan struct{}), ended: make(chan struct{}), locks: rec.locks}
		r.grants[cl.Name] = rec
	}
	if rec.uid == "" {
		rec.uid = cl.UID
	}
	g := &rec.g
	if g.Evicted.IsZero() && meta.IsStatusConditionTrue(cl.Status.Conditions, locksv1alpha1.ConditionEvicted) {
		g.Evicted = now
	}
	// A claim being deleted is released by its deletion (docs/design.md §3, Release): the controller
	// hands the lock on without writing its status again, and takes its finalizer off after.
	gone := t == watch.Deleted || cl.DeletionTimestamp != nil
	held := !gone && cl.Status.Phase == locksv1alpha1.ClaimHeld
	if held && !g.Released.IsZero() {
		// Seen ended, now Held again: a late write brought the claim back.
		if g.HeldAgain.IsZero() {
			g.HeldAgain, g.HeldAgainToken = now, cl.Status.FencingToken
		}
		return
	}
	if held && cl.Status.RenewTime != nil && cl.Status.RenewTime.After(g.LastRenew) {
		g.LastRenew = cl.Status.RenewTime.Time
	}
	if held && len(cl.Spec.LockNames) > 0 {
		r.observeParts(rec, cl)
	}
	if held && g.Acquired.IsZero() {
		g.Acquired, g.Token, g.Identity = now, cl.Status.FencingToken, cl.Status.HolderIdentity
		g.HeldRevision = revisionOf(cl.ResourceVersion)
		if t := cl.Status.AcquireTime; t != nil {
			g.AcquireTime = t.Time
		}
		close(rec.acquired)
		return
	}
	final := gone || (cl.Status.Phase != "" && cl.Status.Phase != locksv1alpha1.ClaimPending && cl.Status.Phase != locksv1alpha1.ClaimHeld)
	if held && cl.Status.FencingToken != g.Token {
		r.errs = append(r.errs, fmt.Sprintf("claim %s changed token while Held: %d then %d", cl.Name, g.Token, cl.Status.FencingToken))
	}
	if final && g.Released.IsZero() {
		g.Released, g.ReleasedRevision = now, revisionOf(cl.ResourceVersion)
		g.Lost = cl.Status.Phase == locksv1alpha1.ClaimLost && !gone
		if !gone {
			g.Phase = string(cl.Status.Phase)
			if t := cl.Status.ReleaseTime; t != nil {
				g.ReleaseTime = t.Time
			}
			for _, c := range cl.Status.Conditions {
				if c.Type == locksv1alpha1.ConditionAcquired {
					g.Reason, g.Message = c.Reason, c.Message
				}
			}
		}
		close(rec.ended)
	}
}

// observeParts checks a Held claim of several locks: Held only with a token for every one of its
// locks, and the same tokens for as long as it is Held.
func (r *recorder) observeParts(rec *claimRec, cl *locksv1alpha1.LockClaim) {
	rec.locks = cl.Spec.Locks()
	var names []string
	for _, p := range cl.Status.Locks {
		if p.FencingToken > 0 {
			names = append(names, p.LockName)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, rec.locks) {
		r.errs = append(r.errs, fmt.Sprintf("claim %s is Held on %v of its locks %v", cl.Name, names, rec.locks))
	}
	if rec.parts == nil {
		rec.parts = slices.Clone(cl.Status.Locks)
		return
	}
	for _, p := range cl.Status.Locks {
		if was := partToken(rec.parts, p.LockName); was != p.FencingToken {
			r.errs = append(r.errs, fmt.Sprintf("claim %s changed its token of lock %s while Held: %d then %d", cl.Name, p.LockName, was, p.FencingToken))
		}
	}
}

// partToken is the token of lock among parts; 0 when it has none.
func partToken(parts []locksv1alpha1.ClaimLock, lock string) int64 {
	for _, p := range parts {
		if p.LockName == lock {
			return p.FencingToken
		}
	}
	return 0
}

// results returns a copy of every grant recorded, marking claims never seen Held nor final as
// Pending. A claim of several locks gives one grant per lock, with that lock's token.
func (r *recorder) results() []Grant {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Grant, 0, len(r.grants)+len(r.replaced))
	for _, rec := range append(slices.Collect(maps.Values(r.grants)), r.replaced...) {
		g := rec.g
		g.Pending = g.Acquired.IsZero() && g.Released.IsZero()
		if len(rec.locks) == 0 {
			out = append(out, g)
			continue
		}
		ns, _, _ := strings.Cut(g.Lock, "/")
		for _, lock := range rec.locks {
			part := g
			part.Lock, part.Token = ns+"/"+lock, partToken(rec.parts, lock)
			out = append(out, part)
		}
	}
	return out
}

// resource is the fenced register of one lock and its unfenced shadow.
type resource struct {
	fenced FencedRegister
	shadow Shadow
}

// claimant stands for a pod: it creates a Pod object and a LockClaim for it, waits for the lock,
// writes k times across a critical section, then ends in one of the EndKinds. It loops until the
// workload ends.
type claimant struct {
	c        client.Client
	rec      *recorder
	ns, lock string
	id       int
	res      *resource
	rng      *rand.Rand
	ttl      time.Duration
	writes   int
	// stopNew ends the workload: no new claim after it; drain bounds every wait.
	stopNew, drain <-chan struct{}
	// silentDeathDetection is how long after a silent death the pod is marked Failed.
	silentDeathDetection time.Duration
	errs                 func(format string, args ...any)
	// pinned, when set, makes the claimant's first hold a slow one: its critical section lasts
	// until the controller ends the claim (Lost, Failed) or the workload ends, and pinned is
	// closed once that hold began, so that the fault can be injected while it writes.
	pinned chan struct{}
	// zombies counts holds whose claimant went on writing after the controller ended its claim.
	zombies *atomic.Int64
	// ends, when set, are the ways a hold may end (default: the mix of EndKinds).
	ends []EndKind
	// keepEnded leaves ended claims and their pods in place until the drain.
	keepEnded bool
	// awaitEviction (lossPolicy Evict) makes a claimant whose hold was Lost leave its pod to the
	// controller: it ends nothing itself, waits (until the drain) for its pod to be deleting or
	// gone, as a process is stopped by its eviction, and records when it saw that.
	awaitEviction bool
	// mode is the claims' spec.mode, and alone says whether the claimant's holds hold the lock
	// alone (Exclusive, or any hold of a lock of one place): only those write to the fenced
	// register; the others read it, as readers under a read/write lock do.
	mode  locksv1alpha1.LockMode
	alone bool
	// giveUpAfter, when set, makes the claimant's first claim give up after waiting this long:
	// it deletes the claim while it is still Pending (as lockctl acquire --timeout does).
	giveUpAfter time.Duration
	// node, when set, makes the claimant a Standby pod's (standby_test.go): its pods ask for the
	// lock by annotation, on this Node, and the controller makes their claims.
	node string
	// rotateEnds takes the ways a hold ends in turn (starting at the claimant's number) instead
	// of drawing them, so that every kind of end happens in every run; holds counts the holds.
	rotateEnds bool
	holds      int
	// gated makes the claimant a gated pod's (gated_test.go): its pods carry lockwarden's
	// scheduling gate and no node, and the claimant starts writing only once kube-scheduler
	// bound its pod, with the token the pod's annotation carries; admitted records that.
	gated    bool
	admitted func(Admission)
	// reenter makes each hold re-enter the lock once (reenterOnce).
	reenter bool
	// initContainer, when set, makes the claimant a pod whose init container runs lockctl
	// acquire (acquire_run_test.go): it runs it for the pod and returns the token lockctl wrote,
	// or false when it did not exit 0.
	initContainer func(ctx context.Context, pod *corev1.Pod) (int64, bool)
	// several, when set, are the locks (lock among them) that the claimant's claims hold together
	// (spec.lockNames); each hold writes to every one's register with that lock's token, which
	// resOf finds.
	several []string
	resOf   func(lock string) *resource
}

func (cl *claimant) run(ctx context.Context) {
	for n := 0; ; n++ {
		select {
		case <-cl.stopNew:
			return
		default:
		}
		cl.once(ctx, fmt.Sprintf("%s-c%d-%d", cl.lock, cl.id, n))
	}
}

func (cl *claimant) once(ctx context.Context, name string) {
	create := cl.createClaimed
	switch {
	case cl.node != "":
		create = cl.createStandby
	case cl.gated:
		create = cl.createGated
	case cl.initContainer != nil:
		create = cl.createInitPod
	}
	pod, claim, rec := create(ctx, name)
	if pod == nil {
		return
	}
	name = claim.Name // the claim's name names the writer and its grant
	switch {
	case cl.gated:
		cl.runAdmitted(ctx, name, pod, claim, rec, func() (int64, bool) { return cl.awaitScheduled(ctx, pod, rec) })
		return
	case cl.initContainer != nil:
		cl.runAdmitted(ctx, name, pod, claim, rec, func() (int64, bool) { return cl.initContainer(ctx, pod) })
		return
	}

	var giveUp <-chan time.Time
	if cl.giveUpAfter > 0 {
		giveUp = time.After(cl.giveUpAfter)
		cl.giveUpAfter = 0
	}
	select {
	case <-rec.acquired:
	case <-giveUp:
		// Tired of waiting: the claim goes while Pending; nothing was written.
		if err := cl.c.Delete(ctx, claim); err != nil && !apierrors.IsNotFound(err) {
			cl.errs("deleting claim %s: %v", name, err)
		}
		select {
		case <-rec.ended:
		case <-cl.drain:
		}
		cl.cleanup(ctx, claim, pod)
		return
	case <-rec.ended: // final without ever being Held (e.g. Failed)
		cl.cleanup(ctx, claim, pod)
		// Not granted (the lock is being deleted, say): pause before the next claim rather
		// than spin.
		select {
		case <-time.After(cl.ttl / 5):
		case <-cl.drain:
		}
		return
	case <-cl.drain: // left waiting: reported stuck if still Pending
		return
	}
	cl.hold(ctx, name, pod, claim, rec, cl.tokenOf(name))
}

// hold is one hold of the lock, from its grant with token to its end: the critical section,
// then one of the ways a hold ends.
func (cl *claimant) hold(ctx context.Context, name string, pod *corev1.Pod, claim *locksv1alpha1.LockClaim, rec *claimRec, token int64) {
	write := func() {
		if !cl.alone {
			return // a reader: the resource does not fence reads
		}
		if len(cl.several) > 0 {
			// A holder of several locks writes to each resource with the token of its lock.
			parts := cl.partsOf(name)
			for _, lock := range cl.several {
				res := cl.resOf(lock)
				res.fenced.Write(name, partToken(parts, lock))
				res.shadow.Write(name, partToken(parts, lock))
			}
			return
		}
		cl.res.fenced.Write(name, token)
		cl.res.shadow.Write(name, token)
	}

	// The critical section: 0..2×TTL, some deliberately outliving the lease. A claimant never
	// learns it lost the lock: it keeps writing, and the fenced register must reject it.
	section := time.Duration(cl.rng.Int64N(int64(2 * cl.ttl)))
	select {
	case <-cl.stopNew:
		section = 0 // draining: hand the lock on quickly
	default:
	}
	if cl.pinned != nil {
		// The slow holder: write every TTL/5 until the controller ends the claim (the fault
		// made it lose the lock) or the workload ends.
		close(cl.pinned)
		cl.pinned = nil
		cl.writeUntilEnded(rec, cl.stopNew, write)
	} else {
		for i := range cl.writes {
			if i > 0 {
				time.Sleep(section / time.Duration(cl.writes-1))
			}
			write()
			if i == 0 && cl.reenter {
				cl.reenterOnce(ctx, name, pod, rec, write)
			}
		}
	}
	cl.zombie(rec, name, token, write)
	// evictedInstead: under lossPolicy Evict, a holder that lost its lock is stopped by its
	// eviction, not by anything it does itself (which would hide a missing eviction). Checked
	// wherever the claimant would act next.
	evictedInstead := func() bool {
		if !cl.awaitEviction || !cl.rec.lost(name) {
			return false
		}
		cl.waitEvicted(ctx, name, pod)
		cl.cleanup(ctx, claim, pod)
		return true
	}
	if evictedInstead() {
		return
	}

	ends := cl.ends
	if len(ends) == 0 {
		ends = []EndKind{EndRelease, EndRelease, EndPodDelete, EndPodDelete, EndSilentDeath, EndHang}
	}
	end := ends[cl.rng.IntN(len(ends))]
	if cl.rotateEnds {
		end = ends[(cl.id+cl.holds)%len(ends)]
	}
	cl.holds++
	hang := cl.ttl + time.Duration(cl.rng.Int64N(int64(cl.ttl)))
	switch end {
	case EndGracefulDelete:
		if evictedInstead() {
			return
		}
		cl.deleteGracefully(ctx, name, pod, write)
	case EndNodeLoss:
		if evictedInstead() {
			return
		}
		cl.loseNode(ctx, rec, name, pod, token, write)
	case EndHang:
		// SIGSTOP with the pod alive: nothing for one to two TTLs. Then SIGCONT: the process goes
		// on where it stopped, with the token it had (the fenced register rejects it if the lock
		// moved on meanwhile), and finishes by releasing. Once the workload stops, a hang ends
		// at once, so that the queue drains within the convergence window.
		select {
		case <-time.After(hang):
		case <-cl.stopNew:
		case <-cl.drain:
		}
		held := true
		select {
		case <-rec.ended:
			held = false
		default:
		}
		write()
		if evictedInstead() {
			return
		}
		cl.rec.update(name, func(g *Grant) { g.End, g.EndAt, g.HeldThroughHang = end, time.Now(), held })
		cl.endBy(ctx, name, func() error { return cl.c.Delete(ctx, claim) }, "deleting claim %s: %v")
	case EndRelease:
		if evictedInstead() {
			return
		}
		cl.rec.update(name, func(g *Grant) { g.End, g.EndAt = end, time.Now() })
		cl.endBy(ctx, name, func() error { return cl.c.Delete(ctx, claim) }, "deleting claim %s: %v")
	case EndPodDelete:
		if evictedInstead() {
			return
		}
		cl.rec.update(name, func(g *Grant) { g.End, g.EndAt = end, time.Now() })
		cl.endBy(ctx, name, func() error { return cl.c.Delete(ctx, pod, client.GracePeriodSeconds(0)) }, "deleting pod %s: %v")
	case EndSucceeded:
		if evictedInstead() {
			return
		}
		cl.rec.update(name, func(g *Grant) { g.End, g.EndAt = end, time.Now() })
		cl.endBy(ctx, name, func() error { return cl.setPodPhase(ctx, pod, corev1.PodSucceeded) }, "marking pod %s Succeeded: %v")
	case EndSilentDeath:
		// The process died without a word; the kubelet notices later and marks the pod Failed.
		time.Sleep(cl.silentDeathDetection)
		if evictedInstead() {
			return
		}
		cl.rec.update(name, func(g *Grant) { g.End, g.EndAt = end, time.Now() })
		cl.endBy(ctx, name, func() error { return cl.setPodPhase(ctx, pod, corev1.PodFailed) }, "marking pod %s Failed: %v")
	}
	select {
	case <-rec.ended:
	case <-cl.drain:
	}
	if cl.keepEnded {
		return // the run's teardown deletes it
	}
	if evictedInstead() {
		return
	}
	cl.cleanup(ctx, claim, pod)
}

// createClaimed creates the pod of one claimant run, named name, and its claim of the same name,
// registered with the recorder first. It returns nil pod on failure.
// endBy performs the request that ends claim name's hold, again every 200 ms while the API
// server cannot answer it (down, restarting, overloaded: a fault under it), until it is done or
// the run ends; a request done only on a later try moves the hold's EndAt to that try, when the
// end really reached the API. A hold whose end is lost to an outage would otherwise stay held
// until the run's drain, and count as stuck. errFormat takes the name and the error.
func (cl *claimant) endBy(ctx context.Context, name string, request func() error, errFormat string) {
	for {
		at := time.Now()
		err := request()
		switch {
		case err == nil || apierrors.IsNotFound(err):
			cl.rec.update(name, func(g *Grant) { g.EndAt = maxTime(g.EndAt, at) })
			return
		case !apiUnavailable(err) || ctx.Err() != nil:
			cl.errs(errFormat, name, err)
			return
		}
		select {
		case <-ctx.Done():
			cl.errs(errFormat, name, err)
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// apiUnavailable says whether err means the API server did not answer the request (no status:
// refused, reset, timed out) or answered that it cannot serve it now.
func apiUnavailable(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err)
}

// setPodPhase marks pod's status phase, as a kubelet would.
func (cl *claimant) setPodPhase(ctx context.Context, pod *corev1.Pod, phase corev1.PodPhase) error {
	if err := cl.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return err
	}
	pod.Status.Phase = phase
	return cl.c.Status().Update(ctx, pod)
}

func (cl *claimant) createClaimed(ctx context.Context, name string) (*corev1.Pod, *locksv1alpha1.LockClaim, *claimRec) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	if err := cl.c.Create(ctx, pod); err != nil {
		cl.errs("creating pod %s: %v", name, err)
		return nil, nil, nil
	}
	pod.Status.Phase = corev1.PodRunning
	if err := cl.c.Status().Update(ctx, pod); err != nil {
		cl.errs("marking pod %s Running: %v", name, err)
	}
	rec := cl.rec.expect(cl.ns+"/"+cl.lock, name)
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name},
		Spec: locksv1alpha1.LockClaimSpec{LockName: cl.lock, Holder: &locksv1alpha1.ClaimHolder{PodName: name}, Mode: cl.mode}}
	if len(cl.several) > 0 {
		claim.Spec.LockName, claim.Spec.LockNames = "", cl.several
		cl.rec.mu.Lock()
		rec.locks = claim.Spec.Locks()
		cl.rec.mu.Unlock()
	}
	cl.rec.update(name, func(g *Grant) { g.Created, g.Exclusive = time.Now(), cl.alone })
	if err := cl.c.Create(ctx, claim); err != nil {
		cl.errs("creating claim %s: %v", name, err)
		return nil, nil, nil
	}
	return pod, claim, rec
}

// writeUntilEnded is a holder that keeps working: it writes every TTL/5 until the controller
// ends its claim (rec.ended) or stop closes, never told it may have lost the lock meanwhile.
func (cl *claimant) writeUntilEnded(rec *claimRec, stop <-chan struct{}, write func()) {
	tick := time.NewTicker(cl.ttl / 5)
	defer tick.Stop()
	for {
		write()
		select {
		case <-tick.C:
		case <-rec.ended:
			return
		case <-stop:
			return
		}
	}
}

// zombie plays a holder that outlived its hold: if the controller ended the claim (Lost, or
// Failed because its lock was deleted) before the claimant ended it, the claimant goes on as a
// process that was paused or cut off and wakes up stale. It writes with its old token the moment
// it wakes, which lands in the window before the successor's first write if there is one (the
// window fencing cannot close: the resource has not seen a newer token yet), then once more
// after a newer holder has written (the register accepted a higher token), which fencing must
// reject. The harness uses what it saw only to time those writes; the claimant does not stop
// writing because of it. It waits for the newer holder at most 4×TTL, or until the drain.
func (cl *claimant) zombie(rec *claimRec, _ string, token int64, write func()) {
	select {
	case <-rec.ended:
	default:
		return // still held: an ordinary end
	}
	if cl.zombies != nil {
		cl.zombies.Add(1)
	}
	write()
	deadline := time.After(4 * cl.ttl)
	for cl.res.fenced.Highest() <= token {
		select {
		case <-time.After(cl.ttl / 20):
		case <-deadline:
			return
		case <-cl.drain:
			return
		}
	}
	write()
}

// waitEvicted waits, until the drain, for the pod of a claim that was Lost to be deleting or
// gone, and records when it first saw that. The pod is polled: the bound it is checked against
// (evictionBound) is far above the period.
func (cl *claimant) waitEvicted(ctx context.Context, name string, pod *corev1.Pod) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var cur corev1.Pod
		err := cl.c.Get(ctx, client.ObjectKeyFromObject(pod), &cur)
		if apierrors.IsNotFound(err) || (err == nil && (cur.UID != pod.UID || !cur.DeletionTimestamp.IsZero())) {
			cl.rec.update(name, func(g *Grant) { g.PodGone = time.Now() })
			return
		}
		select {
		case <-tick.C:
		case <-cl.drain:
			return
		}
	}
}

// lost says whether claim was seen ending Lost.
func (r *recorder) lost(claim string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.grants[claim]
	return ok && rec.g.Lost
}

// endedChan returns the channel closed when claim is first seen ended; nil for an unknown claim.
func (r *recorder) endedChan(claim string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec, ok := r.grants[claim]; ok {
		return rec.ended
	}
	return nil
}

func (cl *claimant) tokenOf(name string) int64 {
	cl.rec.mu.Lock()
	defer cl.rec.mu.Unlock()
	rec := cl.rec.grants[name]
	if len(cl.several) > 0 {
		return partToken(rec.parts, cl.lock) // the token of the register zombie watches
	}
	return rec.g.Token
}

// partsOf are the tokens of the locks claim name was first seen Held with.
func (cl *claimant) partsOf(name string) []locksv1alpha1.ClaimLock {
	cl.rec.mu.Lock()
	defer cl.rec.mu.Unlock()
	return cl.rec.grants[name].parts
}

// cleanup deletes what is left of one claimant run; the claim's finalizer needs the manager.
func (cl *claimant) cleanup(ctx context.Context, claim *locksv1alpha1.LockClaim, pod *corev1.Pod) {
	_ = client.IgnoreNotFound(cl.c.Delete(ctx, claim))
	_ = client.IgnoreNotFound(cl.c.Delete(ctx, pod, client.GracePeriodSeconds(0)))
}

// runAdmitted is one run of a claimant whose pod starts only once it holds (a gated pod, a pod
// with a lockctl acquire init container), after its pod was created: it waits for admit (the
// scheduler's binding, the init container's exit), then, as the kubelet and the pod's process,
// marks the pod Running and holds with the token the pod read.
func (cl *claimant) runAdmitted(ctx context.Context, name string, pod *corev1.Pod, claim *locksv1alpha1.LockClaim, rec *claimRec, admit func() (int64, bool)) {
	token, admitted := admit()
	if !admitted {
		select {
		case <-cl.drain: // left waiting: reported stuck if still Pending
			return
		default:
		}
		cl.cleanup(ctx, claim, pod) // ended without holding: pause before the next pod
		select {
		case <-time.After(cl.ttl / 5):
		case <-cl.drain:
		}
		return
	}
	if err := cl.setPodPhase(ctx, pod, corev1.PodRunning); err != nil {
		cl.errs("marking pod %s Running: %v", pod.Name, err)
	}
	cl.hold(ctx, name, pod, claim, rec, token)
}

// reenterOnce re-enters the lock that claim outer (of pod) holds, as a program that takes the
// lock again in a nested call does: it makes a second claim for the pod on the lock, waits until
// it is Held (or until the outer hold ends or the drain; at most reentryWait), writes once more under
// the outer claim's name (one holder, one token), and deletes the second claim, waiting (at
// most a TTL) for it to end. The outer hold must survive that deletion.
func (cl *claimant) reenterOnce(ctx context.Context, outer string, pod *corev1.Pod, outerRec *claimRec, write func()) {
	name := outer + "-re"
	rec := cl.rec.expect(cl.ns+"/"+cl.lock, name)
	cl.rec.update(name, func(g *Grant) { g.Created, g.Exclusive, g.Reenters = time.Now(), cl.alone, outer })
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name},
		Spec: locksv1alpha1.LockClaimSpec{LockName: cl.lock, Holder: &locksv1alpha1.ClaimHolder{PodName: pod.Name}, Mode: cl.mode}}
	if err := cl.c.Create(ctx, claim); err != nil {
		cl.errs("creating claim %s: %v", name, err)
		return
	}
	select {
	case <-rec.acquired:
		write()
	case <-time.After(cl.reentryWait()):
		cl.rec.update(name, func(g *Grant) { g.GaveUp = time.Now() })
	case <-outerRec.ended:
		cl.rec.update(name, func(g *Grant) { g.GaveUp = time.Now() })
	case <-cl.drain:
		cl.rec.update(name, func(g *Grant) { g.GaveUp = time.Now() })
	}
	cl.endBy(ctx, name, func() error { return cl.c.Delete(ctx, claim) }, "deleting claim %s: %v")
	select {
	case <-rec.ended:
	case <-time.After(cl.ttl):
	case <-cl.drain:
	}
}

// reentryWait bounds a re-entry's wait for its claim to be Held. A correct controller joins it
// to its pod's hold in the pass that sees it, milliseconds; the bound leaves room for a failover
// (a new leader takes over within the leader-election lease, then resumes the holds) and a TTL
// on each side, so that only a re-entry queued behind the others while its pod holds outlasts it.
func (cl *claimant) reentryWait() time.Duration { return 2*cl.ttl + leLease }
