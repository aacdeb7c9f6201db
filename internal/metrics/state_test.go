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

package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// lock is a DistributedLock on backend ("" for the default), held since heldFor before now when
// heldFor is not zero.
func lock(namespace, name, backend string, heldFor time.Duration) *locksv1alpha1.DistributedLock {
	l := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	l.Spec.BackendRef.Name = backend
	if heldFor != 0 {
		l.Status.Holders = []locksv1alpha1.LockHolder{{Claim: name + "-holder", Identity: "id",
			AcquireTime: metav1.NewMicroTime(now.Add(-heldFor))}}
	}
	return l
}

// claim is a LockClaim on lockName in phase, created age before now.
func claim(namespace, name, lockName string, phase locksv1alpha1.ClaimPhase, age time.Duration) *locksv1alpha1.LockClaim {
	return &locksv1alpha1.LockClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))},
		Spec:       locksv1alpha1.LockClaimSpec{LockName: lockName},
		Status:     locksv1alpha1.LockClaimStatus{Phase: phase},
	}
}

func TestSummarize(t *testing.T) {
	type ages = map[string]time.Duration
	type phases = map[locksv1alpha1.ClaimPhase]int
	for _, tc := range []struct {
		name          string
		claims        []*locksv1alpha1.LockClaim
		locks         []*locksv1alpha1.DistributedLock
		phases        phases
		oldestPending ages
		oldestHeld    ages
	}{{
		name:          "nothing cached: no ages, no counts",
		phases:        phases{},
		oldestPending: ages{},
		oldestHeld:    ages{},
	}, {
		name:  "claims counted by phase; a claim without a phase yet is Pending",
		locks: []*locksv1alpha1.DistributedLock{lock("ns", "a", "", 0)},
		claims: []*locksv1alpha1.LockClaim{
			claim("ns", "new", "a", "", time.Second),
			claim("ns", "p", "a", locksv1alpha1.ClaimPending, time.Second),
			claim("ns", "h", "a", locksv1alpha1.ClaimHeld, time.Hour),
			claim("ns", "r", "a", locksv1alpha1.ClaimReleased, time.Hour),
			claim("ns", "l", "a", locksv1alpha1.ClaimLost, time.Hour),
			claim("ns", "t", "a", locksv1alpha1.ClaimTimedOut, time.Hour),
			claim("ns", "f", "a", locksv1alpha1.ClaimFailed, time.Hour),
		},
		phases: phases{locksv1alpha1.ClaimPending: 2, locksv1alpha1.ClaimHeld: 1, locksv1alpha1.ClaimReleased: 1,
			locksv1alpha1.ClaimLost: 1, locksv1alpha1.ClaimTimedOut: 1, locksv1alpha1.ClaimFailed: 1},
		oldestPending: ages{"kubernetes": time.Second},
		oldestHeld:    ages{},
	}, {
		name: "the oldest Pending claim of each backend, whatever lock it waits on; only Pending claims wait",
		locks: []*locksv1alpha1.DistributedLock{
			lock("ns", "a", "redis", 0), lock("ns", "b", "redis", 0), lock("ns", "c", "", 0), lock("other", "d", "etcd", 0),
		},
		claims: []*locksv1alpha1.LockClaim{
			claim("ns", "a1", "a", locksv1alpha1.ClaimPending, 10*time.Second),
			claim("ns", "b1", "b", locksv1alpha1.ClaimPending, 5*time.Minute),
			claim("ns", "b2", "b", locksv1alpha1.ClaimPending, time.Minute),
			claim("ns", "c1", "c", "", 30*time.Second),
			claim("ns", "c2", "c", locksv1alpha1.ClaimHeld, 24*time.Hour),
			claim("ns", "c3", "c", locksv1alpha1.ClaimTimedOut, 24*time.Hour),
			claim("other", "d1", "d", locksv1alpha1.ClaimPending, 2*time.Hour),
		},
		phases:        phases{locksv1alpha1.ClaimPending: 5, locksv1alpha1.ClaimHeld: 1, locksv1alpha1.ClaimTimedOut: 1},
		oldestPending: ages{"redis": 5 * time.Minute, "kubernetes": 30 * time.Second, "etcd": 2 * time.Hour},
		oldestHeld:    ages{},
	}, {
		name:  "a claim's lock is the one of that name in the claim's own namespace",
		locks: []*locksv1alpha1.DistributedLock{lock("team-a", "db", "redis", 0), lock("team-b", "db", "etcd", 0)},
		claims: []*locksv1alpha1.LockClaim{
			claim("team-a", "x", "db", locksv1alpha1.ClaimPending, time.Minute),
			claim("team-b", "y", "db", locksv1alpha1.ClaimPending, time.Hour),
		},
		phases:        phases{locksv1alpha1.ClaimPending: 2},
		oldestPending: ages{"redis": time.Minute, "etcd": time.Hour},
		oldestHeld:    ages{},
	}, {
		name:  "a claim whose lock does not exist has no backend: counted, but in no age",
		locks: []*locksv1alpha1.DistributedLock{lock("ns", "a", "redis", 0)},
		claims: []*locksv1alpha1.LockClaim{
			claim("ns", "typo", "no-such-lock", locksv1alpha1.ClaimPending, 48*time.Hour),
			claim("elsewhere", "x", "a", locksv1alpha1.ClaimPending, 48*time.Hour),
			claim("ns", "ok", "a", locksv1alpha1.ClaimPending, time.Minute),
		},
		phases:        phases{locksv1alpha1.ClaimPending: 3},
		oldestPending: ages{"redis": time.Minute},
		oldestHeld:    ages{},
	}, {
		name: "the longest current hold of each backend, from the grant in the lock's status",
		locks: []*locksv1alpha1.DistributedLock{
			lock("ns", "a", "redis", time.Hour), lock("ns", "b", "redis", 2*time.Hour), lock("ns", "c", "redis", 0),
			lock("ns", "d", "", 90*time.Second), lock("ns", "e", "etcd", 0),
		},
		claims: []*locksv1alpha1.LockClaim{
			// Joined b's hold with the holder's identity a minute ago: the hold began two hours ago.
			claim("ns", "b-heir", "b", locksv1alpha1.ClaimHeld, time.Minute),
		},
		phases:        phases{locksv1alpha1.ClaimHeld: 1},
		oldestPending: ages{},
		oldestHeld:    ages{"redis": 2 * time.Hour, "kubernetes": 90 * time.Second},
	}, {
		name:  "a creation or grant ahead of now (clocks apart) is no age, not a negative one",
		locks: []*locksv1alpha1.DistributedLock{lock("ns", "a", "redis", -time.Second), lock("ns", "b", "etcd", 0)},
		claims: []*locksv1alpha1.LockClaim{
			claim("ns", "x", "b", locksv1alpha1.ClaimPending, -2*time.Second),
		},
		phases:        phases{locksv1alpha1.ClaimPending: 1},
		oldestPending: ages{"etcd": 0},
		oldestHeld:    ages{"redis": 0},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.claims, tc.locks, now)
			g := NewWithT(t)
			g.Expect(got.Phases).To(Equal(tc.phases))
			g.Expect(got.OldestPending).To(Equal(tc.oldestPending))
			g.Expect(got.OldestHeld).To(Equal(tc.oldestHeld))
		})
	}
}

