//go:build bench

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

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Leader election: lockwarden's Standby pods (3 replicas of a Deployment, a Service that selects
// role: holder, as config/samples/pods/leader-election.yaml) beside what users run instead,
// client-go leader election in a sidecar that labels its pod while it leads, with the timings of
// kube-controller-manager and kube-scheduler. Every figure is timed by watches: the time an event
// arrives that shows the next pod labelled (or the Service's EndpointSlice serving it).

// The client-go leader election timings of the core components (their --leader-elect-* defaults).
const (
	peerLeaseDuration = 15 * time.Second
	peerRenewDeadline = 10 * time.Second
	peerRetryPeriod   = 2 * time.Second
)

// peerLeaderLabel is the label a client-go sidecar puts on its pod while it leads.
const peerLeaderLabel = "bench.lockwarden.io/leader"

// standbyReplicas is the size of both Deployments, as in the sample.
const standbyReplicas = 3

// standbyResult is leader election on the built-in backend beside client-go's.
type standbyResult struct {
	// graceful and crash time a holder pod deleted (gracefully; force-deleted) → the next pod
	// labelled holder; served the graceful delete → the Service's EndpointSlice serving only it.
	graceful, served, crash quantiles
	// peerRelease and peerCrash time a client-go leader's end (its context cancelled, releasing
	// its Lease; or stopped without a release, as a killed process) → the next pod labelled leader.
	peerRelease, peerCrash quantiles
	// rollMoves is how many times a rolling update moved the lock, rollMost the most pods labelled
	// holder at once during it, rollGap its longest time without a pod labelled holder, and
	// rollTotal the time from the template change until every pod was new and one held.
	rollMoves, rollMost int
	rollGap, rollTotal  time.Duration
}

// crashRatio is how many times longer client-go took than lockwarden on a crash, p50 to p50.
func (r standbyResult) crashRatio() float64 {
	if r.crash.P50 <= 0 {
		return 0
	}
	return float64(r.peerCrash.P50) / float64(r.crash.P50)
}

// leaderElection measures lockwarden's Standby pods and then client-go leader election on the same
// cluster. Lockwarden's replicas are a Deployment, whose ReplicaSet replaces each deleted holder
// pod as it would in production: every turn starts from three running replicas, one holder and
// two standbys queued, and the rolling update needs the Deployment anyway.
func (b *bench) leaderElection(t *testing.T, ctx context.Context, turns, peerReleases, peerCrashes int) standbyResult {
	var r standbyResult
	b.standbyPods(t, ctx, turns, &r)
	b.clientGoPeer(t, ctx, peerReleases, peerCrashes, &r)
	fmt.Printf("  %-58s %.0f× (p50 %s ms / %s ms)\n", "crash: client-go ÷ lockwarden", r.crashRatio(),
		fmtMS(r.peerCrash.P50), fmtMS(r.crash.P50))
	return r
}

