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

package lockengine

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/fake"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/keyledger"
	"github.com/lockwarden/lockwarden/internal/metrics"
	"github.com/lockwarden/lockwarden/internal/renewal"
	"github.com/lockwarden/lockwarden/internal/testutil/fakepods"
)

// The step tests run a lock's pass, or one of its steps, between the pure decisions and the
// envtest specs: against controller-runtime's fake client (with the real field indexes and
// status subresources), the in-memory backend of package backends/fake as the built-in backend,
// and a real Renewer and key ledger. They assert the state a pass leaves: on the objects, and on
// the backend. Faults come through the client's interceptor or the fake backend's own switches.

// stepNamespace is the namespace the step tests' locks and claims live in.
const stepNamespace = "team"

// stepEnv is one step test's world.
type stepEnv struct {
	t      testing.TB
	client client.WithWatch
	// store is the backend every lock of the test uses (the built-in backend's place).
	store *fake.Backend
	clock *clocktesting.FakeClock
	r     *Reconciler
	// recorder holds the events the pass emitted.
	recorder *events.FakeRecorder
	// created counts objects created, to give each a distinct UID and creation time.
	created int
}

// newStepEnv builds a reconciler on a fake client whose calls funcs may intercept (zero value:
// none).
func newStepEnv(t testing.TB, funcs interceptor.Funcs) *stepEnv {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := locksv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	builder := fakeclient.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&locksv1alpha1.DistributedLock{}, &locksv1alpha1.LockClaim{}, &locksv1alpha1.LockBackend{}, &corev1.Pod{}, &corev1.Node{}).
		WithInterceptorFuncs(funcs).
		WithGlobalResourceVersionCounter() // one counter for every object, as etcd's revision: the queue order reads it
	for _, ix := range fieldIndexes {
		builder = builder.WithIndex(ix.obj, ix.field, ix.extract)
	}
	c := builder.Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
	store := fake.New(fake.WithClock(clk))
	resolver := &registry.Resolver{Client: c, Registry: registry.New(store)}
	recorder := events.NewFakeRecorder(100)
	r := &Reconciler{
		Client:   c,
		Pods:     fakepods.Reader{C: c},
		Backends: resolver,
		Recorder: recorder,
		Metrics:  metrics.New(nil),
		Clock:    clk,
		Keys:     keyledger.New(c, c, "lockwarden-system", lockAlive(c, c)),
	}
	r.Renewer = renewal.New(resolver.ByName, r.NotifyLost, renewal.WithClock(clk))
	r.prepare()
	return &stepEnv{t: t, client: c, store: store, clock: clk, r: r, recorder: recorder}
}

// restart replaces the reconciler with a new one on the same API objects and the same store,
// through a new backend session, as a restarted controller or a new leader would be: no Renewer
// state, no in-process stores.
func (e *stepEnv) restart() {
	old := e.r
	resolver := &registry.Resolver{Client: e.client, Registry: registry.New(e.store.NewSession())}
	r := &Reconciler{Client: e.client, Pods: fakepods.Reader{C: e.client}, Backends: resolver, Recorder: e.recorder, Metrics: old.Metrics, Clock: e.clock,
		Keys: keyledger.New(e.client, e.client, "lockwarden-system", lockAlive(e.client, e.client))}
	r.Renewer = renewal.New(resolver.ByName, r.NotifyLost, renewal.WithClock(e.clock))
	r.prepare()
	e.r = r
}

// ctx is the context of the env's calls.
func (e *stepEnv) ctx() context.Context {
	return ctrl.LoggerInto(context.Background(), ctrl.Log.WithName("steps"))
}

// stamp gives a new object a UID and a creation time one second after the last one's.
func (e *stepEnv) stamp(o client.Object) {
	e.created++
	o.SetUID(types.UID(fmt.Sprintf("uid-%s-%d", o.GetName(), e.created)))
	o.SetCreationTimestamp(metav1.NewTime(e.clock.Now().Add(time.Duration(e.created-100) * time.Second)))
}

