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

package kubernetes_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/backendtest"
	k8sbackend "github.com/lockwarden/lockwarden/internal/backends/kubernetes"
)

// These tests run against a real kube-apiserver and etcd (envtest), started once for the package.
var (
	testEnv    *envtest.Environment
	restConfig *rest.Config
	scheme     = runtime.NewScheme()
)

// holdTTL is the TTL of holds that must outlast a test.
const holdTTL = time.Minute

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Without KUBEBUILDER_ASSETS envtest would look in a default directory; fail with the fix
	// instead, and never skip.
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "FAIL: KUBEBUILDER_ASSETS is not set, so there is no kube-apiserver to test against.\n"+
			"Run: export KUBEBUILDER_ASSETS=$(hack/k8s-binaries.sh envtest-dir)   (or use make test-unit)")
		return 1
	}
	logf.SetLogger(logr.Discard())
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: building the scheme:", err)
		return 1
	}
	testEnv = &envtest.Environment{}
	cfg, err := testEnv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: starting envtest (kube-apiserver and etcd from KUBEBUILDER_ASSETS):", err)
		return 1
	}
	restConfig = cfg
	code := m.Run()
	if err := testEnv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	return code
}

// newClient returns a client that reads from the API server, as the backend requires.
func newClient(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lockwarden-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatalf("namespace: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

func newBackend(t *testing.T, c client.Client, ns, session string, opts ...k8sbackend.Option) *k8sbackend.Backend {
	t.Helper()
	b, err := k8sbackend.New(k8sbackend.Config{Client: c, Namespace: ns, SessionName: session}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// getLease reads a Lease straight from the API server; nil when absent.
func getLease(t *testing.T, c client.Client, ns, name string) *coordinationv1.Lease {
	t.Helper()
	lease := &coordinationv1.Lease{}
	err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, lease)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get Lease %s/%s: %v", ns, name, err)
	}
	return lease
}

func TestConformance(t *testing.T) {
	c := newClient(t)
	ns := newNamespace(t, c)
	var sessions atomic.Int64
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, c, ns, fmt.Sprintf("session-%d", sessions.Add(1)))
		},
		// Real time: expiry and lost detection run against the API server's stored state.
		TTL:        2 * time.Second,
		RoundTrips: func(b backends.Backend) int64 { return b.(*k8sbackend.Backend).RoundTrips() },
	})
}

func TestRenewCostIsConstant(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := newClient(t)
	ns := newNamespace(t, c)
	b := newBackend(t, c, ns, "session")

	leases := make([]backends.Lease, 100)
	for i := range leases {
		l, err := b.TryAcquire(ctx, fmt.Sprintf("app/lock-%03d", i), fmt.Sprintf("holder-%03d", i), holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		leases[i] = l
	}
	cost := func(batch []backends.Lease) int64 {
		before := b.RoundTrips()
		renewed, lost, err := b.Renew(ctx, batch, holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(BeEmpty())
		g.Expect(renewed).To(HaveLen(len(batch)))
		return b.RoundTrips() - before
	}
	g.Expect(cost(leases[:1])).To(BeEquivalentTo(2), "one LIST and one session write")
	g.Expect(cost(leases)).To(BeEquivalentTo(2), "still one LIST and one session write for 100 leases")
	g.Expect(cost(leases)).To(BeEquivalentTo(2))

	// The renewals wrote no lock Lease.
	for _, l := range []backends.Lease{leases[0], leases[99]} {
		g.Expect(l.Version).To(HavePrefix(getLease(t, c, ns, k8sbackend.LeaseName(l.Key)).ResourceVersion + "/"))
	}
}

// A writer that acts on a stale read (a deposed leader, a lagging cache) cannot take a lock over:
// its UPDATE carries the old resourceVersion and the API server refuses it.
func TestDeposedWriterCannotTakeOver(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := newClient(t)
	ns := newNamespace(t, c)
	clock := clocktesting.NewFakeClock(time.Now())
	key := "app/deposed"
	name := k8sbackend.LeaseName(key)

	_, err := newBackend(t, c, ns, "first", k8sbackend.WithClock(clock)).TryAcquire(ctx, key, "first", 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	stale := getLease(t, c, ns, name)

	clock.Step(10 * time.Second)
	current, err := newBackend(t, c, ns, "current", k8sbackend.WithClock(clock)).TryAcquire(ctx, key, "current", holdTTL)
	g.Expect(err).NotTo(HaveOccurred(), "the expired lock is taken over")

	// The deposed writer reads the lock as it was (expired, held by "first") once.
	var staleReads, updates atomic.Int64
	var updateErr error
	deposed := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Name == name && staleReads.Add(1) == 1 {
				stale.DeepCopyInto(obj.(*coordinationv1.Lease))
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates.Add(1)
			updateErr = c.Update(ctx, obj, opts...)
			return updateErr
		},
	})
	_, err = newBackend(t, deposed, ns, "deposed", k8sbackend.WithClock(clock)).TryAcquire(ctx, key, "deposed", holdTTL)

	g.Expect(updates.Load()).To(BeEquivalentTo(1), "the deposed writer tried its compare-and-swap")
	g.Expect(apierrors.IsConflict(updateErr)).To(BeTrue(), "the API server refused the stale resourceVersion: %v", updateErr)
	g.Expect(err).To(MatchError(backends.ErrLocked))
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue())
	g.Expect(locked.Holder).To(Equal("current"), "after the conflict it reads the lock again and names the real holder")

	now := getLease(t, c, ns, name)
	g.Expect(ptr.Deref(now.Spec.HolderIdentity, "")).To(Equal("current"))
	g.Expect(current.Version).To(HavePrefix(now.ResourceVersion+"/"), "the new holder's Lease is untouched")
}

// The Lease objects are what the package documents, so that kubectl users and other tools can
// read them.
func TestLeaseObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := newClient(t)
	ns := newNamespace(t, c)
	clock := clocktesting.NewFakeClock(time.Now())
	one := newBackend(t, c, ns, "one", k8sbackend.WithClock(clock))
	two := newBackend(t, c, ns, "two", k8sbackend.WithClock(clock))
	key := "team-a/" + strings.Repeat("payments/", 50)
	sum := sha256.Sum256([]byte(key))
	name := "lock-" + hex.EncodeToString(sum[:])[:20]
	g.Expect(k8sbackend.LeaseName(key)).To(Equal(name))

	first, err := one.TryAcquire(ctx, key, "x", 1500*time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())
	lease := getLease(t, c, ns, name)
	g.Expect(lease).NotTo(BeNil())
	g.Expect(lease.Annotations).To(HaveKeyWithValue(k8sbackend.KeyAnnotation, key))
	g.Expect(lease.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "lockwarden"))
	g.Expect(lease.Labels).To(HaveKeyWithValue("locks.lockwarden.io/session", "one"))
	g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal("x")))
	g.Expect(lease.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(2)), "1.5 s rounds up")
	g.Expect(lease.Spec.LeaseTransitions).To(HaveValue(BeEquivalentTo(0)))
	g.Expect(lease.Spec.AcquireTime.Time).To(BeTemporally("~", clock.Now(), time.Microsecond))
	g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally("==", lease.Spec.AcquireTime.Time))
	g.Expect(first.Version).To(HavePrefix(lease.ResourceVersion+"/"), "Version is the resourceVersion and a digest of the holder")
	g.Expect(first.ExpireTime).To(BeTemporally("==", lease.Spec.RenewTime.Add(2*time.Second)))

	// Expired, then taken by another identity in another session: one more transition.
	clock.Step(3 * time.Second)
	taken, err := two.TryAcquire(ctx, key, "y", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	lease = getLease(t, c, ns, name)
	g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal("y")))
	g.Expect(lease.Spec.LeaseTransitions).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(lease.Labels).To(HaveKeyWithValue("locks.lockwarden.io/session", "two"))
	g.Expect(lease.Spec.AcquireTime.Time).To(BeTemporally("~", clock.Now(), time.Microsecond))

	// Reentrant: same holder, no transition, same acquireTime, later renewTime.
	clock.Step(time.Second)
	_, err = two.TryAcquire(ctx, key, "y", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	again := getLease(t, c, ns, name)
	g.Expect(again.Spec.LeaseTransitions).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(again.Spec.AcquireTime.Time).To(BeTemporally("==", lease.Spec.AcquireTime.Time))
	g.Expect(again.Spec.RenewTime.Time).To(BeTemporally(">", lease.Spec.RenewTime.Time))

	// Renewal writes the session Lease, not the lock Lease.
	clock.Step(time.Second)
	renewed, lost, err := two.Renew(ctx, []backends.Lease{taken}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(1))
	g.Expect(getLease(t, c, ns, name).ResourceVersion).To(Equal(again.ResourceVersion))
	session := getLease(t, c, ns, "two")
	g.Expect(session).NotTo(BeNil())
	g.Expect(session.Labels).To(HaveKeyWithValue("locks.lockwarden.io/session", "two"))
	g.Expect(session.Spec.RenewTime.Time).To(BeTemporally("~", clock.Now(), time.Microsecond))
	g.Expect(renewed[0].ExpireTime).To(BeTemporally("==", session.Spec.RenewTime.Add(holdTTL)))

	g.Expect(two.Release(ctx, renewed[0])).To(Succeed())
	g.Expect(getLease(t, c, ns, name)).To(BeNil(), "release deletes the lock Lease")
	g.Expect(getLease(t, c, ns, "two")).NotTo(BeNil(), "the session Lease stays")
}

