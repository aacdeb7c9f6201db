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

package controller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	etcdbackend "github.com/lockwarden/lockwarden/internal/backends/etcd"
	"github.com/lockwarden/lockwarden/internal/backends/fake"
	redisbackend "github.com/lockwarden/lockwarden/internal/backends/redis"
	redlockbackend "github.com/lockwarden/lockwarden/internal/backends/redlock"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	sqlbackend "github.com/lockwarden/lockwarden/internal/backends/sql"
	zookeeperbackend "github.com/lockwarden/lockwarden/internal/backends/zookeeper"
	"github.com/lockwarden/lockwarden/internal/metrics"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
	"github.com/lockwarden/lockwarden/internal/testutil/skewclock"
)

// The controller suite runs the real reconcilers against a real API server (envtest). There is no
// kubelet: tests create Pod objects and drive their status by hand. Locks live on the built-in
// kubernetes backend (real Leases in the real API server), except for the failure tests, which use
// a LockBackend of type Redis served by an in-memory fake whose faults the tests control.
//
// Every manager runs as the chart's ServiceAccount with exactly the shipped RBAC (config/rbac, which
// the chart copies): a request the roles do not allow fails the spec that made it (checked after
// each spec), so that a verb the code sends and the chart lacks fails here rather than for a user.

const controllerNamespace = "lockwarden-system"

// managerAccount is the account every manager of the suite acts as.
var managerAccount = rbacenv.Account{Name: "lockwarden", Namespace: controllerNamespace, ElectionNamespace: "lockwarden-election"}

var (
	controlPlane *lockenv.ControlPlane
	cfg          *rest.Config
	scheme       = lockenv.Scheme()
	k8sClient    client.Client

	// faultyStore backs the LockBackends of type SQL whose DSN Secret is faultyStoreSecret: a
	// backend the specs can make fail at will. Each LockBackend gets its own session on it, as
	// with a real store. Every other LockBackend (Redis, Redlock, Etcd, ZooKeeper, SQL) uses the
	// real backend against real server processes.
	faultyStore = &faultyBackends{store: fake.New()}

	mgrMu     sync.Mutex
	manager   *lockenv.Manager
	mgrMetric *metrics.Metrics
	// controllerClock is every manager's clock; specs step it to test what must not depend on it.
	controllerClock = &skewclock.Clock{}
	// refusals records every request of a manager that the API server refused; refusalsSeen is
	// how many of them earlier specs were already blamed for.
	refusals     = &rbacenv.Refusals{}
	refusalsSeen int
	// managerCfg reaches the API server as managerAccount.
	managerCfg *rest.Config
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	var err error
	controlPlane, err = lockenv.StartControlPlane(filepath.Join("..", ".."), controllerNamespace)
	Expect(err).NotTo(HaveOccurred())
	cfg, k8sClient = controlPlane.Config, controlPlane.Client
	objs, grants, err := rbacenv.Load(filepath.Join("..", "..", "config", "rbac"), managerAccount)
	Expect(err).NotTo(HaveOccurred())
	Expect(rbacenv.Install(context.Background(), k8sClient, managerAccount, objs, grants)).To(Succeed())
	managerCfg = refusals.As(cfg, managerAccount)

	startMonitor()
	startManager()
})

// Each spec fails if a manager was refused a request while it ran: the shipped RBAC lacks a verb
// the code path it exercised needs.
var _ = AfterEach(func() {
	all := refusals.List()
	fresh := all[refusalsSeen:]
	refusalsSeen = len(all)
	Expect(fresh).To(BeEmpty(), "the API server refused these requests of the manager (running as %s under config/rbac): grant what the code needs in the +kubebuilder:rbac markers of internal/controller/doc.go", managerAccount.User())
})

var _ = AfterSuite(func() {
	monitor.checkWatching()
	monitor.stop()
	stopManager()
	if controlPlane != nil {
		Expect(controlPlane.Stop()).To(Succeed())
	}
})

// startManager runs a fresh manager, as a restarted controller process would: new caches, new
// backend sessions, a new Renewer that remembers nothing.
func startManager() { startManagerWith() }