// lock creates a DistributedLock of stepNamespace.
func (e *stepEnv) lock(name string, mutate ...func(*locksv1alpha1.DistributedLock)) *locksv1alpha1.DistributedLock {
	e.t.Helper()
	l := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: stepNamespace, Name: name},
		Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: 30, MaxHolders: 1}}
	for _, m := range mutate {
		m(l)
	}
	e.stamp(l)
	if err := e.client.Create(e.ctx(), l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

// claim creates a LockClaim of lock (without a finalizer, as lockwarden's own clients make them).
func (e *stepEnv) claim(name, lock string, mutate ...func(*locksv1alpha1.LockClaim)) *locksv1alpha1.LockClaim {
	e.t.Helper()
	c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: stepNamespace, Name: name},
		Spec: locksv1alpha1.LockClaimSpec{LockName: lock}}
	for _, m := range mutate {
		m(c)
	}
	e.stamp(c)
	if err := e.client.Create(e.ctx(), c); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// pod creates a Running pod of stepNamespace, as the scheduler and a kubelet would leave it.
func (e *stepEnv) pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: stepNamespace, Name: name},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	for _, m := range mutate {
		m(p)
	}
	e.stamp(p)
	if err := e.client.Create(e.ctx(), p); err != nil {
		e.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	if err := e.client.Status().Update(e.ctx(), p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// ownedBy makes a claim's holder pod its controller, as lockctl and the pod controller do.
func ownedBy(pod *corev1.Pod) func(*locksv1alpha1.LockClaim) {
	return func(c *locksv1alpha1.LockClaim) {
		c.Spec.Holder = &locksv1alpha1.ClaimHolder{PodName: pod.Name}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			Controller: ptr.To(true)}}
	}
}

// remove deletes o; an object with finalizers is then only marked deleting.
func (e *stepEnv) remove(o client.Object) {
	e.t.Helper()
	if err := e.client.Delete(e.ctx(), o); err != nil {
		e.t.Fatal(err)
	}
}

// pass runs one pass of lock, as the work queue would.
func (e *stepEnv) pass(lock string) (ctrl.Result, error) {
	res, err := e.r.Reconcile(e.ctx(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: stepNamespace, Name: lock}})
	// A new holder's Held write leaves the pass (heldlane.go); the tests look once it is done.
	e.r.memory.lane.idle()
	return res, err
}

// mustPass runs one pass of lock and fails the test if it fails.
func (e *stepEnv) mustPass(lock string) ctrl.Result {
	e.t.Helper()
	res, err := e.pass(lock)
	if err != nil {
		e.t.Fatalf("pass of %s: %v", lock, err)
	}
	return res
}

// getClaim reads a claim as the API has it now.
func (e *stepEnv) getClaim(name string) *locksv1alpha1.LockClaim {
	e.t.Helper()
	c := &locksv1alpha1.LockClaim{}
	if err := e.client.Get(e.ctx(), types.NamespacedName{Namespace: stepNamespace, Name: name}, c); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// getLock reads a lock as the API has it now.
func (e *stepEnv) getLock(name string) *locksv1alpha1.DistributedLock {
	e.t.Helper()
	l := &locksv1alpha1.DistributedLock{}
	if err := e.client.Get(e.ctx(), types.NamespacedName{Namespace: stepNamespace, Name: name}, l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

// backendHolders are the identities holding key on the backend now (exclusive or shared).
func (e *stepEnv) backendHolders(key string) []string {
	e.t.Helper()
	holders, err := e.store.Holders(e.ctx(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	ids := make([]string, 0, len(holders))
	for _, h := range holders {
		ids = append(ids, h.Identity)
	}
	return ids
}

// stepKey is the backend key of a lock of stepNamespace on the built-in backend.
func stepKey(lock string) string { return "lockwarden/" + stepNamespace + "/" + lock }

// clientKey is o's namespace and name.
func clientKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }
