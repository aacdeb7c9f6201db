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
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	kresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Standby scenarios: claimants that behave like the replicas of an active/passive Deployment
// (docs/design.md §3, Standby pods). Each creates a pod annotated with its lock and lock-wait: Standby
// on a Node of its own; the controller makes the pod's claim, and labels the pod holder while
// the claim holds. A hold ends by the pod's deletion (at once, or gracefully: terminating for a
// while before it is gone) or by its node's loss (Ready=Unknown while the claimant goes on
// writing, cut off; the locks' holderNodeLossSeconds ends the hold).

// standbyNodeLoss is the locks' holderNodeLossSeconds in standby scenarios: a holder whose node
// has been not Ready this long is treated as dead.
const standbyNodeLoss = 2 * time.Second

// standbyEnds are the ways a standby claimant's holds end, taken in turn: the scenario's ends,
// by default the pod's deletion, at once or graceful, and its node's loss.
func (s scenario) standbyEnds() []EndKind {
	if len(s.ends) > 0 {
		return s.ends
	}
	return []EndKind{EndPodDelete, EndGracefulDelete, EndNodeLoss}
}

// nodeRunLabel marks the Nodes a run creates with the run's namespace, so that its teardown
// deletes them.
const nodeRunLabel = "reliability.lockwarden.io/run"

// roleGrace is how long a pod may stay labelled holder after its claim left the lock's record,
// or after it began terminating (the holder-record checker). The controller moves the label in
// the pod write that follows the write it answers (the claim's end, the pod's deletionTimestamp):
// milliseconds, and 2 s leaves room for a loaded 2-core machine, as the backend view's grace does.
// When a fault hits a manager, the leader may be killed, paused or cut off between the two
// writes, and the label then moves when the next leader has taken over and reconciled the pods:
// up to the leader-election lease, plus a TTL for its start and caches.
func (r *run) roleGrace() time.Duration {
	grace := 2 * time.Second
	for _, f := range r.plan {
		if hitsManagers(f.kind) {
			return grace + leLease + r.ttl
		}
	}
	return grace
}

// nodeName is the Node of claimant i of lock (in the run's namespace ns).
func nodeName(ns, lock string, i int) string { return fmt.Sprintf("%s-%s-c%d", ns, lock, i) }

// createNodes creates a Ready Node for every claimant of a standby run. The harness's control
// plane runs no node controller and no kubelet: a Node is Ready because the harness said so once,
// and stays so until a claimant fails it.
func (r *run) createNodes() {
	for l := range locks {
		for i := range r.s.claimantsPerLock() {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(r.ns, fmt.Sprintf("lock-%d", l), i),
				Labels: map[string]string{nodeRunLabel: r.ns}}}
			if err := r.e.c.Create(r.ctx, n); err != nil {
				r.t.Fatal(err)
			}
			if err := setNodeReady(r.ctx, r.e.c, n.Name, corev1.ConditionTrue); err != nil {
				r.t.Fatal(err)
			}
			if err := untaintReady(r.ctx, r.e.c, n.Name); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

// deleteNodes deletes the run's Nodes.
func (r *run) deleteNodes() {
	_ = r.e.c.DeleteAllOf(context.Background(), &corev1.Node{}, client.MatchingLabels{nodeRunLabel: r.ns})
}

// untaintReady removes the not-ready taint that the API server puts on every new Node
// (TaintNodesByCondition), as the node lifecycle controller does once the node is Ready, so that
// kube-scheduler may bind a gated pod there.
func untaintReady(ctx context.Context, c client.Client, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
		if len(kept) == len(n.Spec.Taints) {
			return nil
		}
		n.Spec.Taints = kept
		return c.Update(ctx, n)
	})
}

// setNodeReady sets the Ready condition of Node name to status, with its lastTransitionTime now
// when it changes, through the status subresource, as the node lifecycle controller does when a
// node stops (Unknown) or starts again (True) posting its status.
func setNodeReady(ctx context.Context, c client.Client, name string, status corev1.ConditionStatus) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		now := metav1.Now()
		cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: now, LastTransitionTime: now,
			Reason: "KubeletReady", Message: "the reliability harness says so"}
		if status != corev1.ConditionTrue {
			cond.Reason, cond.Message = "NodeStatusUnknown", "Kubelet stopped posting node status (the reliability harness failed the node)"
		}
		found := false
		for i, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == status {
					cond.LastTransitionTime = c.LastTransitionTime
				}
				n.Status.Conditions[i], found = cond, true
			}
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, cond)
		}
		if n.Status.Allocatable == nil {
			// Room for pods, which kube-scheduler needs to bind a gated pod here.
			n.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: kresource.MustParse("110"),
				corev1.ResourceCPU: kresource.MustParse("4"), corev1.ResourceMemory: kresource.MustParse("8Gi")}
			n.Status.Allocatable = n.Status.Capacity
		}
		return c.Status().Update(ctx, n)
	})
}

