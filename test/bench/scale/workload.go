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

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"

	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

func lockName(i int) string { return fmt.Sprintf("lock-%05d", i) }

// claimName orders a lock's detached claims by name, which breaks ties between claims created
// in the same second (creationTimestamp has whole seconds), so that index 0 is the head.
func claimName(lock, i int) string { return fmt.Sprintf("lock-%05d-%06d", lock, i) }

// parallel runs do(i) for i in [0, n) on k goroutines and returns the first error.
func parallel(ctx context.Context, k, n int, do func(int) error) error {
	work := make(chan int)
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for i := range work {
				if first.Load() != nil {
					continue
				}
				if err := do(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := first.Load(); err != nil {
		return *err
	}
	return ctx.Err()
}

// createNamespace creates ns, after waiting for a namespace of that name left by an earlier run
// to go.
func createNamespace(ctx context.Context, c client.Client, ns string, bound time.Duration) error {
	if err := deleteNamespace(ctx, c, ns, bound); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	return rbacenv.AllowClaims(ctx, c, ns) // its pods ask by annotation
}

// deleteNamespace deletes ns and waits until it is gone (the manager releases the locks'
// finalizers on the way).
func deleteNamespace(ctx context.Context, c client.Client, ns string, bound time.Duration) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	deadline := time.Now().Add(bound)
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s still there %s after deleting it (phase %s)", ns, bound, obj.Status.Phase)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// createLocks creates n DistributedLocks on the built-in backend with the given lease.
func createLocks(ctx context.Context, c client.Client, ns string, n int, lease time.Duration) error {
	return parallel(ctx, 16, n, func(i int) error {
		return c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lockName(i)},
			Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: int32(lease / time.Second)}})
	})
}

// createDeployments creates, per lock, a Deployment of perLock pods annotated to ask for it,
// with the lockwarden scheduling gate in the pod template when gated (as the chart's admission
// policy would add it to each pod).
func createDeployments(ctx context.Context, c client.Client, ns string, locks, perLock int, gated bool) error {
	return parallel(ctx, 16, locks, func(i int) error {
		name := lockName(i)
		labels := map[string]string{"app": name}
		spec := corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/lockwarden-bench:none"}},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		}
		if gated {
			spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}
		}
		return c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(perLock)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels,
						Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: name}},
					Spec: spec,
				},
			}})
	})
}

// createClaims creates perLock detached claims on each of locks locks, without a finalizer as
// lockctl makes them, on k goroutines, and returns when the last create
// was answered. Each lock's claims are created in order, so that its first claim is its head.
func createClaims(ctx context.Context, c client.Client, ns string, locks, perLock, k int) (time.Time, error) {
	err := parallel(ctx, k, locks, func(l int) error {
		for i := range perLock {
			err := c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName(l, i)},
				Spec: locksv1alpha1.LockClaimSpec{LockName: lockName(l)}})
			if err != nil {
				return fmt.Errorf("creating claim %d of lock %d: %w", i, l, err)
			}
		}
		return nil
	})
	return time.Now(), err
}

// ender ends holders: it deletes a detached claim, or a pod claim's holder pod with grace period
// 0 (Deployment pods have generated names, so a replacement never has the old one's), on a pool
// of goroutines, marking each claim retired in the tracker first.
type ender struct {
	c       client.Client
	ns      string
	t       *tracker
	work    chan heldClaim
	wg      sync.WaitGroup
	errs    atomic.Int64
	lastErr atomic.Pointer[error]
}

func newEnder(ctx context.Context, c client.Client, ns string, t *tracker, workers int) *ender {
	e := &ender{c: c, ns: ns, t: t, work: make(chan heldClaim, 1<<16)}
	for range workers {
		e.wg.Go(func() {
			for h := range e.work {
				if err := e.end(ctx, h); err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, context.Canceled) {
					e.errs.Add(1)
					e.lastErr.Store(&err)
				}
			}
		})
	}
	return e
}

func (e *ender) end(ctx context.Context, h heldClaim) error {
	e.t.retire(h.claim, time.Now())
	if h.pod == "" {
		return e.c.Delete(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: h.claim}})
	}
	// At once, as make bench deletes holder pods: a graceful deletion would add the kubelet's
	// (here kwok's) confirmation to every handoff, and a terminating pod still holds its lock.
	return e.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: h.pod}}, client.GracePeriodSeconds(0))
}

// close waits for the queued ends and returns how many failed, and the last error.
func (e *ender) close() (int64, error) {
	close(e.work)
	e.wg.Wait()
	if p := e.lastErr.Load(); p != nil {
		return e.errs.Load(), *p
	}
	return 0, nil
}
