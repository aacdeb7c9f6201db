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

package keyledger

import (
	"context"
	"slices"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// locks is the set of live locks the ledger's Alive asks about.
type locks struct {
	mu   sync.Mutex
	live map[types.UID]bool
}

func (l *locks) alive(_ context.Context, o Owner) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live[o.UID], nil
}

func (l *locks) kill(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.live, uid)
}

func newLedger(t *testing.T, live ...types.UID) (*Ledger, client.Client, *locks) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	l := &locks{live: map[types.UID]bool{}}
	for _, uid := range live {
		l.live[uid] = true
	}
	return New(c, c, "lockwarden-system", l.alive), c, l
}

// at is key on the LockBackend called backend, alone on its store.
func at(backend, key string) Key {
	return Key{Store: "store-of-" + backend, Backend: backend, Name: key}
}

var (
	a = Owner{Namespace: "team-a", Name: "db", UID: "uid-a"}
	b = Owner{Namespace: "team-a", Name: "db-copy", UID: "uid-b"}
)

func TestTheFirstLockKeepsTheKey(t *testing.T) {
	ctx := context.Background()
	ledger, _, _ := newLedger(t, a.UID, b.UID)
	owner, taken, err := ledger.Take(ctx, at("redis", "k"), a)
	if err != nil || owner != a || !taken {
		t.Fatalf("first Take = %v, %v, %v; want a, taken", owner, taken, err)
	}
	owner, taken, err = ledger.Take(ctx, at("redis", "k"), b)
	if err != nil || owner.UID != a.UID || taken {
		t.Fatalf("second lock's Take = %v, %v, %v; want a as owner", owner, taken, err)
	}
	if owner, taken, _ := ledger.Take(ctx, at("redis", "k"), a); owner != a || taken {
		t.Fatalf("owner's Take again = %v, %v; want a, not taken anew", owner, taken)
	}
	// Another backend's key of the same name is another key.
	if owner, _, _ := ledger.Take(ctx, at("etcd", "k"), b); owner != b {
		t.Fatalf("same key on another backend: owner %v, want b", owner)
	}
}

// Two ledgers (two replicas, or a stale memory) racing for one key: exactly one wins, and the
// other sees the winner.
func TestRacingLocksGetOneOwner(t *testing.T) {
	ctx := context.Background()
	first, c, l := newLedger(t, a.UID, b.UID)
	second := New(c, c, "lockwarden-system", l.alive)
	for i := range 20 {
		key := "k" + string(rune('a'+i))
		var wg sync.WaitGroup
		owners := make([]Owner, 2)
		wg.Go(func() { owners[0], _, _ = first.Take(ctx, at("redis", key), a) })
		wg.Go(func() { owners[1], _, _ = second.Take(ctx, at("redis", key), b) })
		wg.Wait()
		if owners[0] != owners[1] || (owners[0] != a && owners[0] != b) {
			t.Fatalf("key %s: the two locks saw owners %v and %v", key, owners[0], owners[1])
		}
	}
}

func TestReleaseWakesTheWaiterAndHandsOver(t *testing.T) {
	ctx := context.Background()
	ledger, _, l := newLedger(t, a.UID, b.UID)
	var woken []types.NamespacedName
	ledger.OnRelease(func(n types.NamespacedName) { woken = append(woken, n) })
	if _, _, err := ledger.Take(ctx, at("redis", "k"), a); err != nil {
		t.Fatal(err)
	}
	if owner, _, _ := ledger.Take(ctx, at("redis", "k"), b); owner != a {
		t.Fatalf("owner %v, want a", owner)
	}
	// A lock that does not own the key cannot let it go.
	if err := ledger.Release(ctx, at("redis", "k"), b); err != nil {
		t.Fatal(err)
	}
	if owner, _, _ := ledger.Take(ctx, at("redis", "k"), b); owner != a {
		t.Fatalf("after a non-owner's release: owner %v, want a", owner)
	}
	l.kill(a.UID)
	if err := ledger.Release(ctx, at("redis", "k"), a); err != nil {
		t.Fatal(err)
	}
	if len(woken) == 0 || woken[len(woken)-1] != (types.NamespacedName{Namespace: b.Namespace, Name: b.Name}) {
		t.Fatalf("woken = %v, want b", woken)
	}
	owner, taken, err := ledger.Take(ctx, at("redis", "k"), b)
	if err != nil || owner != b || !taken {
		t.Fatalf("after a's release: %v, %v, %v; want b, taken", owner, taken, err)
	}
}