// The session write must not revive a lock of the session that expired, even one the caller
// did not pass to Renew.
func TestRenewDeletesExpiredLocksOfTheSession(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := newClient(t)
	ns := newNamespace(t, c)
	clock := clocktesting.NewFakeClock(time.Now())
	b := newBackend(t, c, ns, "session", k8sbackend.WithClock(clock))

	short, err := b.TryAcquire(ctx, "short", "a", 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	long, err := b.TryAcquire(ctx, "long", "a", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	// Renewing extends every lock of the session while it is still held.
	clock.Step(4 * time.Second)
	_, _, err = b.Renew(ctx, []backends.Lease{long}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	clock.Step(4 * time.Second)
	got, err := b.Inspect(ctx, "short")
	g.Expect(err).NotTo(HaveOccurred(), "the session renewal kept it alive")
	g.Expect(got.ExpireTime).To(BeTemporally(">", short.ExpireTime))

	clock.Step(10 * time.Second)
	renewed, lost, err := b.Renew(ctx, []backends.Lease{long}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(1))
	g.Expect(getLease(t, c, ns, k8sbackend.LeaseName("short"))).To(BeNil(), "the expired lock was deleted, not revived")
	_, err = b.Inspect(ctx, "short")
	g.Expect(err).To(MatchError(backends.ErrNotHeld))
}

// Replicas share the session, so a lock taken by a deposed leader in the moment before it
// noticed (for a claim the new leader had already let go) would be kept alive by the new leader's
// renewals for ever, and every claim queued on it would wait for ever: the reliability harness
// found this after a leader pause. The session keeps such a lock for one TTL from the new
// leader's start (time to resume its predecessor's holds), then lets it expire.
func TestSessionLetsLocksNobodyAsksForExpire(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := newClient(t)
	ns := newNamespace(t, c)
	clock := clocktesting.NewFakeClock(time.Now())
	const ttl = 5 * time.Second
	deposed := newBackend(t, c, ns, "session", k8sbackend.WithClock(clock))
	leader := newBackend(t, c, ns, "session", k8sbackend.WithClock(clock))

	mine, err := leader.TryAcquire(ctx, "mine", "b", ttl)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = deposed.TryAcquire(ctx, "orphan", "ghost", ttl)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = deposed.TryAcquire(ctx, "resumed-late", "c", ttl)
	g.Expect(err).NotTo(HaveOccurred())

	held := []backends.Lease{mine} // what the leader's Renewer tracks
	renew := func() {
		t.Helper()
		clock.Step(2 * time.Second) // less often than the Renewer, within the lease
		renewed, lost, err := leader.Renew(ctx, held, ttl)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(BeEmpty())
		g.Expect(renewed).To(HaveLen(len(held)))
		held = renewed
	}
	// Within a TTL of the leader's start the session keeps every lock alive, asked for or not.
	for range 2 {
		renew()
	}
	orphan, err := leader.Inspect(ctx, "orphan")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(orphan.ExpireTime).To(BeTemporally(">", clock.Now().Add(ttl-time.Second)), "extended by the session")
	g.Expect(getLease(t, c, ns, k8sbackend.LeaseName("orphan")).Labels).To(HaveKeyWithValue(k8sbackend.SessionLabel, "session"))

	// The first renewal after that takes the locks nobody asked for out of the session, with
	// their expiry unchanged.
	renew()
	detached := getLease(t, c, ns, k8sbackend.LeaseName("orphan"))
	g.Expect(detached.Labels).NotTo(HaveKey(k8sbackend.SessionLabel))
	again, err := leader.Inspect(ctx, "orphan")
	g.Expect(err).NotTo(HaveOccurred(), "still held until its expiry")
	g.Expect(again.ExpireTime).To(BeTemporally("==", orphan.ExpireTime))

	// A holder that takes its lock up again before it expires keeps it.
	resumed, err := leader.TryAcquire(ctx, "resumed-late", "c", ttl)
	g.Expect(err).NotTo(HaveOccurred())
	held = append(held, resumed)

	for range 6 {
		renew()
	}
	_, err = leader.Inspect(ctx, "orphan")
	g.Expect(err).To(MatchError(backends.ErrNotHeld), "nobody renews it, so it expired")
	taken, err := leader.TryAcquire(ctx, "orphan", "next", ttl)
	g.Expect(err).NotTo(HaveOccurred(), "the next holder gets it")
	g.Expect(taken.Identity).To(Equal("next"))

	for _, key := range []string{"mine", "resumed-late"} {
		_, err := leader.Inspect(ctx, key)
		g.Expect(err).NotTo(HaveOccurred(), "%s is asked for and stays held", key)
	}
}

// A lock that expires while the session write is in flight may have been taken in between (a
// takeover does not see the session write), so Renew reports it lost and deletes it.
func TestRenewReportsLocksThatExpireDuringTheWrite(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := newClient(t)
	ns := newNamespace(t, c)
	clock := clocktesting.NewFakeClock(time.Now())
	// The session write takes two seconds on the backend's clock.
	slow := interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if obj.GetName() == "session" {
				clock.Step(2 * time.Second)
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	b := newBackend(t, slow, ns, "session", k8sbackend.WithClock(clock))
	closing, err := b.TryAcquire(ctx, "closing", "a", 5*time.Second) // expires at 5 s
	g.Expect(err).NotTo(HaveOccurred())
	clock.Step(3 * time.Second)
	healthy, err := b.TryAcquire(ctx, "healthy", "a", 5*time.Second) // expires at 8 s
	g.Expect(err).NotTo(HaveOccurred())

	clock.Step(time.Second) // the renewal starts at 4 s; the write returns at 6 s
	renewed, lost, err := b.Renew(ctx, []backends.Lease{closing, healthy}, 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(ConsistOf(closing))
	g.Expect(keysOf(renewed)).To(ConsistOf("healthy"))
	g.Expect(renewed[0].ExpireTime).To(BeTemporally(">", healthy.ExpireTime))
	g.Expect(getLease(t, c, ns, k8sbackend.LeaseName("closing"))).To(BeNil(), "the lost lock is not left revived")
	_, err = b.Inspect(ctx, "closing")
	g.Expect(err).To(MatchError(backends.ErrNotHeld))
}

func keysOf(leases []backends.Lease) []string {
	var keys []string
	for _, l := range leases {
		keys = append(keys, l.Key)
	}
	return keys
}

// A restarted controller that keeps the session name resumes every hold with one renewal, for
// the steady-state cost.
func TestRestartWithTheSameSessionName(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := newClient(t)
	ns := newNamespace(t, c)
	before, err := k8sbackend.New(k8sbackend.Config{Client: c, Namespace: ns})
	g.Expect(err).NotTo(HaveOccurred())
	var leases []backends.Lease
	for i := range 3 {
		l, err := before.TryAcquire(ctx, fmt.Sprintf("k%d", i), fmt.Sprintf("id%d", i), holdTTL)
		g.Expect(err).NotTo(HaveOccurred())
		leases = append(leases, l)
	}
	g.Expect(before.Close(ctx)).To(Succeed())
	_, err = before.Inspect(ctx, "k0")
	g.Expect(err).To(HaveOccurred(), "a closed session refuses calls")

	after, err := k8sbackend.New(k8sbackend.Config{Client: c, Namespace: ns})
	g.Expect(err).NotTo(HaveOccurred())
	renewed, lost, err := after.Renew(ctx, leases, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(3))
	g.Expect(after.RoundTrips()).To(BeEquivalentTo(2))
	g.Expect(getLease(t, c, ns, k8sbackend.DefaultSessionName)).NotTo(BeNil())
}

// Ping's error is what a user sees in the LockBackend's Ready condition.
func TestPing(t *testing.T) {
	ctx := t.Context()
	admin := newClient(t)
	ns := newNamespace(t, admin)

	userClient := func(t *testing.T, name string) client.Client {
		user, err := testEnv.AddUser(envtest.User{Name: name}, restConfig)
		if err != nil {
			t.Fatalf("user: %v", err)
		}
		c, err := client.New(user.Config(), client.Options{Scheme: scheme})
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		return c
	}

	t.Run("WithoutRBAC", func(t *testing.T) {
		g := NewWithT(t)
		err := newBackend(t, userClient(t, "no-rights"), ns, "session").Ping(ctx)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(And(
			ContainSubstring("cannot list Leases in namespace "+ns),
			ContainSubstring(`User "no-rights" cannot list resource "leases"`),
		))
	})

	t.Run("ReadOnly", func(t *testing.T) {
		g := NewWithT(t)
		grant(t, admin, ns, "read-only", "get", "list", "watch")
		err := newBackend(t, userClient(t, "read-only"), ns, "session").Ping(ctx)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(And(
			ContainSubstring(fmt.Sprintf("cannot create Lease %s/session", ns)),
			ContainSubstring(`cannot create resource "leases"`),
		))
	})

	t.Run("Authorized", func(t *testing.T) {
		g := NewWithT(t)
		grant(t, admin, ns, "controller", "get", "list", "watch", "create", "update", "patch", "delete")
		b := newBackend(t, userClient(t, "controller"), ns, "session")
		g.Expect(b.Ping(ctx)).To(Succeed(), "creates the session Lease")
		g.Expect(b.Ping(ctx)).To(Succeed(), "updates the session Lease")
		session := getLease(t, admin, ns, "session")
		g.Expect(session.Annotations).To(HaveKey(k8sbackend.PingAnnotation))
		g.Expect(session.Spec.RenewTime).To(BeNil(), "Ping renews nothing")
	})

	t.Run("Unreachable", func(t *testing.T) {
		g := NewWithT(t)
		// A mapper that needs no discovery, so that the client can be built for a dead address.
		mapper := meta.NewDefaultRESTMapper(nil)
		mapper.Add(coordinationv1.SchemeGroupVersion.WithKind("Lease"), meta.RESTScopeNamespace)
		c, err := client.New(&rest.Config{Host: "https://127.0.0.1:1"}, client.Options{Scheme: scheme, Mapper: mapper})
		g.Expect(err).NotTo(HaveOccurred())
		err = newBackend(t, c, ns, "session").Ping(ctx)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(And(ContainSubstring("cannot list Leases in namespace "+ns), ContainSubstring("127.0.0.1:1")))
	})
}

// grant lets user do verbs on Leases in ns.
func grant(t *testing.T, c client.Client, ns, user string, verbs ...string) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("RBAC: %v", err)
		}
	}
}

// Every request carries the per-call timeout, so a hung API server cannot hold a caller longer.
func TestCallTimeout(t *testing.T) {
	g := NewWithT(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	hung := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			<-ctx.Done()
			return ctx.Err()
		},
	})
	b := newBackend(t, hung, ns, "session", k8sbackend.WithCallTimeout(200*time.Millisecond))
	_, err := b.Inspect(t.Context(), "k")
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(err.Error()).To(ContainSubstring("did not answer within 200ms"))
	g.Expect(errors.Is(err, backends.ErrNotHeld)).To(BeFalse(), "an unanswered call says nothing about the lock")
}