// standbyPods times lockwarden: holder pods deleted gracefully and by force, and a rolling update.
func (b *bench) standbyPods(t *testing.T, ctx context.Context, turns int, r *standbyResult) {
	const ns = "bench-standby"
	b.podNamespace(t, ctx, ns)
	pods := watchPods(t, ctx, b.c, ns, "checkout", locksv1alpha1.PodRoleLabel)
	endpoints := watchState(t, ctx, b.c, &discoveryv1.EndpointSliceList{}, ns,
		client.MatchingLabels{discoveryv1.LabelServiceName: "checkout-active"}, readyEndpoints)
	must(t, b.c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout-active"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "checkout", locksv1alpha1.PodRoleLabel: locksv1alpha1.PodRoleHolder},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		}}))
	must(t, b.c.Create(ctx, deployment(ns, "checkout", map[string]string{
		locksv1alpha1.PodLockAnnotation:     "turns",
		locksv1alpha1.PodLockWaitAnnotation: locksv1alpha1.PodLockWaitStandby,
	})))

	var graceful, served, crash []time.Duration
	for _, force := range []bool{false, true} {
		for range turns {
			label, serve := b.holderDeleted(t, ctx, ns, pods, endpoints, force)
			if force {
				crash = append(crash, label)
			} else {
				graceful, served = append(graceful, label), append(served, serve)
			}
		}
	}
	r.graceful = report("holder pod deleted → next pod labelled holder", graceful)
	r.served = report("holder pod deleted → EndpointSlice serves only it", served)
	r.crash = report("holder pod force-deleted → next pod labelled holder", crash)
	b.rollingUpdate(t, ctx, ns, pods, endpoints, r)
}

// holderDeleted deletes the holder pod of a settled Deployment (with no grace period when force)
// and times the next pod labelled holder and the Service's EndpointSlice serving only that pod.
func (b *bench) holderDeleted(t *testing.T, ctx context.Context, ns string, pods *stateWatch[podView],
	endpoints *stateWatch[[]string], force bool) (labelled, served time.Duration) {
	holder := standbySettled(t, pods, endpoints)
	var next string
	nextLabelled := pods.until(func(s map[string]podView) bool {
		for name, p := range s {
			if name != holder && p.label == locksv1alpha1.PodRoleHolder {
				next = name
				return true
			}
		}
		return false
	})
	var on string
	nextServed := endpoints.until(func(s map[string][]string) bool {
		serving := servedPods(s)
		if len(serving) == 1 && serving[0] != holder {
			on = serving[0]
			return true
		}
		return false
	})
	var opts []client.DeleteOption
	if force {
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	start := time.Now()
	must(t, b.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: holder}}, opts...))
	labelled = arrival(t, nextLabelled, "a pod labelled holder after the holder's deletion").Sub(start)
	served = arrival(t, nextServed, "the Service serving one pod after the holder's deletion").Sub(start)
	if on != next {
		t.Fatalf("the Service serves %s alone, but %s is labelled holder", on, next)
	}
	return labelled, served
}

// standbySettled waits until the Deployment has its replicas running, none terminating, one
// labelled holder and the others standby, and the Service serves the holder alone; it returns
// the holder.
func standbySettled(t *testing.T, pods *stateWatch[podView], endpoints *stateWatch[[]string]) string {
	t.Helper()
	var holder string
	arrival(t, pods.until(func(s map[string]podView) bool {
		var holders []string
		for name, p := range s {
			if p.terminating || !p.running {
				return false
			}
			switch p.label {
			case locksv1alpha1.PodRoleHolder:
				holders = append(holders, name)
			case locksv1alpha1.PodRoleStandby:
			default:
				return false
			}
		}
		if len(s) != standbyReplicas || len(holders) != 1 {
			return false
		}
		holder = holders[0]
		return true
	}), "the Deployment's replicas running, one labelled holder")
	arrival(t, endpoints.until(func(s map[string][]string) bool {
		return slices.Equal(servedPods(s), []string{holder})
	}), "the Service serving the holder alone")
	return holder
}