// An owner deleted without letting its key go (its finalizer removed by hand) does not keep it.
func TestAGoneOwnerIsTakenOver(t *testing.T) {
	ctx := context.Background()
	ledger, c, l := newLedger(t, a.UID, b.UID)
	if _, _, err := ledger.Take(ctx, at("redis", "k"), a); err != nil {
		t.Fatal(err)
	}
	l.kill(a.UID)
	// A fresh ledger, as after a restart: nothing remembered.
	fresh := New(c, c, "lockwarden-system", l.alive)
	owner, taken, err := fresh.Take(ctx, at("redis", "k"), b)
	if err != nil || owner != b || !taken {
		t.Fatalf("Take over a gone owner = %v, %v, %v; want b, taken", owner, taken, err)
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "lockwarden-system", Name: LeaseName(at("redis", "k").Store, "k")}, lease); err != nil {
		t.Fatal(err)
	}
	if got := ownerOf(lease); got != b {
		t.Fatalf("the Lease names %v, want b", got)
	}
}

// storeOfTwo is a store that two LockBackends, redis-a and redis-b, reach (one Redis server
// and db).
const storeOfTwo = "redis/redis.infra.svc:6379/0"

// TestTwoBackendsOfOneStoreShareTheKey: one key in one store has one owner, whichever
// LockBackend each lock reaches it through (docs/design.md §2). Keyed by LockBackend name, the ledger gave
// the second lock the key too (issue 37, bug 4).
func TestTwoBackendsOfOneStoreShareTheKey(t *testing.T) {
	ctx := context.Background()
	ledger, _, l := newLedger(t, a.UID, b.UID)
	viaA := Key{Store: storeOfTwo, Backend: "redis-a", Name: "k"}
	viaB := Key{Store: storeOfTwo, Backend: "redis-b", Name: "k"}
	if owner, taken, err := ledger.Take(ctx, viaA, a); err != nil || owner != a || !taken {
		t.Fatalf("first Take = %v, %v, %v; want a, taken", owner, taken, err)
	}
	if owner, taken, err := ledger.Take(ctx, viaB, b); err != nil || owner != a || taken {
		t.Fatalf("Take through the other LockBackend = %v, %v, %v; want a as owner", owner, taken, err)
	}
	l.kill(a.UID)
	if err := ledger.Release(ctx, viaA, a); err != nil {
		t.Fatal(err)
	}
	if owner, taken, err := ledger.Take(ctx, viaB, b); err != nil || owner != b || !taken {
		t.Fatalf("after a's release: %v, %v, %v; want b, taken", owner, taken, err)
	}
}

// legacyLease is the Lease an earlier version wrote for key on backend, owned by lock: named
// after the LockBackend, without the store or the owner label.
func legacyLease(t *testing.T, c client.Client, backend, key string, lock Owner) {
	t.Helper()
	uid := string(lock.UID)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "lockwarden-system",
		Name: legacyLeaseName(backend, key), Labels: map[string]string{LedgerLabel: "true"},
		Annotations: map[string]string{BackendAnnotation: backend, KeyAnnotation: key, LockAnnotation: lock.String()}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &uid}}
	if err := c.Create(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
}