// fakeCache serves informers whose stores hold its objects themselves, as the informer cache's
// do, and fails GetInformer with err when set. The stores are built at the first GetInformer.
type fakeCache struct {
	claims []*locksv1alpha1.LockClaim
	locks  []*locksv1alpha1.DistributedLock
	err    error

	claimStore, lockStore toolscache.Store
}

// fakeInformer is an informer of which the collector uses only the store.
type fakeInformer struct {
	crcache.Informer
	store toolscache.Store
}

func (f fakeInformer) GetStore() toolscache.Store { return f.store }

func (f *fakeCache) GetInformer(_ context.Context, obj client.Object, _ ...crcache.InformerGetOption) (crcache.Informer, error) {
	if f.err != nil {
		return nil, f.err
	}
	switch obj.(type) {
	case *locksv1alpha1.LockClaim:
		if f.claimStore == nil {
			f.claimStore = storeOf(f.claims)
		}
		return fakeInformer{store: f.claimStore}, nil
	case *locksv1alpha1.DistributedLock:
		if f.lockStore == nil {
			f.lockStore = storeOf(f.locks)
		}
		return fakeInformer{store: f.lockStore}, nil
	}
	return nil, fmt.Errorf("fakeCache: no informer of %T", obj)
}

// storeOf is a store holding objs themselves.
func storeOf[T client.Object](objs []T) toolscache.Store {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for _, o := range objs {
		_ = store.Add(o) // a store keyed by namespace/name never fails to add an object
	}
	return store
}