// createStandby creates the pod of one standby claimant run, named name, on the claimant's node:
// annotated with its lock and lock-wait: Standby, and Running. The controller makes its claim,
// named after the pod's UID; the recorder expects that name from the pod's creation on (events
// of the claim that arrive before are kept for it). It returns the pod, the claim (name only) and
// the claim's record, or nil pod on failure.
func (cl *claimant) createStandby(ctx context.Context, name string) (*corev1.Pod, *locksv1alpha1.LockClaim, *claimRec) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name, Annotations: map[string]string{
		locksv1alpha1.PodLockAnnotation: cl.lock, locksv1alpha1.PodLockWaitAnnotation: locksv1alpha1.PodLockWaitStandby}},
		Spec: corev1.PodSpec{NodeName: cl.node, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	pod, claim, rec := cl.createPodOfClaim(ctx, pod)
	if pod == nil {
		return nil, nil, nil
	}
	// A patch without a resourceVersion: the controller labels the pod meanwhile.
	before := pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	if err := cl.c.Status().Patch(ctx, pod, client.MergeFrom(before)); err != nil {
		cl.errs("marking pod %s Running: %v", name, err)
	}
	return pod, claim, rec
}

// createPodOfClaim creates pod, whose claim someone else makes (the controller for an annotated
// pod, lockctl in its init container), named after the pod's UID (PodClaimName): the recorder
// expects that name from the pod's creation on, and keeps the claim's events that arrive before.
// It returns the pod, the claim (name only) and the claim's record, or nil pod on failure.
func (cl *claimant) createPodOfClaim(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, *locksv1alpha1.LockClaim, *claimRec) {
	created := time.Now()
	if err := cl.c.Create(ctx, pod); err != nil {
		cl.errs("creating pod %s: %v", pod.Name, err)
		return nil, nil, nil
	}
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns,
		Name: locksv1alpha1.PodClaimName(pod.Name, pod.UID, cl.lock)}}
	rec := cl.rec.expect(cl.ns+"/"+cl.lock, claim.Name)
	cl.rec.update(claim.Name, func(g *Grant) { g.Created, g.Exclusive = created, cl.alone })
	return pod, claim, rec
}

// deleteGracefully ends a hold by EndGracefulDelete: the pod is deleted with its grace period, so
// that it stays terminating (there is no kubelet to remove it); its process goes on for
// TTL/2..1.5×TTL (TTL/5 once the workload stopped, so that the queue drains), writing once more
// in the middle, as a holder still may until its pod is gone, then the pod is removed as the
// kubelet removes it once the process exited.
func (cl *claimant) deleteGracefully(ctx context.Context, name string, pod *corev1.Pod, write func()) {
	linger := cl.ttl/2 + time.Duration(cl.rng.Int64N(int64(cl.ttl)))
	select {
	case <-cl.stopNew:
		linger = cl.ttl / 5
	default:
	}
	if err := cl.c.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		cl.errs("deleting pod %s gracefully: %v", pod.Name, err)
	}
	for range 2 {
		select {
		case <-time.After(linger / 2):
		case <-cl.drain:
		}
		write()
	}
	cl.rec.update(name, func(g *Grant) { g.End, g.EndAt = EndGracefulDelete, time.Now() })
	if err := cl.c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		cl.errs("removing pod %s: %v", pod.Name, err)
	}
}

// loseNode ends a hold by EndNodeLoss: the claimant's node turns Ready=Unknown, and the claimant,
// cut off with it, goes on writing every TTL/5 until the controller ends its claim (the lock's
// holderNodeLossSeconds), then as a zombie (zombie: at once, and after a newer holder wrote,
// which the fenced register must refuse). Then the node comes back, and the pod, whose claim
// ended and which gets no other, is deleted, as its owner would replace it.
func (cl *claimant) loseNode(ctx context.Context, rec *claimRec, name string, pod *corev1.Pod, token int64, write func()) {
	cl.rec.update(name, func(g *Grant) { g.End, g.EndAt = EndNodeLoss, time.Now() })
	if err := setNodeReady(ctx, cl.c, cl.node, corev1.ConditionUnknown); err != nil {
		cl.errs("failing node %s: %v", cl.node, err)
	}
	cl.writeUntilEnded(rec, cl.drain, write)
	cl.zombie(rec, name, token, write)
	if err := setNodeReady(ctx, cl.c, cl.node, corev1.ConditionTrue); err != nil {
		cl.errs("restoring node %s: %v", cl.node, err)
	}
	if err := cl.c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		cl.errs("deleting pod %s: %v", pod.Name, err)
	}
}

// roleWatch records every change of the run's pods that ask for a lock, and of its locks'
// records, each dated on arrival with its revision: the history of the role-label checkers.
type roleWatch struct {
	mu      sync.Mutex
	pods    []PodRole
	records []LockRecord
	errs    []string

	stop context.CancelFunc
	done sync.WaitGroup
}

