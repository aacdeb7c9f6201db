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

// Command demo shows lockwarden's main job on a live cluster: a Deployment's pods take turns
// holding one lock. The pods ask for it by annotation and wait behind the lockwarden scheduling
// gate: the controller creates each pod's claim, and lets a pod be scheduled only once it holds
// the lock. The demo prints every grant, scheduling and release as it happens. Then it deletes the
// holder pod (its ReplicaSet replaces it and the lock moves to the next pod) and scales the
// Deployment up and down. Run it with KUBECONFIG pointing at a cluster where the lockwarden
// manager runs; hack/demo.sh sets all that up on the local cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

const (
	lockName   = "nightly-report"
	deployName = "report-worker"
)

func main() {
	ns := flag.String("namespace", "lockwarden-demo", "namespace to run the demo in (created, then deleted)")
	flag.Parse()
	if err := run(*ns); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	c  client.WithWatch
	ns string

	mu     sync.Mutex
	phase  map[string]locksv1alpha1.ClaimPhase
	grants chan string // pod names, as they are granted
	freed  time.Time   // when the last holder's release was seen
}

func run(ns string) error {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = locksv1alpha1.AddToScheme(scheme)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	d := &demo{c: c, ns: ns, phase: map[string]locksv1alpha1.ClaimPhase{},
		grants: make(chan string, 100)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	defer d.cleanup()

	step("Creating namespace %s, DistributedLock %s (built-in kubernetes backend) and Deployment %s with 3 replicas", ns, lockName, deployName)
	if err := d.setup(ctx); err != nil {
		return err
	}
	go d.watchPods(ctx)
	go d.reportClaims(ctx)

	first := d.nextGrant(ctx)
	if first == "" {
		return fmt.Errorf("no pod was granted the lock within the time limit")
	}
	time.Sleep(time.Second)
	d.printQueue(ctx)

	step("Deleting the holder pod %s: its claim is released, the next pod in line gets the lock, and the ReplicaSet's replacement pod joins the queue", first)
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first}}); err != nil {
		return err
	}
	second := d.nextGrant(ctx)
	time.Sleep(2 * time.Second)
	d.printQueue(ctx)

	step("Scaling %s to 5 replicas: two more pods queue for the lock", deployName)
	if err := d.scale(ctx, 5); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	d.printQueue(ctx)

	step("Deleting the holder pod %s again", second)
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: second}}); err != nil {
		return err
	}
	d.nextGrant(ctx)
	time.Sleep(2 * time.Second)

	step("Scaling %s down to 1 replica: the claims of removed pods go with them (garbage collection; the lock record releases them)", deployName)
	if err := d.scale(ctx, 1); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	d.printQueue(ctx)
	return nil
}

func step(format string, args ...any) {
	fmt.Printf("\n\033[1m== "+format+"\033[0m\n", args...)
}

func (d *demo) setup(ctx context.Context) error {
	if err := d.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The pods' service account may create LockClaims: the controller makes an annotated pod's
	// claim only for an account that may (docs/security.md, Inside a namespace).
	if err := rbacenv.AllowClaims(ctx, d.c, d.ns); err != nil {
		return err
	}
	lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: d.ns, Name: lockName},
		Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: 15}}
	if err := d.c.Create(ctx, lock); err != nil {
		return err
	}
	labels := map[string]string{"app": deployName}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.ns, Name: deployName},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				// Each pod asks for the lock by annotation, and the scheduling gate keeps it off the
				// nodes until it holds the lock: the controller creates its claim, and lifts the
				// gate after writing the fencing token onto the pod.
				ObjectMeta: metav1.ObjectMeta{Labels: labels,
					Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: lockName}},
				Spec: corev1.PodSpec{
					SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}},
					Containers:      []corev1.Container{{Name: "report", Image: "registry.k8s.io/pause:3.10"}},
					Tolerations:     []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
				},
			},
		},
	}
	return d.c.Create(ctx, deploy)
}

func (d *demo) scale(ctx context.Context, replicas int32) error {
	deploy := &appsv1.Deployment{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: deployName}, deploy); err != nil {
		return err
	}
	patch := client.MergeFrom(deploy.DeepCopy())
	deploy.Spec.Replicas = ptr.To(replicas)
	return d.c.Patch(ctx, deploy, patch)
}

// watchPods prints each pod of the Deployment as it appears (gated, so unscheduled) and when the
// scheduler places it on a node, which happens only once the controller lifted its gate.
func (d *demo) watchPods(ctx context.Context) {
	w, err := d.c.Watch(ctx, &corev1.PodList{}, client.InNamespace(d.ns), client.MatchingLabels{"app": deployName})
	if err != nil {
		fmt.Fprintln(os.Stderr, "watching pods:", err)
		return
	}
	defer w.Stop()
	placed := map[string]bool{}
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		switch {
		case ev.Type == watch.Added:
			fmt.Printf("  + pod %-32s created with the lock annotation; held back by the scheduling gate\n", pod.Name)
		case ev.Type == watch.Modified && pod.Spec.NodeName != "" && !placed[pod.Name]:
			placed[pod.Name] = true
			fmt.Printf("  → pod %-32s scheduled onto %s with %s=%s\n", pod.Name, pod.Spec.NodeName,
				locksv1alpha1.PodFencingTokenAnnotation, pod.Annotations[locksv1alpha1.PodFencingTokenAnnotation])
		}
	}
}

