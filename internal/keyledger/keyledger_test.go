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
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
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

var (
	a = Owner{Namespace: "team-a", Name: "db", UID: "uid-a"}
	b = Owner{Namespace: "team-a", Name: "db-copy", UID: "uid-b"}
)

func TestTheFirstLockKeepsTheKey(t *testing.T) {
	ctx := context.Background()
	ledger, _, _ := newLedger(t, a.UID, b.UID)
	owner, taken, err := ledger.Take(ctx, "redis", "k", a)
	if err != nil || owner != a || !taken {
		t.Fatalf("first Take = %v, %v, %v; want a, taken", owner, taken, err)
	}
	owner, taken, err = ledger.Take(ctx, "redis", "k", b)
	if err != nil || owner.UID != a.UID || taken {
		t.Fatalf("second lock's Take = %v, %v, %v; want a as owner", owner, taken, err)
	}
	if owner, taken, _ := ledger.Take(ctx, "redis", "k", a); owner != a || taken {
		t.Fatalf("owner's Take again = %v, %v; want a, not taken anew", owner, taken)
	}
	// Another backend's key of the same name is another key.
	if owner, _, _ := ledger.Take(ctx, "etcd", "k", b); owner != b {
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
		wg.Go(func() { owners[0], _, _ = first.Take(ctx, "redis", key, a) })
		wg.Go(func() { owners[1], _, _ = second.Take(ctx, "redis", key, b) })
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
	if _, _, err := ledger.Take(ctx, "redis", "k", a); err != nil {
		t.Fatal(err)
	}
	if owner, _, _ := ledger.Take(ctx, "redis", "k", b); owner != a {
		t.Fatalf("owner %v, want a", owner)
	}
	// A lock that does not own the key cannot let it go.
	if err := ledger.Release(ctx, "redis", "k", b); err != nil {
		t.Fatal(err)
	}
	if owner, _, _ := ledger.Take(ctx, "redis", "k", b); owner != a {
		t.Fatalf("after a non-owner's release: owner %v, want a", owner)
	}
	l.kill(a.UID)
	if err := ledger.Release(ctx, "redis", "k", a); err != nil {
		t.Fatal(err)
	}
	if len(woken) == 0 || woken[len(woken)-1] != (types.NamespacedName{Namespace: b.Namespace, Name: b.Name}) {
		t.Fatalf("woken = %v, want b", woken)
	}
	owner, taken, err := ledger.Take(ctx, "redis", "k", b)
	if err != nil || owner != b || !taken {
		t.Fatalf("after a's release: %v, %v, %v; want b, taken", owner, taken, err)
	}
}

// An owner deleted without letting its key go (its finalizer removed by hand) does not keep it.
func TestAGoneOwnerIsTakenOver(t *testing.T) {
	ctx := context.Background()
	ledger, c, l := newLedger(t, a.UID, b.UID)
	if _, _, err := ledger.Take(ctx, "redis", "k", a); err != nil {
		t.Fatal(err)
	}
	l.kill(a.UID)
	// A fresh ledger, as after a restart: nothing remembered.
	fresh := New(c, c, "lockwarden-system", l.alive)
	owner, taken, err := fresh.Take(ctx, "redis", "k", b)
	if err != nil || owner != b || !taken {
		t.Fatalf("Take over a gone owner = %v, %v, %v; want b, taken", owner, taken, err)
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "lockwarden-system", Name: LeaseName("redis", "k")}, lease); err != nil {
		t.Fatal(err)
	}
	if got := ownerOf(lease); got != b {
		t.Fatalf("the Lease names %v, want b", got)
	}
}
