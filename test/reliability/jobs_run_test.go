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
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Jobs scenarios: claimants that behave like a CronJob's runs on one lock (docs/design.md §3
// Workloads). Each creates a Job annotated with its lock and spec.suspend: true (the harness plays
// the admission policy that suspends such Jobs); the controller makes the Job's claim and, once it
// holds, resumes the Job with its token. The harness has no Job controller, no kubelet and no
// garbage collector, so it plays them: it starts the Job's pod, writes with the token while the
// Job runs, and ends the Job as the Job controller would (conditions through the status
// subresource), or deletes it and its dependents.

// jobLockDelay is the locks' lockDelaySeconds in jobs scenarios: a failed or deleted Job holds the
// next grant back this long; a completed one does not.
const jobLockDelay = 2 * time.Second

// gcLatency is how long the harness, playing the garbage collector, lets the claim of a deleted
// Job live: until the controller ended its hold, or at most this long (the collector deletes a
// gone owner's dependents within moments, whether or not the controller has acted, e.g. while no
// leader runs).
const gcLatency = time.Second

// endJobPodKilled is a way a Job's run goes: one of its pods is killed mid-run, a replacement
// goes on, and the Job completes.
const endJobPodKilled EndKind = "job-pod-killed"

// jobEnds are the ways a jobs claimant's Jobs end: the scenario's ends, by default complete,
// fail, deletion, and a pod killed mid-run before completion.
func (s scenario) jobEnds() []EndKind {
	if len(s.ends) > 0 {
		return s.ends
	}
	return []EndKind{EndJobComplete, EndJobFailed, EndJobDeleted, endJobPodKilled}
}

// endDeck deals the ways the Jobs of one lock end, shared by the lock's claimants: each round
// holds every way once, in an order drawn from the scenario's seed, so that every way comes within
// a lock's first holds.
type endDeck struct {
	mu    sync.Mutex
	rng   *rand.Rand
	ends  []EndKind
	cards []EndKind
}

func (d *endDeck) draw() EndKind {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cards) == 0 {
		d.cards = slices.Clone(d.ends)
		d.rng.Shuffle(len(d.cards), func(i, j int) { d.cards[i], d.cards[j] = d.cards[j], d.cards[i] })
	}
	c := d.cards[0]
	d.cards = d.cards[1:]
	return c
}

// jobWatch follows the run's Jobs that ask for a lock, on the real API server (never faulted):
// when each was first seen resumed, with the tokens it carried, and the write that finished or
// deleted it, each with its revision.
type jobWatch struct {
	mu   sync.Mutex
	runs map[string]*jobRec // by Job name
	errs []string

	stop context.CancelFunc
	done sync.WaitGroup
}

// jobRec is one Job's record.
type jobRec struct {
	run JobRun
	// resumed is closed when the Job is first seen resumed; job is the Job as seen then (its pod
	// template).
	resumed chan struct{}
	job     *batchv1.Job
}

// watchJobs starts following the Jobs of namespace ns.
func watchJobs(ctx context.Context, c client.WithWatch, ns string) *jobWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &jobWatch{runs: map[string]*jobRec{}, stop: cancel}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		follow(ctx, c, ns, &batchv1.JobList{}, w.see, func(msg string) {
			w.mu.Lock()
			w.errs = append(w.errs, "the Jobs' history has a gap: "+msg)
			w.mu.Unlock()
		})
	}()
	return w
}

// expect registers Job name of lock (namespace/name) before it is created.
func (w *jobWatch) expect(name, lock string) *jobRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recLocked(name, lock)
}

func (w *jobWatch) recLocked(name, lock string) *jobRec {
	rec, ok := w.runs[name]
	if !ok {
		rec = &jobRec{run: JobRun{Lock: lock, Job: name}, resumed: make(chan struct{})}
		w.runs[name] = rec
	}
	return rec
}

// update changes the record of Job name.
func (w *jobWatch) update(name string, f func(r *JobRun)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rec, ok := w.runs[name]; ok {
		f(&rec.run)
	}
}

// resumedAs returns the token Job name was first seen resumed with, and the Job as seen then.
func (w *jobWatch) resumedAs(name string) (int64, *batchv1.Job) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rec := w.runs[name]
	return rec.run.Token, rec.job
}