// rollingUpdate restarts the Deployment as kubectl rollout restart does (a template annotation)
// and follows the holder label through it: the pods labelled holder in turn, the most at once,
// and the longest time with none.
func (b *bench) rollingUpdate(t *testing.T, ctx context.Context, ns string, pods *stateWatch[podView],
	endpoints *stateWatch[[]string], r *standbyResult) {
	first := standbySettled(t, pods, endpoints)
	old := map[string]bool{}
	pods.read(func(s map[string]podView) {
		for name := range s {
			old[name] = true
		}
	})
	// Called by the watch after each event, under its lock; read after stop.
	order := []string{first}
	var most int
	var noneSince time.Time
	var longest time.Duration
	stop := pods.observe(func(s map[string]podView, at time.Time) bool {
		n := 0
		for name, p := range s {
			if p.label != locksv1alpha1.PodRoleHolder {
				continue
			}
			n++
			if !slices.Contains(order, name) {
				order = append(order, name)
			}
		}
		most = max(most, n)
		switch {
		case n == 0 && noneSince.IsZero():
			noneSince = at
		case n > 0 && !noneSince.IsZero():
			longest = max(longest, at.Sub(noneSince))
			noneSince = time.Time{}
		}
		return false
	})
	renewed := pods.until(func(s map[string]podView) bool {
		holders := 0
		for name, p := range s {
			if old[name] || p.terminating || !p.running {
				return false
			}
			if p.label == locksv1alpha1.PodRoleHolder {
				holders++
			}
		}
		return len(s) == standbyReplicas && holders == 1
	})
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`,
		time.Now().Format(time.RFC3339))
	start := time.Now()
	must(t, b.c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout"}},
		client.RawPatch(types.StrategicMergePatchType, []byte(patch))))
	end := arrival(t, renewed, "every pod replaced and one new pod labelled holder")
	stop()
	r.rollMoves, r.rollMost, r.rollGap, r.rollTotal = len(order)-1, most, longest, end.Sub(start)
	fmt.Printf("  %-58s %d move(s) (%v), at most %d holder(s) at once, longest without one %s, done in %s\n",
		"rolling update of the Standby replicas", r.rollMoves, order, most, longest.Round(time.Millisecond),
		r.rollTotal.Round(time.Millisecond))
}

// clientGoPeer times client-go leader election: one sidecar per pod of a plain Deployment, run
// in this process, each with its own client. A leader ends at a random point of the others'
// retry period, as an end comes at any time.
func (b *bench) clientGoPeer(t *testing.T, ctx context.Context, releases, crashes int, r *standbyResult) {
	const ns = "bench-clientgo"
	must(t, b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() {
		_ = b.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	pods := watchPods(t, ctx, b.c, ns, "peer", peerLeaderLabel)
	must(t, b.c.Create(ctx, deployment(ns, "peer", nil)))
	var names []string
	arrival(t, pods.until(func(s map[string]podView) bool {
		names = names[:0]
		for name, p := range s {
			if p.running && !p.terminating {
				names = append(names, name)
			}
		}
		return len(names) == standbyReplicas
	}), "the plain Deployment's replicas running")

	for _, release := range []bool{true, false} {
		n, what := releases, "client-go 15/10/2 s: leader releases → next pod labelled"
		if !release {
			n, what = crashes, "client-go 15/10/2 s: leader killed → next pod labelled"
		}
		sidecars := map[string]*sidecar{}
		for _, pod := range names {
			sidecars[pod] = b.startSidecar(t, ctx, ns, pod, release)
		}
		var lat []time.Duration
		for range n {
			leader := peerSettled(t, pods)
			time.Sleep(rand.N(peerRetryPeriod))
			nextLabelled := pods.until(func(s map[string]podView) bool {
				for name, p := range s {
					if name != leader && p.label == "true" {
						return true
					}
				}
				return false
			})
			start := time.Now()
			sidecars[leader].stop()
			lat = append(lat, arrival(t, nextLabelled, "another pod labelled leader").Sub(start))
			<-sidecars[leader].done
			if !release {
				// What the killed sidecar's replacement does first: the pod no longer leads.
				must(t, b.c.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: leader}},
					client.RawPatch(types.MergePatchType, leaderPatch(false))))
			}
			sidecars[leader] = b.startSidecar(t, ctx, ns, leader, release)
		}
		if release {
			r.peerRelease = report(what, lat)
		} else {
			r.peerCrash = report(what, lat)
		}
		for _, s := range sidecars {
			s.stop()
			<-s.done
		}
	}
}

// peerSettled waits until every sidecar's pod is there and exactly one is labelled leader, and
// returns it.
func peerSettled(t *testing.T, pods *stateWatch[podView]) string {
	t.Helper()
	var leader string
	arrival(t, pods.until(func(s map[string]podView) bool {
		var leaders []string
		for name, p := range s {
			if p.label == "true" {
				leaders = append(leaders, name)
			}
		}
		if len(s) != standbyReplicas || len(leaders) != 1 {
			return false
		}
		leader = leaders[0]
		return true
	}), "one pod labelled leader")
	return leader
}

// sidecar is one client-go leader election candidate, as a sidecar container of its pod would
// run it: its own client, an identity made of the pod's name and a fresh UUID (as the core
// components make theirs), their timings, and callbacks that label the pod while it leads.
type sidecar struct {
	// stop cancels the elector's context: it releases the Lease and unlabels its pod if it was
	// started with release, and otherwise just stops renewing, as a killed process does.
	stop context.CancelFunc
	done chan struct{}
}

func (b *bench) startSidecar(t *testing.T, ctx context.Context, ns, pod string, release bool) *sidecar {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(b.cfg))
	must(t, err)
	label := func(ctx context.Context, leads bool) {
		_, _ = cs.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, leaderPatch(leads), metav1.PatchOptions{})
	}
	var leading atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: "peer-leader"},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: pod + "_" + string(uuid.NewUUID())},
		},
		LeaseDuration:   peerLeaseDuration,
		RenewDeadline:   peerRenewDeadline,
		RetryPeriod:     peerRetryPeriod,
		ReleaseOnCancel: release,
		Name:            "peer-leader",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				leading.Store(true)
				label(ctx, true)
			},
			OnStoppedLeading: func() {
				if release && leading.Load() {
					stopCtx, cancel := context.WithTimeout(context.Background(), peerRenewDeadline)
					defer cancel()
					label(stopCtx, false)
				}
			},
		},
	})
	must(t, err)
	run, cancel := context.WithCancel(klog.NewContext(ctx, logr.Discard()))
	s := &sidecar{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		le.Run(run)
	}()
	return s
}

// leaderPatch labels a pod leader, or removes the label.
func leaderPatch(leads bool) []byte {
	if leads {
		return []byte(`{"metadata":{"labels":{"` + peerLeaderLabel + `":"true"}}}`)
	}
	return []byte(`{"metadata":{"labels":{"` + peerLeaderLabel + `":null}}}`)
}

// deployment is a Deployment of standbyReplicas pods labelled app: name, with annotations on its
// pod template.
func deployment(ns, name string, annotations map[string]string) *appsv1.Deployment {
	replicas := int32(standbyReplicas)
	selector := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector, Annotations: annotations},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "bench",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
			},
		}}
}

// podView is what the phases need of a pod: the value of the label they follow, and whether it
// runs and whether it is terminating.
type podView struct {
	label                string
	running, terminating bool
}

// watchPods follows the pods labelled app: app in ns, with the value of their label key.
func watchPods(t *testing.T, ctx context.Context, c client.WithWatch, ns, app, key string) *stateWatch[podView] {
	return watchState(t, ctx, c, &corev1.PodList{}, ns, client.MatchingLabels{"app": app}, func(o client.Object) podView {
		p := o.(*corev1.Pod)
		return podView{label: p.Labels[key], running: p.Status.Phase == corev1.PodRunning, terminating: p.DeletionTimestamp != nil}
	})
}

// readyEndpoints lists the pods an EndpointSlice sends traffic to (its ready endpoints).
func readyEndpoints(o client.Object) []string {
	var pods []string
	for _, e := range o.(*discoveryv1.EndpointSlice).Endpoints {
		if e.TargetRef != nil && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
			pods = append(pods, e.TargetRef.Name)
		}
	}
	return pods
}

// servedPods is the sorted union of the ready endpoints of a Service's EndpointSlices.
func servedPods(s map[string][]string) []string {
	var pods []string
	for _, slice := range s {
		pods = append(pods, slice...)
	}
	slices.Sort(pods)
	return slices.Compact(pods)
}

// stateWatch follows the objects of one kind in a namespace by a list and a watch from the list's
// resourceVersion (listing again when the server ends the watch) and keeps, by name, what view
// makes of each. After each event it calls its observers with the state and the time the event
// arrived: the phases time what they wait for by that, not by polling.
type stateWatch[V any] struct {
	mu        sync.Mutex
	state     map[string]V
	observers map[int]func(map[string]V, time.Time) bool
	nextID    int
}

// watchState lists the objects and starts watching them; list is the kind's empty list.
func watchState[V any](t *testing.T, ctx context.Context, c client.WithWatch, list client.ObjectList, ns string,
	selector client.MatchingLabels, view func(client.Object) V) *stateWatch[V] {
	w := &stateWatch[V]{state: map[string]V{}, observers: map[int]func(map[string]V, time.Time) bool{}}
	opts := func(rv string) *client.ListOptions {
		return &client.ListOptions{Namespace: ns, LabelSelector: labels.SelectorFromSet(labels.Set(selector)),
			Raw: &metav1.ListOptions{ResourceVersion: rv}}
	}
	relist := func() (string, error) {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, l, opts("")); err != nil {
			return "", err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return "", err
		}
		state := map[string]V{}
		for _, item := range items {
			o := item.(client.Object)
			state[o.GetName()] = view(o)
		}
		w.mu.Lock()
		w.state = state
		w.notify(time.Now())
		w.mu.Unlock()
		return l.GetResourceVersion(), nil
	}
	rv, err := relist()
	must(t, err)
	go func() {
		for ctx.Err() == nil {
			wi, err := c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), opts(rv))
			if err == nil {
				w.follow(wi, view)
				wi.Stop()
			}
			if ctx.Err() != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
			if next, err := relist(); err == nil {
				rv = next
			}
		}
	}()
	return w
}

// follow applies the watch's events until it ends or sends an error.
func (w *stateWatch[V]) follow(wi watch.Interface, view func(client.Object) V) {
	for ev := range wi.ResultChan() {
		at := time.Now()
		o, ok := ev.Object.(client.Object)
		if ev.Type == watch.Error || !ok {
			return
		}
		w.mu.Lock()
		switch ev.Type {
		case watch.Added, watch.Modified:
			w.state[o.GetName()] = view(o)
		case watch.Deleted:
			delete(w.state, o.GetName())
		}
		w.notify(at)
		w.mu.Unlock()
	}
}

// notify calls the observers, under w.mu, and drops those that are done.
func (w *stateWatch[V]) notify(at time.Time) {
	for id, f := range w.observers {
		if f(w.state, at) {
			delete(w.observers, id)
		}
	}
}

// observe calls f, under the watch's lock, with the state now and after each event until f says
// it is done or stop is called. f must not block.
func (w *stateWatch[V]) observe(f func(state map[string]V, at time.Time) (done bool)) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f(w.state, time.Now()) {
		return func() {}
	}
	id := w.nextID
	w.nextID++
	w.observers[id] = f
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.observers, id)
	}
}

// until sends the arrival time of the first event after which cond holds (now, if it holds
// already). cond runs under the watch's lock, so what it stores is safe to read once the time
// has come.
func (w *stateWatch[V]) until(cond func(map[string]V) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.observe(func(s map[string]V, at time.Time) bool {
		if !cond(s) {
			return false
		}
		ch <- at
		return true
	})
	return ch
}

// read calls f with the state, under the watch's lock.
func (w *stateWatch[V]) read(f func(map[string]V)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w.state)
}

// arrival returns the time ch sends, or fails after three minutes waiting for what.
func arrival(t *testing.T, ch <-chan time.Time, what string) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(3 * time.Minute):
		t.Fatalf("no %s within 3 minutes", what)
		return time.Time{}
	}
}