// reportClaims prints every phase change of the demo's claims as it happens.
func (d *demo) reportClaims(ctx context.Context) {
	w, err := d.c.Watch(ctx, &locksv1alpha1.LockClaimList{}, client.InNamespace(d.ns))
	if err != nil {
		fmt.Fprintln(os.Stderr, "watching claims:", err)
		return
	}
	defer w.Stop()
	// A holder's claim that is deleted (by its pod's garbage collection, say) is released by its
	// deletion: the controller does not write its status again, so the deletion is the release.
	releasedByDeletion := map[string]bool{}
	for ev := range w.ResultChan() {
		c, ok := ev.Object.(*locksv1alpha1.LockClaim)
		if !ok {
			continue
		}
		d.mu.Lock()
		prev := d.phase[c.Name]
		deleted := (ev.Type == watch.Deleted || !c.DeletionTimestamp.IsZero()) && prev == locksv1alpha1.ClaimHeld && !releasedByDeletion[c.Name]
		if deleted {
			releasedByDeletion[c.Name] = true
		}
		if ev.Type != watch.Deleted {
			d.phase[c.Name] = c.Status.Phase
		}
		created, freed := c.CreationTimestamp.Time, d.freed
		if deleted || (prev != c.Status.Phase && c.Status.Phase == locksv1alpha1.ClaimReleased) {
			d.freed = time.Now()
		}
		d.mu.Unlock()
		if deleted {
			fmt.Printf("  ✘ %-8s pod %-30s its claim was deleted with the pod, which releases it\n", locksv1alpha1.ClaimReleased, c.Spec.Holder.PodName)
		}
		if ev.Type == watch.Deleted || prev == c.Status.Phase {
			continue
		}
		switch c.Status.Phase {
		case locksv1alpha1.ClaimHeld:
			latency := fmt.Sprintf("%s after its claim was created", time.Since(created).Round(time.Millisecond))
			if !freed.IsZero() {
				latency = fmt.Sprintf("%s after the previous holder's release was seen", time.Since(freed).Round(time.Millisecond))
			}
			fmt.Printf("  \033[32m✔ GRANTED\033[0m to pod %-26s fencing token %d, %s\n",
				c.Spec.Holder.PodName, c.Status.FencingToken, latency)
			d.grants <- c.Spec.Holder.PodName
		case locksv1alpha1.ClaimReleased, locksv1alpha1.ClaimLost, locksv1alpha1.ClaimFailed:
			fmt.Printf("  ✘ %-8s pod %-30s %s\n", c.Status.Phase, c.Spec.Holder.PodName, acquiredMessage(c))
		}
	}
}

func acquiredMessage(c *locksv1alpha1.LockClaim) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == locksv1alpha1.ConditionAcquired {
			return cond.Reason + ": " + cond.Message
		}
	}
	return ""
}

func (d *demo) nextGrant(ctx context.Context) string {
	select {
	case pod := <-d.grants:
		return pod
	case <-ctx.Done():
		return ""
	}
}

// printQueue shows the lock's holder and queue, like `kubectl get lclaim`.
func (d *demo) printQueue(ctx context.Context) {
	list := &locksv1alpha1.LockClaimList{}
	if err := d.c.List(ctx, list, client.InNamespace(d.ns)); err != nil {
		return
	}
	// Grant order: creation time, then name (status.queuePosition moves in bands and at most once a
	// minute, so that a handoff costs the waiters no write: the demo orders the queue itself).
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if (a.Status.Phase == locksv1alpha1.ClaimHeld) != (b.Status.Phase == locksv1alpha1.ClaimHeld) {
			return a.Status.Phase == locksv1alpha1.ClaimHeld
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	var rows []string
	position := 0
	for _, c := range list.Items {
		switch c.Status.Phase {
		case locksv1alpha1.ClaimHeld:
			rows = append(rows, fmt.Sprintf("    holder   pod %-30s token %d (claim %s)", c.Spec.Holder.PodName, c.Status.FencingToken, c.Name))
		case locksv1alpha1.ClaimPending:
			position++
			rows = append(rows, fmt.Sprintf("    queue #%d pod %-30s (gated, not scheduled)", position, c.Spec.Holder.PodName))
		}
	}
	fmt.Printf("  lock %s now:\n%s\n", lockName, strings.Join(rows, "\n"))
}

func (d *demo) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.ns}})
}