func TestNewValidatesConfig(t *testing.T) {
	c := newClient(t)
	bare, err := client.New(restConfig, client.Options{Scheme: runtime.NewScheme()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	for name, tc := range map[string]struct {
		cfg  k8sbackend.Config
		opts []k8sbackend.Option
		want string
	}{
		"no client":            {cfg: k8sbackend.Config{Namespace: "ns"}, want: "Config.Client is required"},
		"no namespace":         {cfg: k8sbackend.Config{Client: c}, want: `invalid namespace ""`},
		"bad namespace":        {cfg: k8sbackend.Config{Client: c, Namespace: "Not_A_Namespace"}, want: "invalid namespace"},
		"session like a lock":  {cfg: k8sbackend.Config{Client: c, Namespace: "ns", SessionName: "lock-1"}, want: `must not start with "lock-"`},
		"session too long":     {cfg: k8sbackend.Config{Client: c, Namespace: "ns", SessionName: strings.Repeat("s", 64)}, want: "invalid session name"},
		"zero call timeout":    {cfg: k8sbackend.Config{Client: c, Namespace: "ns"}, opts: []k8sbackend.Option{k8sbackend.WithCallTimeout(0)}, want: "call timeout must be positive"},
		"scheme without Lease": {cfg: k8sbackend.Config{Client: bare, Namespace: "ns"}, want: "does not know coordination.k8s.io/v1, Kind=Lease"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := k8sbackend.New(tc.cfg, tc.opts...)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
	_, err = k8sbackend.New(k8sbackend.Config{Client: c, Namespace: "ns"})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// Record mode: holds live in the lock records; the session Lease keeps them alive, and its
// renewal history says which lapsed.
func TestRecords(t *testing.T) {
	g := NewWithT(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	clock := clocktesting.NewFakeClock(time.Now())
	r, err := k8sbackend.NewRecords(k8sbackend.Config{Client: c, Namespace: ns, SessionName: "records"}, k8sbackend.WithClock(clock))
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()
	ttl := 10 * time.Second

	before := r.RoundTrips()
	a, err := r.TryAcquire(ctx, "k/a", "id-a", ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Release(ctx, a)).To(Succeed())
	g.Expect(r.RoundTrips()).To(Equal(before), "a grant and a release in record mode send no request")
	var leases coordinationv1.LeaseList
	g.Expect(c.List(ctx, &leases, client.InNamespace(ns))).To(Succeed())
	g.Expect(leases.Items).To(BeEmpty(), "no Lease per lock")

	// Renewing the session renews every hold in one read and one write.
	var held []backends.Lease
	for i := range 20 {
		l, err := r.TryAcquire(ctx, fmt.Sprintf("k/%d", i), fmt.Sprintf("id-%d", i), ttl)
		g.Expect(err).NotTo(HaveOccurred())
		held = append(held, l)
	}
	clock.Step(3 * time.Second)
	before = r.RoundTrips()
	renewed, lost, err := r.Renew(ctx, held, ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Expect(renewed).To(HaveLen(20))
	g.Expect(r.RoundTrips() - before).To(Equal(int64(2)))
	g.Expect(renewed[0].ExpireTime).To(BeTemporally("~", clock.Now().Add(ttl), time.Millisecond))

	// A controller that resumes: alive while renewed in time.
	clock.Step(5 * time.Second)
	expire, alive, err := r.HoldAlive(ctx, held[0].AcquireTime, ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alive).To(BeTrue())
	g.Expect(expire).To(BeTemporally("~", renewed[0].ExpireTime, time.Millisecond))

	// No renewal for a lease (the controller was down): the holds lapsed, and a later renewal
	// does not revive them, while a hold granted after it lives.
	clock.Step(ttl)
	_, alive, err = r.HoldAlive(ctx, held[0].AcquireTime, ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alive).To(BeFalse())
	fresh, err := r.TryAcquire(ctx, "k/fresh", "id-fresh", ttl)
	g.Expect(err).NotTo(HaveOccurred())
	renewed, lost, err = r.Renew(ctx, append(held[:1:1], fresh), ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keysOf(lost)).To(ConsistOf("k/0"))
	g.Expect(keysOf(renewed)).To(ConsistOf("k/fresh"))
	_, alive, err = r.HoldAlive(ctx, held[0].AcquireTime, ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alive).To(BeFalse(), "the gap is on record: a renewal after it revives nothing")
	session := getLease(t, c, ns, "records")
	g.Expect(session.Annotations).To(HaveKey(k8sbackend.GapsAnnotation))
	g.Expect(session.Annotations[k8sbackend.GapsAnnotation]).NotTo(BeEmpty())
}

// KeepSession renews the session as Renew does, for holds a new leader has not resumed yet: it
// keeps alive the holds that were alive, and revives none that lapsed before it.
func TestRecordsKeepSession(t *testing.T) {
	g := NewWithT(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	clock := clocktesting.NewFakeClock(time.Now())
	r, err := k8sbackend.NewRecords(k8sbackend.Config{Client: c, Namespace: ns, SessionName: "records"}, k8sbackend.WithClock(clock))
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()
	ttl := 6 * time.Second

	a, err := r.TryAcquire(ctx, "k/a", "id-a", ttl)
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = r.Renew(ctx, []backends.Lease{a}, ttl)
	g.Expect(err).NotTo(HaveOccurred())

	// Kept every third of the lease, a hold outlives its lease many times over.
	for range 6 {
		clock.Step(ttl / 3)
		g.Expect(r.KeepSession(ctx)).To(Succeed())
	}
	_, alive, err := r.HoldAlive(ctx, a.AcquireTime, ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alive).To(BeTrue(), "a hold whose session was kept is alive")

	// A lease without any renewal: the hold lapsed, and keeping the session after it revives
	// nothing, while a hold granted after it lives.
	clock.Step(ttl)
	g.Expect(r.KeepSession(ctx)).To(Succeed())
	_, alive, err = r.HoldAlive(ctx, a.AcquireTime, ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alive).To(BeFalse(), "the gap is on record: keeping the session after it revives nothing")
	fresh, err := r.TryAcquire(ctx, "k/fresh", "id-fresh", ttl)
	g.Expect(err).NotTo(HaveOccurred())
	clock.Step(ttl / 2)
	g.Expect(r.KeepSession(ctx)).To(Succeed())
	_, alive, err = r.HoldAlive(ctx, fresh.AcquireTime, ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alive).To(BeTrue())
}

// A hold at the default lease, renewed every third of it (the Renewer renews every sixth: gaps of
// a third are the harder case for the session's history), lives as long as it is renewed: here 40
// renewals, over six and a half minutes of the fake clock. (The session
// history once kept a gap at every such renewal, and judged holds older than 16 renewals lapsed.)
func TestRecordsKeepLongHolds(t *testing.T) {
	g := NewWithT(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	clock := clocktesting.NewFakeClock(time.Now())
	r, err := k8sbackend.NewRecords(k8sbackend.Config{Client: c, Namespace: ns, SessionName: "records"}, k8sbackend.WithClock(clock))
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()
	ttl := 30 * time.Second

	held, err := r.TryAcquire(ctx, "k/long", "id-long", ttl)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range 40 {
		clock.Step(ttl / 3)
		renewed, lost, err := r.Renew(ctx, []backends.Lease{held}, ttl)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(BeEmpty(), "renewal %d, %s after the grant", i+1, time.Duration(i+1)*ttl/3)
		g.Expect(renewed).To(HaveLen(1))
	}
	_, alive, err := r.HoldAlive(ctx, held.AcquireTime, ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alive).To(BeTrue())
}