func TestStateCollector(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(now)
	cache := &fakeCache{
		locks: []*locksv1alpha1.DistributedLock{
			lock("ns", "a", "redis", 3*time.Hour), lock("ns", "b", "", 0),
		},
		claims: []*locksv1alpha1.LockClaim{
			claim("ns", "h", "a", locksv1alpha1.ClaimHeld, 3*time.Hour),
			claim("ns", "w1", "a", locksv1alpha1.ClaimPending, 90*time.Second),
			claim("ns", "w2", "b", "", 2500*time.Millisecond),
		},
	}
	m := New(cache, WithClock(clk))
	reg := prometheus.NewPedanticRegistry()
	g.Expect(m.Register(reg)).To(Succeed())

	const header = `
# HELP lockwarden_claim_oldest_pending_seconds Age of the oldest Pending LockClaim, by backend; no series for a backend without Pending claims.
# TYPE lockwarden_claim_oldest_pending_seconds gauge
`
	const held = `
# HELP lockwarden_lock_oldest_held_seconds Time since the grant of the longest current hold, by backend; no series for a backend on which no lock is held.
# TYPE lockwarden_lock_oldest_held_seconds gauge
`
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(header+`
lockwarden_claim_oldest_pending_seconds{backend="kubernetes"} 2.5
lockwarden_claim_oldest_pending_seconds{backend="redis"} 90
`+held+`
lockwarden_lock_oldest_held_seconds{backend="redis"} 10800
`+`
# HELP lockwarden_claims LockClaims by phase.
# TYPE lockwarden_claims gauge
lockwarden_claims{phase="Failed"} 0
lockwarden_claims{phase="Held"} 1
lockwarden_claims{phase="Lost"} 0
lockwarden_claims{phase="Pending"} 2
lockwarden_claims{phase="Released"} 0
lockwarden_claims{phase="TimedOut"} 0
`), "lockwarden_claims", "lockwarden_claim_oldest_pending_seconds", "lockwarden_lock_oldest_held_seconds")).To(Succeed())

	// The ages are read at scrape time: a minute on, with the Pending claim on the built-in backend
	// granted, that backend's wait series is gone and the rest are a minute older. (That a scrape
	// reads the cache's own objects, not copies, is TestCachedSharesTheStoresObjects.)
	clk.SetTime(now.Add(time.Minute))
	cache.claims[2].Status.Phase = locksv1alpha1.ClaimHeld
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(header+`
lockwarden_claim_oldest_pending_seconds{backend="redis"} 150
`+held+`
lockwarden_lock_oldest_held_seconds{backend="redis"} 10860
`), "lockwarden_claim_oldest_pending_seconds", "lockwarden_lock_oldest_held_seconds")).To(Succeed())

	// A cache whose informer cannot be had (not synced within the scrape's 5 s) fails the scrape of the three families, not with zeros.
	cache.err = errors.New("cache not synced")
	_, err := reg.Gather()
	g.Expect(err).To(MatchError(ContainSubstring("cache not synced")))
}

func TestCachedSharesTheStoresObjects(t *testing.T) {
	g := NewWithT(t)
	cache := &fakeCache{claims: []*locksv1alpha1.LockClaim{
		claim("ns", "a", "l", locksv1alpha1.ClaimHeld, time.Second),
		claim("ns", "b", "l", locksv1alpha1.ClaimPending, time.Second),
	}}
	got, err := cached(context.Background(), cache, &locksv1alpha1.LockClaim{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(ConsistOf(BeIdenticalTo(cache.claims[0]), BeIdenticalTo(cache.claims[1])),
		"a scrape reads the cache's own objects, no copies")

	_, err = cached(context.Background(), noStore{}, &locksv1alpha1.LockClaim{})
	g.Expect(err).To(MatchError(ContainSubstring("has no store to read")))
}

// noStore serves an informer without a store.
type noStore struct{}

func (noStore) GetInformer(context.Context, client.Object, ...crcache.InformerGetOption) (crcache.Informer, error) {
	return struct{ crcache.Informer }{}, nil
}

// BenchmarkScrapeState measures what one scrape of the scrape-time gauges costs with 100,000
// cached claims on 1,000 locks: reading the informers' objects ("store", what Collect does), and,
// for comparison, what it cost when Collect listed the cache ("list-copy": the cache's List copies
// each object into the list's Items with meta.SetList, UnsafeDisableDeepCopy or not).
// go test ./internal/metrics -run '^$' -bench ScrapeState -benchmem
func BenchmarkScrapeState(b *testing.B) {
	const locks, claims = 1000, 100_000
	cache := &fakeCache{}
	for i := range locks {
		cache.locks = append(cache.locks, lock("ns", fmt.Sprintf("lock-%05d", i), "", time.Minute))
	}
	for i := range claims {
		phase := locksv1alpha1.ClaimPending
		if i < locks {
			phase = locksv1alpha1.ClaimHeld
		}
		c := claim("ns", fmt.Sprintf("claim-%06d", i), fmt.Sprintf("lock-%05d", i%locks), phase, time.Duration(i)*time.Millisecond)
		c.Spec.Holder = &locksv1alpha1.ClaimHolder{Identity: fmt.Sprintf("id-%06d", i)}
		cache.claims = append(cache.claims, c)
	}
	// The first GetInformer builds the stores, outside the measured loops.
	if _, err := cache.GetInformer(context.Background(), &locksv1alpha1.LockClaim{}); err != nil {
		b.Fatal(err)
	}
	if _, err := cache.GetInformer(context.Background(), &locksv1alpha1.DistributedLock{}); err != nil {
		b.Fatal(err)
	}
	claimStore, lockStore := cache.claimStore, cache.lockStore

	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			cs, err := cached(context.Background(), cache, &locksv1alpha1.LockClaim{})
			if err != nil {
				b.Fatal(err)
			}
			ls, err := cached(context.Background(), cache, &locksv1alpha1.DistributedLock{})
			if err != nil {
				b.Fatal(err)
			}
			if st := Summarize(cs, ls, now); st.Phases[locksv1alpha1.ClaimHeld] != locks {
				b.Fatalf("held %d", st.Phases[locksv1alpha1.ClaimHeld])
			}
		}
	})
	b.Run("list-copy", func(b *testing.B) {
		for b.Loop() {
			cl := &locksv1alpha1.LockClaimList{}
			if err := meta.SetList(cl, runtimeObjects(claimStore.List())); err != nil {
				b.Fatal(err)
			}
			ll := &locksv1alpha1.DistributedLockList{}
			if err := meta.SetList(ll, runtimeObjects(lockStore.List())); err != nil {
				b.Fatal(err)
			}
			cs := make([]*locksv1alpha1.LockClaim, len(cl.Items))
			for i := range cl.Items {
				cs[i] = &cl.Items[i]
			}
			ls := make([]*locksv1alpha1.DistributedLock, len(ll.Items))
			for i := range ll.Items {
				ls[i] = &ll.Items[i]
			}
			if st := Summarize(cs, ls, now); st.Phases[locksv1alpha1.ClaimHeld] != locks {
				b.Fatalf("held %d", st.Phases[locksv1alpha1.ClaimHeld])
			}
		}
	})
}

// runtimeObjects turns a store's items into what meta.SetList takes, as the cache's List does.
func runtimeObjects(items []any) []runtime.Object {
	out := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		out = append(out, item.(runtime.Object))
	}
	return out
}