// watchRoles starts following the pods and locks of namespace ns.
func watchRoles(ctx context.Context, c client.WithWatch, ns string) *roleWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &roleWatch{stop: cancel}
	w.done.Add(2)
	go func() { defer w.done.Done(); follow(ctx, c, ns, &corev1.PodList{}, w.seePod, w.gap) }()
	go func() {
		defer w.done.Done()
		follow(ctx, c, ns, &locksv1alpha1.DistributedLockList{}, w.seeLock, w.gap)
	}()
	return w
}

// results stops the watches and returns what they saw.
func (w *roleWatch) results() ([]PodRole, []LockRecord, []string) {
	w.stop()
	w.done.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pods, w.records, w.errs
}

// gap records a gap in the role history.
func (w *roleWatch) gap(msg string) {
	w.mu.Lock()
	w.errs = append(w.errs, "the role history has a gap: "+msg)
	w.mu.Unlock()
}

// follow lists the kind of list in ns, hands each item to see, then watches from the list's
// resourceVersion and hands every event to see, each dated on arrival, resuming a watch that ends
// from the last resourceVersion seen. A history the server no longer has (410 Gone) is a gap the
// checkers cannot see through: it is handed to gap, and the watch stops.
func follow(ctx context.Context, c client.WithWatch, ns string, list client.ObjectList, see func(watch.EventType, client.Object, time.Time), gap func(string)) {
	for ctx.Err() == nil {
		if err := c.List(ctx, list, client.InNamespace(ns)); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	items, _ := meta.ExtractList(list)
	now := time.Now()
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			see(watch.Added, o, now)
		}
	}
	rv := list.GetResourceVersion()
	for ctx.Err() == nil {
		wt, err := c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), &client.ListOptions{Namespace: ns,
			Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for a := range dateOnArrival(wt.ResultChan()) {
			ev := a.event
			if ev.Type == watch.Error {
				if ctx.Err() != nil {
					break
				}
				if status, ok := ev.Object.(*metav1.Status); ok && status.Code == http.StatusGone {
					gap(fmt.Sprintf("the watch from resourceVersion %s expired: %s", rv, status.Message))
					wt.Stop()
					return
				}
				break
			}
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			if ev.Type != watch.Bookmark {
				see(ev.Type, o, a.at)
			}
		}
		wt.Stop()
	}
}

// seePod records a pod that asks for a lock as the event shows it.
func (w *roleWatch) seePod(t watch.EventType, o client.Object, at time.Time) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	lock, annotated := pod.Annotations[locksv1alpha1.PodLockAnnotation]
	if !annotated {
		return
	}
	p := PodRole{At: at, Revision: revisionOf(pod.ResourceVersion), Pod: pod.Name, Lock: pod.Namespace + "/" + lock,
		Claim: locksv1alpha1.PodClaimName(pod.Name, pod.UID, lock), Role: pod.Labels[locksv1alpha1.PodRoleLabel],
		Terminating: pod.DeletionTimestamp != nil, Gone: t == watch.Deleted,
		Gated: slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
			return g.Name == locksv1alpha1.PodSchedulingGate
		}),
		Finished: pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed}
	w.mu.Lock()
	w.pods = append(w.pods, p)
	w.mu.Unlock()
}

// seeLock records a lock's record as the event shows it.
func (w *roleWatch) seeLock(t watch.EventType, o client.Object, at time.Time) {
	l, ok := o.(*locksv1alpha1.DistributedLock)
	if !ok {
		return
	}
	r := LockRecord{At: at, Revision: revisionOf(l.ResourceVersion), Lock: l.Namespace + "/" + l.Name, Gone: t == watch.Deleted}
	for _, h := range l.Status.Holders {
		r.Holders = append(r.Holders, h.Claim)
	}
	w.mu.Lock()
	w.records = append(w.records, r)
	w.mu.Unlock()
}

// checkRoles runs the role-label checkers over what the role watch saw (standby runs).
func (r *run) checkRoles(res *Result) {
	pods, records, errs := r.roles.results()
	res.HolderLabelled = HolderLabelled(pods)
	res.Violations = append(res.Violations, findings("history", errs)...)
	res.Violations = append(res.Violations, findings("holder-labels", CheckHolderLabels(pods, r.placesOf))...)
	stale, longest := CheckHolderRecord(pods, records, r.roleGrace(), r.observedUntil)
	res.Violations = append(res.Violations, findings("holder-record", stale)...)
	if r.s.gated {
		r.checkGates(res, pods)
	}
	r.t.Logf("role watch: %d pod changes, %d lock record changes, %d pods labelled holder, longest labelled holder without holding or while terminating %s (grace %s)",
		len(pods), len(records), res.HolderLabelled, longest.Round(time.Millisecond), r.roleGrace())
}