// see records what an event shows of a Job that asks for a lock.
func (w *jobWatch) see(t watch.EventType, o client.Object, at time.Time) {
	job, ok := o.(*batchv1.Job)
	if !ok {
		return
	}
	lock, annotated := job.Annotations[locksv1alpha1.PodLockAnnotation]
	if !annotated {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rec := w.recLocked(job.Name, job.Namespace+"/"+lock)
	rev := revisionOf(job.ResourceVersion)
	if rec.run.ResumedRevision == 0 && t != watch.Deleted && !ptr.Deref(job.Spec.Suspend, false) {
		rec.run.Resumed, rec.run.ResumedRevision = at, rev
		rec.run.Token = tokenAnnotation(job.Annotations)
		rec.run.TemplateToken = tokenAnnotation(job.Spec.Template.Annotations)
		rec.job = job.DeepCopy()
		close(rec.resumed)
	}
	if rec.run.EndRevision == 0 && (t == watch.Deleted || jobFinished(job)) {
		rec.run.EndRevision = rev
	}
}

// tokenAnnotation is the fencing token an object's annotations carry; 0 when none.
func tokenAnnotation(annotations map[string]string) int64 {
	token, _ := strconv.ParseInt(annotations[locksv1alpha1.PodFencingTokenAnnotation], 10, 64)
	return token
}

// jobFinished says whether a Job's Complete or Failed condition is True.
func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// results stops the watch and returns what it saw, with its errors.
func (w *jobWatch) results() ([]JobRun, []string) {
	w.stop()
	w.done.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]JobRun, 0, len(w.runs))
	for _, name := range sortedKeys(w.runs) {
		out = append(out, w.runs[name].run)
	}
	return out, w.errs
}

// jobClaimant is a claimant whose holders are Jobs: it creates a Job that asks for its lock,
// waits until the controller resumes it, runs it, ends it, and starts again until the workload
// ends.
type jobClaimant struct {
	*claimant
	jobs *jobWatch
	deck *endDeck
}

func (jc *jobClaimant) run(ctx context.Context) {
	for n := 0; ; n++ {
		select {
		case <-jc.stopNew:
			return
		default:
		}
		jc.once(ctx, fmt.Sprintf("%s-c%d-%d", jc.lock, jc.id, n))
	}
}

// once runs one Job, named name.
func (jc *jobClaimant) once(ctx context.Context, name string) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: jc.ns, Name: name, Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: jc.lock}},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true), // as the admission policy would set it
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "app"}},
			}},
		},
	}
	jrec := jc.jobs.expect(name, jc.ns+"/"+jc.lock)
	created := time.Now()
	if err := jc.c.Create(ctx, job); err != nil {
		jc.errs("creating Job %s: %v", name, err)
		jc.pause()
		return
	}
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: jc.ns,
		Name: locksv1alpha1.WorkloadClaimName(job.Name, job.UID, jc.lock)}}
	rec := jc.rec.expect(jc.ns+"/"+jc.lock, claim.Name)
	jc.rec.update(claim.Name, func(g *Grant) { g.Created, g.Exclusive = created, true })
	jc.jobs.update(name, func(r *JobRun) { r.Claim = claim.Name })

	select {
	case <-jrec.resumed:
	case <-rec.ended:
		select {
		case <-jrec.resumed: // resumed too: it runs, whatever became of its claim
		default:
			// Its claim ended without the Job being resumed: it never runs.
			jc.cleanupJob(ctx, job, claim, nil)
			jc.pause()
			return
		}
	case <-jc.drain: // left waiting: reported stuck if its claim is still Pending
		return
	}

	// The Job runs: its pods write with the token the Job was resumed with, for TTL/2..1.5×TTL
	// (TTL/5 once the workload stopped, so that the queue drains). A Job never learns that its
	// hold ended (Lost): it goes on, and fencing must stop it.
	token, resumed := jc.jobs.resumedAs(name)
	write := func() {
		jc.res.fenced.Write(claim.Name, token)
		jc.res.shadow.Write(claim.Name, token)
	}
	end := jc.deck.draw()
	runFor := jc.ttl/2 + time.Duration(jc.rng.Int64N(int64(jc.ttl)))
	select {
	case <-jc.stopNew:
		runFor = jc.ttl / 5
	default:
	}
	pods := []*corev1.Pod{jc.startPod(ctx, resumed, 0)}
	if end == endJobPodKilled {
		// A pod dies mid-run (killed, evicted); the Job controller starts a replacement and the
		// Job goes on: its hold must last.
		jc.writeFor(runFor/2, write)
		jc.jobs.update(name, func(r *JobRun) { r.PodKilled = time.Now() })
		jc.deletePod(ctx, pods[0])
		select {
		case <-time.After(jc.ttl / 10):
		case <-jc.drain:
		}
		pods = append(pods, jc.startPod(ctx, resumed, 1))
		jc.writeFor(runFor/2, write)
		end = EndJobComplete
	} else {
		jc.writeFor(runFor, write)
	}
	jc.zombie(rec, claim.Name, token, write)
	jc.endJob(ctx, job, claim, rec, end, pods)
	select {
	case <-rec.ended:
	case <-jc.drain:
	}
	jc.cleanupJob(ctx, job, claim, pods)
}