// ledgerLeases are the names of the ledger's Leases now.
func ledgerLeases(t *testing.T, c client.Client) []string {
	t.Helper()
	list := &coordinationv1.LeaseList{}
	if err := c.List(context.Background(), list, client.MatchingLabels{LedgerLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	return names
}

// TestUpgradeKeepsTheOwner: a key owned in a Lease named by an earlier version stays its owner's
// after the upgrade, even when another lock's pass runs first; the owner's own pass moves the
// ownership to the store's Lease without taking the key anew (its tokens go on), and deletes the
// legacy Lease.
func TestUpgradeKeepsTheOwner(t *testing.T) {
	ctx := context.Background()
	ledger, c, _ := newLedger(t, a.UID, b.UID)
	legacyLease(t, c, "redis-a", "k", a)
	viaA := Key{Store: storeOfTwo, Backend: "redis-a", Name: "k"}

	if owner, taken, err := ledger.Take(ctx, viaA, b); err != nil || owner != a || taken {
		t.Fatalf("another lock's Take first = %v, %v, %v; want a, the legacy owner", owner, taken, err)
	}
	if owner, taken, err := ledger.Take(ctx, viaA, a); err != nil || owner != a || taken {
		t.Fatalf("the owner's Take = %v, %v, %v; want a, not taken anew", owner, taken, err)
	}
	if got, want := ledgerLeases(t, c), []string{LeaseName(storeOfTwo, "k")}; !slices.Equal(got, want) {
		t.Fatalf("ledger Leases %v, want only the store's %v", got, want)
	}
	fresh := New(c, c, "lockwarden-system", ledger.alive)
	if owner, _, err := fresh.Take(ctx, Key{Store: storeOfTwo, Backend: "redis-b", Name: "k"}, b); err != nil || owner != a {
		t.Fatalf("Take through another LockBackend after the move = %v, %v; want a", owner, err)
	}
}

// TestUpgradeTakesAGoneOwnersKey: a legacy Lease whose owner no longer exists does not keep the
// key; the lock that takes it continues above the old owner's tokens (taken).
func TestUpgradeTakesAGoneOwnersKey(t *testing.T) {
	ctx := context.Background()
	ledger, c, _ := newLedger(t, b.UID)
	legacyLease(t, c, "redis-a", "k", a)
	owner, taken, err := ledger.Take(ctx, Key{Store: storeOfTwo, Backend: "redis-a", Name: "k"}, b)
	if err != nil || owner != b || !taken {
		t.Fatalf("Take = %v, %v, %v; want b, taken", owner, taken, err)
	}
	if got, want := ledgerLeases(t, c), []string{LeaseName(storeOfTwo, "k")}; !slices.Equal(got, want) {
		t.Fatalf("ledger Leases %v, want only the store's %v", got, want)
	}
}

// TestReleaseDeletesEveryLeaseTheLockOwns: the lock's end deletes its legacy Lease and the Lease of
// a store its LockBackend pointed at before an edit, and leaves other locks' Leases.
func TestReleaseDeletesEveryLeaseTheLockOwns(t *testing.T) {
	ctx := context.Background()
	ledger, c, _ := newLedger(t, a.UID, b.UID)
	legacyLease(t, c, "redis-a", "k", a)
	before := Key{Store: "redis/old:6379/0", Backend: "redis-a", Name: "k"}
	after := Key{Store: storeOfTwo, Backend: "redis-a", Name: "k"}
	if _, _, err := ledger.Take(ctx, Key{Store: storeOfTwo, Backend: "redis-b", Name: "other"}, b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ledger.Take(ctx, before, a); err != nil {
		t.Fatal(err)
	}
	if owner, _, err := ledger.Take(ctx, after, a); err != nil || owner != a {
		t.Fatalf("Take after the edit = %v, %v; want a", owner, err)
	}
	legacyLease(t, c, "redis-a", "k", a) // left by a Take whose delete failed
	if err := ledger.Release(ctx, after, a); err != nil {
		t.Fatal(err)
	}
	if got, want := ledgerLeases(t, c), []string{LeaseName(storeOfTwo, "other")}; !slices.Equal(got, want) {
		t.Fatalf("ledger Leases after a's release %v, want only b's %v", got, want)
	}
}