// startManagerWith runs a fresh manager as startManager does, its options changed by mutate.
func startManagerWith(mutate ...func(*lockenv.ManagerOptions)) {
	mgrMu.Lock()
	defer mgrMu.Unlock()
	sqlFactory := func(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (backends.Backend, error) {
		if spec.SQL.DSNSecretRef.Name == faultyStoreSecret {
			return faultyStore.newSession(), nil
		}
		return sqlbackend.Factory(ctx, spec, secrets)
	}
	o := lockenv.ManagerOptions{
		Namespace: controllerNamespace, ProbeInterval: time.Second, Restartable: true, Clock: controllerClock,
		Registry: []registry.Option{
			registry.WithFactory(locksv1alpha1.BackendSQL, sqlFactory),
			registry.WithFactory(locksv1alpha1.BackendZooKeeper, zookeeperbackend.Factory),
			registry.WithFactory(locksv1alpha1.BackendEtcd, etcdbackend.Factory),
			registry.WithFactory(locksv1alpha1.BackendRedis, redisbackend.Factory),
			registry.WithFactory(locksv1alpha1.BackendRedlock, redlockbackend.Factory),
		},
	}
	for _, m := range mutate {
		m(&o)
	}
	var err error
	manager, err = lockenv.StartManager(managerCfg, o)
	Expect(err).NotTo(HaveOccurred())
	mgrMetric = manager.Metrics
}

func stopManager() {
	mgrMu.Lock()
	defer mgrMu.Unlock()
	if manager != nil {
		Expect(manager.Stop()).To(Succeed())
		manager = nil
	}
}

// newNamespace creates a namespace for one test, whose service accounts may create LockClaims (as
// annotated pods' and workloads' accounts must).
func newNamespace() string {
	GinkgoHelper()
	ns := newBareNamespace()
	Expect(rbacenv.AllowClaims(context.Background(), k8sClient, ns)).To(Succeed())
	return ns
}

// newBareNamespace creates a namespace for one test, whose service accounts may do nothing.
func newBareNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "locks-"}}
	Expect(k8sClient.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

func key(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

func ctx() context.Context { return context.Background() }

// newLock creates a DistributedLock.
func newLock(ns, name string, mutate ...func(*locksv1alpha1.DistributedLock)) *locksv1alpha1.DistributedLock {
	GinkgoHelper()
	l := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: 6}}
	for _, m := range mutate {
		m(l)
	}
	Expect(k8sClient.Create(ctx(), l)).To(Succeed())
	return l
}

// newClaim creates a LockClaim for lock; pod "" makes it detached.
func newClaim(ns, name, lock, pod string, mutate ...func(*locksv1alpha1.LockClaim)) *locksv1alpha1.LockClaim {
	GinkgoHelper()
	c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: locksv1alpha1.LockClaimSpec{LockName: lock}}
	if pod != "" {
		c.Spec.Holder = &locksv1alpha1.ClaimHolder{PodName: pod}
	}
	for _, m := range mutate {
		m(c)
	}
	Expect(k8sClient.Create(ctx(), c)).To(Succeed())
	return c
}

// newPod creates a Pod object bound to a (fictitious) node and marks it Running, standing in for
// the scheduler and a kubelet. Being bound makes its deletion graceful, as on a real cluster.
func newPod(ns, name string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	Expect(k8sClient.Create(ctx(), p)).To(Succeed())
	setPodPhase(p, corev1.PodRunning)
	return p
}

func setPodPhase(p *corev1.Pod, phase corev1.PodPhase) {
	GinkgoHelper()
	Expect(k8sClient.Get(ctx(), key(p), p)).To(Succeed())
	p.Status.Phase = phase
	Expect(k8sClient.Status().Update(ctx(), p)).To(Succeed())
}

// deleteNow deletes an object without a grace period (there is no kubelet to finish it).
func deleteNow(o client.Object) {
	GinkgoHelper()
	Expect(k8sClient.Delete(ctx(), o, client.GracePeriodSeconds(0))).To(Succeed())
}

// claimOf fetches a claim's current state.
func claimOf(ns, name string) func(g Gomega) *locksv1alpha1.LockClaim {
	return func(g Gomega) *locksv1alpha1.LockClaim {
		c := &locksv1alpha1.LockClaim{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		return c
	}
}

// phaseOf returns a claim's phase, for Eventually.
func phaseOf(ns, name string) func() (locksv1alpha1.ClaimPhase, error) {
	return func() (locksv1alpha1.ClaimPhase, error) {
		c := &locksv1alpha1.LockClaim{}
		err := k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, c)
		return c.Status.Phase, err
	}
}

// acquired returns a claim's Acquired condition as "Status/Reason", for Eventually.
func acquired(ns, name string) func() (string, error) {
	return func() (string, error) {
		c := &locksv1alpha1.LockClaim{}
		if err := k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return "", err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == locksv1alpha1.ConditionAcquired {
				return fmt.Sprintf("%s/%s", cond.Status, cond.Reason), nil
			}
		}
		return "", nil
	}
}

// faultyBackends hands out sessions on one in-memory store and makes them all fail at will.
type faultyBackends struct {
	store *fake.Backend

	mu       sync.Mutex
	down     error
	stall    <-chan struct{}
	sessions []*fake.Backend
}

func (f *faultyBackends) newSession() *fake.Backend {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.store.NewSession()
	s.SetUnavailable(f.down)
	s.Stall(f.stall)
	f.sessions = append(f.sessions, s)
	return s
}

// SetUnavailable makes every session, present and future, fail with err (nil restores them).
func (f *faultyBackends) SetUnavailable(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = err
	for _, s := range f.sessions {
		s.SetUnavailable(err)
	}
}

// Stall makes every call of every session, present and future, wait until release is closed
// (nil: no wait for calls made after).
func (f *faultyBackends) Stall(release <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stall = release
	for _, s := range f.sessions {
		s.Stall(release)
	}
}

// Calls counts the calls of op (fake.OpTryAcquire, ...) on every session so far.
func (f *faultyBackends) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.sessions {
		n += s.Calls()[op]
	}
	return n
}

// Steal makes identity the holder of key, as a client outside lockwarden would.
func (f *faultyBackends) Steal(key, identity string) { f.store.Steal(key, identity) }