// pause waits a little before the next Job (TTL/5), rather than spin.
func (jc *jobClaimant) pause() {
	select {
	case <-time.After(jc.ttl / 5):
	case <-jc.drain:
	}
}

// writeFor writes at once, then every TTL/5 for d (until the drain).
func (jc *jobClaimant) writeFor(d time.Duration, write func()) {
	deadline := time.After(d)
	tick := time.NewTicker(jc.ttl / 5)
	defer tick.Stop()
	for {
		write()
		select {
		case <-tick.C:
		case <-deadline:
			return
		case <-jc.drain:
			return
		}
	}
}

// startPod creates pod i of a resumed Job from its pod template, as the Job controller does
// (owned by the Job, with the template's labels and annotations: the token among them), and marks
// it Running, as a kubelet would. It returns nil on failure.
func (jc *jobClaimant) startPod(ctx context.Context, job *batchv1.Job, i int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: fmt.Sprintf("%s-p%d", job.Name, i),
			Labels: maps.Clone(job.Spec.Template.Labels), Annotations: maps.Clone(job.Spec.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = "node-1"
	if err := jc.c.Create(ctx, pod); err != nil {
		jc.errs("creating pod %s: %v", pod.Name, err)
		return nil
	}
	pod.Status.Phase = corev1.PodRunning
	if err := jc.c.Status().Update(ctx, pod); err != nil {
		jc.errs("marking pod %s Running: %v", pod.Name, err)
	}
	return pod
}

// deletePod deletes a pod at once (nil: none).
func (jc *jobClaimant) deletePod(ctx context.Context, pod *corev1.Pod) {
	if pod == nil {
		return
	}
	if err := jc.c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		jc.errs("deleting pod %s: %v", pod.Name, err)
	}
}

// endJob ends a running Job by end, recording when (just before the write): complete or failed,
// its last pod first (Succeeded or Failed), then the Job's conditions, as the Job controller
// writes them; or deleted with background propagation, its pods and its claim then deleted as the
// garbage collector would (the claim once the controller ended its hold, or after gcLatency).
func (jc *jobClaimant) endJob(ctx context.Context, job *batchv1.Job, claim *locksv1alpha1.LockClaim, rec *claimRec, end EndKind, pods []*corev1.Pod) {
	now := time.Now()
	jc.rec.update(claim.Name, func(g *Grant) { g.End, g.EndAt = end, now })
	jc.jobs.update(job.Name, func(r *JobRun) { r.End, r.EndAt = end, now })
	switch end {
	case EndJobComplete, EndJobFailed:
		phase, cond := corev1.PodSucceeded, batchv1.JobComplete
		if end == EndJobFailed {
			phase, cond = corev1.PodFailed, batchv1.JobFailed
		}
		if pod := pods[len(pods)-1]; pod != nil {
			before := pod.DeepCopy()
			pod.Status.Phase = phase
			if err := jc.c.Status().Patch(ctx, pod, client.MergeFrom(before)); err != nil {
				jc.errs("marking pod %s %s: %v", pod.Name, phase, err)
			}
		}
		if err := finishJob(ctx, jc.c, job, cond); err != nil {
			jc.errs("finishing Job %s (%s): %v", job.Name, cond, err)
		}
	case EndJobDeleted:
		if err := jc.c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			jc.errs("deleting Job %s: %v", job.Name, err)
		}
		for _, pod := range pods {
			jc.deletePod(ctx, pod)
		}
		select {
		case <-rec.ended:
		case <-time.After(gcLatency):
		case <-jc.drain:
		}
		if err := jc.c.Delete(ctx, claim); err != nil && !apierrors.IsNotFound(err) {
			jc.errs("deleting claim %s of deleted Job %s: %v", claim.Name, job.Name, err)
		}
	}
}

