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
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"

	"github.com/lockwarden/lockwarden/internal/lockengine"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

// podNamespace creates a namespace with one lock for a pod benchmark.
func (b *bench) podNamespace(t *testing.T, ctx context.Context, name string) {
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	must(t, rbacenv.AllowClaims(ctx, b.c, name)) // its pods ask by annotation
	lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "turns"}}
	must(t, b.c.Create(ctx, lock))
	must(t, waitLockReady(ctx, b.c, name, "turns"))
}

// newPod creates a pod in ns; annotated pods ask for the lock and wait behind the scheduling gate.
func (b *bench) newPod(t *testing.T, ctx context.Context, ns, name string, annotated bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "bench"}}}}
	if annotated {
		p.Annotations = map[string]string{locksv1alpha1.PodLockAnnotation: "turns"}
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}
	}
	must(t, b.c.Create(ctx, p))
	return p
}

// gatedPods times, for pods that ask for the lock by annotation and scheduling gate, the time from
// the holder pod's deletion to the next pod's gate lifted (with its token annotation written), and,
// through the engine's tracer, to the two writes of the grant: the lock record naming the next
// pod's claim, from which the pod lock controller lifts the gate, and that claim's status written
// Held, which it no longer waits for (the gap between the record and the gate is the pod's patch
// and the watches on either side of it).
func (b *bench) gatedPods(t *testing.T, ctx context.Context, turns int) []podResult {
	const ns = "bench-gated"
	b.podNamespace(t, ctx, ns)
	b.tracer.follow(types.NamespacedName{Namespace: ns, Name: "turns"})
	type lifted struct {
		pod, claim string
		at         time.Time
	}
	ungated := make(chan lifted, turns+1)
	w, err := b.c.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	must(t, err)
	defer w.Stop()
	go func() {
		seen := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if ok && ev.Type != watch.Deleted && len(p.Spec.SchedulingGates) == 0 &&
				p.Annotations[locksv1alpha1.PodFencingTokenAnnotation] != "" && !seen[p.Name] {
				seen[p.Name] = true
				ungated <- lifted{p.Name, locksv1alpha1.PodClaimName(p.Name, p.UID, "turns"), time.Now()}
			}
		}
	}()
	for i := range turns + 1 {
		b.newPod(t, ctx, ns, fmt.Sprintf("gated-%03d", i), true)
	}
	nextLifted := func() lifted {
		select {
		case l := <-ungated:
			return l
		case <-time.After(60 * time.Second):
			t.Fatal("no gate lifted within 60 s")
			return lifted{}
		}
	}
	holder := nextLifted()
	type turn struct {
		start time.Time
		next  lifted
	}
	var done []turn
	for range turns {
		start := time.Now()
		must(t, b.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: holder.pod}}, client.GracePeriodSeconds(0)))
		holder = nextLifted()
		done = append(done, turn{start, holder})
	}
	// The gate is lifted from the record, so the claim's Held write may land after it: read the
	// tracer once the last turn's writes are surely done.
	time.Sleep(time.Second)
	var toGate, toRecord, toHeld []time.Duration
	for _, d := range done {
		toGate = append(toGate, d.next.at.Sub(d.start))
		if at := b.tracer.first(lockengine.TraceRecordWritten, d.next.claim, d.start); !at.IsZero() {
			toRecord = append(toRecord, at.Sub(d.start))
		}
		if at := b.tracer.first(lockengine.TraceClaimWritten, d.next.claim, d.start); !at.IsZero() {
			toHeld = append(toHeld, at.Sub(d.start))
		}
	}
	return []podResult{
		{label: "holder pod deleted → lock record written, naming the next pod's claim (the engine's tracer)",
			lat: report("holder pod deleted → lock record names the next pod's claim", toRecord)},
		{label: "holder pod deleted → the next pod's claim written Held (which the gate no longer waits for)",
			lat: report("holder pod deleted → next pod's claim Held", toHeld)},
		{label: "holder pod deleted → next pod's gate lifted, token annotation written",
			lat: report("holder pod deleted → next pod ungated (gate + token)", toGate)},
	}
}

// lockctlAcquire times, for pods whose init container runs `lockctl acquire` (the real binary,
// with the downward-API environment of its pod), the time from the holder pod's deletion to the
// next lockctl exiting with the lock.
func (b *bench) lockctlAcquire(t *testing.T, ctx context.Context, turns int) podResult {
	const ns = "bench-lockctl"
	b.podNamespace(t, ctx, ns)
	bin := filepath.Join(t.TempDir(), "lockctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/lockctl")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/lockctl: %v: %s", err, out)
	}
	type exit struct {
		pod string
		err error
	}
	exited := make(chan exit, turns+1)
	for i := range turns + 1 {
		p := b.newPod(t, ctx, ns, fmt.Sprintf("init-%03d", i), false)
		cmd := exec.CommandContext(ctx, bin, "acquire", "--lock", "turns")
		cmd.Env = append(os.Environ(), "POD_NAME="+p.Name, "POD_NAMESPACE="+ns, "POD_UID="+string(p.UID))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { exited <- exit{p.Name, cmd.Wait()} }()
	}
	first := <-exited
	must(t, first.err)
	holder := first.pod
	var lat []time.Duration
	for range turns {
		start := time.Now()
		must(t, b.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: holder}}, client.GracePeriodSeconds(0)))
		select {
		case e := <-exited:
			must(t, e.err)
			holder = e.pod
		case <-time.After(60 * time.Second):
			t.Fatal("no lockctl acquired the lock within 60 s of the holder pod's deletion")
		}
		lat = append(lat, time.Since(start))
	}
	return podResult{label: "holder pod deleted → next `lockctl acquire` exits 0",
		lat: report("holder pod deleted → next lockctl acquire exits 0", lat)}
}
