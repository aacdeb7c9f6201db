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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Several locks at once: the grant of a claim of two free locks beside a claim of one, and how
// long a claim of two locks is overtaken by a stream of one-lock claims on one of them.

// severalResult is the several-locks part of a bench run.
type severalResult struct {
	// single and several are the waits of uncontended grants: a claim created on a free lock, or
	// on two free locks, until the watch shows it Held.
	single, several quantiles
	bound           boundResult
}

// boundResult is one run of the overtaking bound: a claim of locks A and B queued behind a stream
// of one-lock claims on A while B is held.
type boundResult struct {
	lease, holdB, streamHold time.Duration
	// overtakenInBound and overtakenAfter count the stream's grants on A after the claim was
	// queued, within its first lease and after it.
	overtakenInBound, overtakenAfter int
	// waited is from the claim's creation to its grant; afterB from B's release to its grant.
	waited, afterB time.Duration
}

// severalLocks measures the two.
func (b *bench) severalLocks(t *testing.T, ctx context.Context, rounds int) severalResult {
	ns := "bench-several"
	must(t, b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() {
		_ = b.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	held := watchHeldAt(ctx, b.c, ns)
	newLock := func(name string, lease int32) {
		must(t, b.c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: lease}}))
		must(t, waitLockReady(ctx, b.c, ns, name))
	}
	// Each round on locks of its own, free, so that no release is in the figure.
	for i := range rounds {
		newLock(fmt.Sprintf("one-%d", i), 30)
		newLock(fmt.Sprintf("a-%d", i), 30)
		newLock(fmt.Sprintf("b-%d", i), 30)
	}
	grant := func(name string, spec locksv1alpha1.LockClaimSpec) time.Duration {
		start := time.Now()
		must(t, b.c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}))
		at := held.await(t, name, time.Minute)
		return at.Sub(start)
	}
	var single, several []time.Duration
	for i := range rounds {
		single = append(single, grant(fmt.Sprintf("one-%d", i), locksv1alpha1.LockClaimSpec{LockName: fmt.Sprintf("one-%d", i)}))
		several = append(several, grant(fmt.Sprintf("ab-%d", i), locksv1alpha1.LockClaimSpec{LockNames: []string{fmt.Sprintf("a-%d", i), fmt.Sprintf("b-%d", i)}}))
	}
	res := severalResult{single: quantilesOf(single), several: quantilesOf(several)}
	fmt.Printf("  grant of a free lock: %s; of two free locks together: %s\n", res.single.cell(), res.several.cell())

	res.bound = b.overtakingBound(t, ctx, ns, held, newLock)
	fmt.Printf("  %s\n", res.bound.sentence())
	return res
}

// overtakingBound queues a claim of locks A and B behind a stream of one-lock claims on A (each
// held streamHold, two always waiting) while B is held for holdB, then releases B.
func (b *bench) overtakingBound(t *testing.T, ctx context.Context, ns string, held *heldTimes, newLock func(string, int32)) boundResult {
	r := boundResult{lease: 5 * time.Second, holdB: 12 * time.Second, streamHold: 200 * time.Millisecond}
	newLock("stream-a", int32(r.lease/time.Second))
	newLock("stream-b", int32(r.lease/time.Second))
	must(t, b.c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holds-b"},
		Spec: locksv1alpha1.LockClaimSpec{LockName: "stream-b"}}))
	held.await(t, "holds-b", time.Minute)

	// The stream: a claim on A created whenever fewer than two wait, each deleted streamHold
	// after it is seen Held.
	streamCtx, stopStream := context.WithCancel(ctx)
	var grantsMu sync.Mutex
	var grants []time.Time
	var made atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for streamCtx.Err() == nil {
				name := fmt.Sprintf("stream-%d", made.Add(1))
				if err := b.c.Create(streamCtx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: locksv1alpha1.LockClaimSpec{LockName: "stream-a"}}); err != nil {
					return
				}
				at, ok := held.wait(streamCtx, name)
				if !ok {
					return
				}
				grantsMu.Lock()
				grants = append(grants, at)
				grantsMu.Unlock()
				time.Sleep(r.streamHold)
				_ = b.c.Delete(context.Background(), &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
			}
		})
	}
	time.Sleep(2 * time.Second) // the stream under way

	queued := time.Now()
	must(t, b.c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "both"},
		Spec: locksv1alpha1.LockClaimSpec{LockNames: []string{"stream-a", "stream-b"}}}))
	time.Sleep(time.Until(queued.Add(r.holdB)))
	releasedB := time.Now()
	must(t, b.c.Delete(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holds-b"}}))
	grantedAt := held.await(t, "both", 2*time.Minute)
	stopStream()
	wg.Wait()

	r.waited, r.afterB = grantedAt.Sub(queued), grantedAt.Sub(releasedB)
	grantsMu.Lock()
	defer grantsMu.Unlock()
	for _, at := range grants {
		switch {
		case at.Before(queued) || at.After(grantedAt):
		case at.Before(queued.Add(r.lease)):
			r.overtakenInBound++
		default:
			r.overtakenAfter++
		}
	}
	return r
}

// sentence says what the bound run measured.
func (r boundResult) sentence() string {
	return fmt.Sprintf("a claim of locks A and B behind a stream of one-lock claims on A (each held %s) while B is held for %s, leases of %s: "+
		"overtaken %d times within its first lease and %d times after it; granted %s after it was queued, %s after B's release",
		r.streamHold, r.holdB, r.lease, r.overtakenInBound, r.overtakenAfter, fmtMS(r.waited)+" ms", fmtMS(r.afterB)+" ms")
}

// markdown renders the several-locks figures.
func (s severalResult) markdown() string {
	var sb strings.Builder
	sb.WriteString("\n| several locks at once (built-in backend) | p50 / p99 |\n|---|---|\n")
	fmt.Fprintf(&sb, "| grant of a claim of one free lock (n %d) | %s |\n", s.single.N, s.single.cell())
	fmt.Fprintf(&sb, "| grant of a claim of two free locks together (n %d) | %s |\n", s.several.N, s.several.cell())
	fmt.Fprintf(&sb, "\nOvertaking bound: %s.\n", s.bound.sentence())
	return sb.String()
}

// heldTimes is when each claim of a namespace was first seen Held.
type heldTimes struct {
	mu    sync.Mutex
	at    map[string]time.Time
	moved chan struct{} // closed and replaced at every new entry
}

// watchHeldAt records when each claim of ns is first seen Held.
func watchHeldAt(ctx context.Context, c client.WithWatch, ns string) *heldTimes {
	h := &heldTimes{at: map[string]time.Time{}, moved: make(chan struct{})}
	names := watchHeld(ctx, c, ns)
	go func() {
		for name := range names {
			h.mu.Lock()
			h.at[name] = time.Now()
			close(h.moved)
			h.moved = make(chan struct{})
			h.mu.Unlock()
		}
	}()
	return h
}

// wait returns when claim name was first seen Held, waiting for it until ctx ends.
func (h *heldTimes) wait(ctx context.Context, name string) (time.Time, bool) {
	for {
		h.mu.Lock()
		at, ok := h.at[name]
		moved := h.moved
		h.mu.Unlock()
		if ok {
			return at, true
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
}

// await is wait with a timeout that fails the test.
func (h *heldTimes) await(t *testing.T, name string, timeout time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	at, ok := h.wait(ctx, name)
	if !ok {
		t.Fatalf("claim %s not Held within %s", name, timeout)
	}
	return at
}