// finishJob gives a Job the conditions the Job controller writes when it ends (since Kubernetes
// 1.31): Complete after SuccessCriteriaMet, with its completion time, or Failed after
// FailureTarget; and its start time.
func finishJob(ctx context.Context, c client.Client, job *batchv1.Job, cond batchv1.JobConditionType) error {
	fore, reason := batchv1.JobSuccessCriteriaMet, "CompletionsReached"
	if cond == batchv1.JobFailed {
		fore, reason = batchv1.JobFailureTarget, "BackoffLimitExceeded"
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &batchv1.Job{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), cur); err != nil {
			return err
		}
		now := metav1.Now()
		if cur.Status.StartTime == nil {
			cur.Status.StartTime = &now
		}
		if cond == batchv1.JobComplete {
			cur.Status.CompletionTime, cur.Status.Succeeded = &now, 1
		} else {
			cur.Status.Failed = 1
		}
		cur.Status.Conditions = append(cur.Status.Conditions,
			batchv1.JobCondition{Type: fore, Status: corev1.ConditionTrue, Reason: reason, LastProbeTime: now, LastTransitionTime: now},
			batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue, Reason: reason, LastProbeTime: now, LastTransitionTime: now})
		return c.Status().Update(ctx, cur)
	})
}

// cleanupJob deletes what is left of one Job: the Job, its pods and its claim.
func (jc *jobClaimant) cleanupJob(ctx context.Context, job *batchv1.Job, claim *locksv1alpha1.LockClaim, pods []*corev1.Pod) {
	_ = client.IgnoreNotFound(jc.c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	for _, pod := range pods {
		if pod != nil {
			_ = client.IgnoreNotFound(jc.c.Delete(ctx, pod, client.GracePeriodSeconds(0)))
		}
	}
	_ = client.IgnoreNotFound(jc.c.Delete(ctx, claim))
}

// jobClaimant makes claimant cl, of lock number l, a jobs claimant, with the lock's deck of ends.
func (r *run) jobClaimant(cl *claimant, l int) *jobClaimant {
	r.decksMu.Lock()
	defer r.decksMu.Unlock()
	if r.decks == nil {
		r.decks = map[int]*endDeck{}
	}
	deck, ok := r.decks[l]
	if !ok {
		deck = &endDeck{rng: rand.New(rand.NewPCG(r.seed, uint64(l*100+99))), ends: r.s.jobEnds()}
		r.decks[l] = deck
	}
	return &jobClaimant{claimant: cl, jobs: r.jobs, deck: deck}
}

// disturbed are the stretches in which a fault may hold a handoff back: each fault from its
// injection to a leader-election lease and a TTL after its heal (a new leader takes over, starts
// and reconciles).
func (r *run) disturbed() []Span {
	var out []Span
	for _, s := range r.faults.spans {
		out = append(out, Span{From: s.From, To: s.To.Add(leLease + r.ttl)})
	}
	return out
}

// checkJobs runs the jobs checkers over the Jobs' and the claims' history (jobs runs).
func (r *run) checkJobs(res *Result) {
	runs, errs := r.jobs.results()
	res.Violations = append(res.Violations, findings("history", errs)...)
	res.Violations = append(res.Violations, findings("job-runs", CheckJobRuns(runs, r.grants))...)
	res.Violations = append(res.Violations, findings("job-resume", CheckJobResumes(runs, r.grants))...)
	holds := CheckJobHolds(runs, r.grants)
	res.Violations = append(res.Violations, findings("job-hold", holds.Violations)...)
	delay := CheckJobLockDelay(runs, r.grants, r.s.lockDelay)
	res.Violations = append(res.Violations, findings("job-lock-delay", delay.Violations)...)
	handoffs := CheckJobHandoffs(runs, r.grants, r.s.lockDelay, r.disturbed())
	res.Violations = append(res.Violations, findings("job-handoff", handoffs.Violations)...)
	res.JobDelayChecked, res.JobHandoffsChecked = delay.Checked, handoffs.Checked
	res.PodKills, res.PodKillsHeldThrough = holds.PodKills, holds.HeldThrough

	resumed, ends := 0, map[EndKind]int{}
	for _, run := range runs {
		if run.ResumedRevision > 0 {
			resumed++
			ends[run.End]++
		}
	}
	r.t.Logf("jobs: %d created, %d resumed (ended: %d complete, %d failed, %d deleted, %d not by the harness); pods killed mid-run %d, holds that lasted through it %d; grants after a failed or deleted Job %d (shortest gap %s, lockDelay %s); completions followed by a waiter with no fault near %d (longest handoff %s)",
		len(runs), resumed, ends[EndJobComplete], ends[EndJobFailed], ends[EndJobDeleted], ends[""], holds.PodKills, holds.HeldThrough,
		delay.Checked, delay.Shortest.Round(time.Millisecond), r.s.lockDelay, handoffs.Checked, handoffs.Longest.Round(time.Millisecond))
}
