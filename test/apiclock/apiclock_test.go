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

// Package apiclock checks that fencing tokens do not follow the API server's clock. It runs a
// control plane of its own, with the clocked test build of kube-apiserver (hack/k8s-binaries.sh
// clocked-apiserver, hack/apiserver-clock), whose object timestamps the test steps by an hour
// forward and then two hours back, and the manager in-process.
package apiclock

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
)

const (
	systemNS = "lockwarden-system"
	ns       = "apiclock"
)

// step sets the clocked API server's offset and waits until objects it creates carry it.
func step(t *testing.T, c client.Client, file string, offset time.Duration) {
	t.Helper()
	if err := os.WriteFile(file, []byte(offset.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := func() time.Duration {
		claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "clock-probe-"},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "clock-probe"}}
		before := time.Now()
		if err := c.Create(context.Background(), claim); err != nil {
			t.Fatal(err)
		}
		_ = c.Delete(context.Background(), claim)
		return claim.CreationTimestamp.Sub(before.Truncate(time.Second))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := probe()
		if got >= offset-2*time.Second && got <= offset+2*time.Second {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server's clock is off by %s, not the %s the test set: is %s the clocked build?", got, offset, os.Getenv("LOCKWARDEN_CLOCKED_APISERVER"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// grant creates lock (deleting any lock of that name first, its finalizer taken off by hand so
// that nothing waits) and a claim of it, and returns the claim's token and the lock's
// creationTimestamp.
func grant(t *testing.T, c client.Client, lock, claim string) (int64, time.Time) {
	t.Helper()
	ctx := context.Background()
	l := &locksv1alpha1.DistributedLock{}
	for {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: lock}, l)
		if apierrors.IsNotFound(err) {
			break
		}
		if err == nil {
			_ = c.Delete(ctx, l)
			l.Finalizers = nil
			_ = c.Update(ctx, l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	l = &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lock}}
	if err := c.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	cl := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim},
		Spec: locksv1alpha1.LockClaimSpec{LockName: lock}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for cl.Status.Phase != locksv1alpha1.ClaimHeld {
		if time.Now().After(deadline) {
			t.Fatalf("claim %s not Held within 30 s: phase %q", claim, cl.Status.Phase)
		}
		time.Sleep(20 * time.Millisecond)
		if err := c.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
			t.Fatal(err)
		}
	}
	// Release it, so that the next grant is on a lock that nothing holds.
	if err := c.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for !apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cl), &locksv1alpha1.LockClaim{})) {
		if time.Now().After(deadline) {
			t.Fatalf("claim %s not gone within 30 s of its deletion", claim)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cl.Status.FencingToken, l.CreationTimestamp.Time
}

func TestTokensDoNotFollowTheAPIServersClock(t *testing.T) {
	apiserver := os.Getenv("LOCKWARDEN_CLOCKED_APISERVER")
	if apiserver == "" {
		t.Fatal("LOCKWARDEN_CLOCKED_APISERVER is not set: run through make test-unit, which builds the clocked kube-apiserver (hack/k8s-binaries.sh clocked-apiserver)")
	}
	offsetFile := filepath.Join(t.TempDir(), "apiserver-clock-offset")
	if err := os.WriteFile(offsetFile, []byte("0s"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOCKWARDEN_APISERVER_CLOCK_OFFSET_FILE", offsetFile)
	cp, err := lockenv.StartControlPlaneWith(filepath.Join("..", ".."), lockenv.ControlPlaneOptions{APIServer: apiserver}, systemNS, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	mgr, err := lockenv.StartManager(cp.Config, lockenv.ManagerOptions{Namespace: systemNS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Stop() })
	c := cp.Client

	step(t, c, offsetFile, 0)
	first, created := grant(t, c, "db", "a")
	t.Logf("API server clock right: token %d, lock created %s", first, created.Format(time.RFC3339))

	step(t, c, offsetFile, time.Hour)
	ahead, aheadCreated := grant(t, c, "db", "b")
	t.Logf("API server clock an hour fast, lock re-created: token %d, lock created %s", ahead, aheadCreated.Format(time.RFC3339))
	if ahead <= first {
		t.Errorf("token %d after the API server's clock went an hour forward is not above %d", ahead, first)
	}

	step(t, c, offsetFile, -time.Hour)
	behind, behindCreated := grant(t, c, "db", "c")
	t.Logf("API server clock stepped two hours back, lock re-created: token %d, lock created %s", behind, behindCreated.Format(time.RFC3339))
	// The step reached what a clock-seeded token would read: the re-created lock is older, by
	// the API server's account, than the one it replaced.
	if !behindCreated.Before(aheadCreated.Add(-time.Hour)) {
		t.Fatalf("the re-created lock's creationTimestamp %s is not hours before its predecessor's %s: the clock step did not take", behindCreated, aheadCreated)
	}
	if behind <= ahead {
		t.Errorf("token %d after the API server's clock stepped two hours back is not above %d", behind, ahead)
	}
}
