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
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// sharedResult is the throughput of one shared lock.
type sharedResult struct {
	label   string
	grants  int
	elapsed time.Duration
	wait    quantiles
}

func (s sharedResult) perSec() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.grants) / s.elapsed.Seconds()
}

// sharedLock measures one lock of places places on the built-in backend, with claims claims
// queued at once (every exclusiveEvery-th of them Exclusive; 0: none): every holder is deleted the
// moment it is seen Held, by a pool of clients that does not wait for the grants it frees (an
// open loop), until every claim was granted. It reports grants per second from the first grant to
// the last, and each claim's wait from its creation to its grant.
func (b *bench) sharedLock(t *testing.T, ctx context.Context, label string, places int32, claims, exclusiveEvery int) sharedResult {
	ns := fmt.Sprintf("bench-shared-%d-%d", places, exclusiveEvery)
	must(t, b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() {
		_ = b.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	held := watchHeld(ctx, b.c, ns)
	must(t, b.c.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: locksv1alpha1.DistributedLockSpec{MaxHolders: places}}))
	must(t, waitLockReady(ctx, b.c, ns, "shared"))

	deletes := make(chan string, claims)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for name := range deletes {
				_ = b.c.Delete(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
			}
		})
	}
	created := make(map[string]time.Time, claims)
	for i := range claims {
		name := fmt.Sprintf("claim-%04d", i)
		mode := locksv1alpha1.LockModeShared
		if exclusiveEvery > 0 && i%exclusiveEvery == exclusiveEvery-1 {
			mode = locksv1alpha1.LockModeExclusive
		}
		created[name] = time.Now()
		// As lockctl does: no finalizer.
		must(t, b.c.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: locksv1alpha1.LockClaimSpec{LockName: "shared", Mode: mode}}))
	}
	var waits []time.Duration
	var first, last time.Time
	for got := 0; got < claims; got++ {
		select {
		case name := <-held:
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			last = now
			waits = append(waits, now.Sub(created[name]))
			deletes <- name
		case <-time.After(60 * time.Second):
			close(deletes)
			t.Fatalf("%s: only %d of %d claims granted, none within the last minute", label, got, claims)
		}
	}
	close(deletes)
	wg.Wait()
	res := sharedResult{label: label, grants: claims, elapsed: last.Sub(first)}
	res.wait = report(label+": wait (claim created → Acquired)", waits)
	fmt.Printf("  %-58s %.0f grants/s (%d claims in %s)\n", label, res.perSec(), claims, res.elapsed.Round(time.Millisecond))
	return res
}
