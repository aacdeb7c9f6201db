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

// Package lockenv runs lockwarden for the suites that need the controller at work: a real control
// plane (envtest's kube-apiserver and etcd, KUBEBUILDER_ASSETS) with the lockwarden CRDs, and
// the manager in-process, wired as cmd/manager wires it.
package lockenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	kubernetesbackend "github.com/lockwarden/lockwarden/internal/backends/kubernetes"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/controller"
	"github.com/lockwarden/lockwarden/internal/fairqueue"
	"github.com/lockwarden/lockwarden/internal/lockengine"
	"github.com/lockwarden/lockwarden/internal/metrics"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// Scheme has the Kubernetes and lockwarden types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = locksv1alpha1.AddToScheme(s)
	return s
}

// ControlPlane is a real kube-apiserver and etcd with the lockwarden CRDs installed.
type ControlPlane struct {
	// Config reaches the API server as its admin.
	Config *rest.Config
	// Client is an uncached admin client.
	Client client.Client
	env    *envtest.Environment
}

// StartControlPlane starts the control plane, installs the CRDs from repoRoot/config/crd/bases
// and creates each of namespaces.
func StartControlPlane(repoRoot string, namespaces ...string) (*ControlPlane, error) {
	return StartControlPlaneWith(repoRoot, ControlPlaneOptions{}, namespaces...)
}

// ControlPlaneOptions configure StartControlPlaneWith.
type ControlPlaneOptions struct {
	// APIServer is the kube-apiserver binary to run instead of KUBEBUILDER_ASSETS's (the clocked
	// test build of hack/k8s-binaries.sh, for one); it inherits this process's environment.
	APIServer string
	// APIServerFlags are further kube-apiserver flags, name (without dashes) to value: an audit
	// policy and log, for one.
	APIServerFlags map[string]string
	// CRDs are installed besides lockwarden's own (other projects' kinds: workloadcrds).
	CRDs []*apiextensionsv1.CustomResourceDefinition
}

// StartControlPlaneWith is StartControlPlane with options.
func StartControlPlaneWith(repoRoot string, o ControlPlaneOptions, namespaces ...string) (*ControlPlane, error) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		CRDs:                  o.CRDs,
	}
	if o.APIServer != "" {
		env.ControlPlane.GetAPIServer().Path = o.APIServer
	}
	for name, value := range o.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest (run through make test-unit, which sets KUBEBUILDER_ASSETS): %w", err)
	}
	if err := CheckServerVersion(cfg); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	cp := &ControlPlane{Config: cfg, env: env}
	if cp.Client, err = client.New(cfg, client.Options{Scheme: Scheme()}); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	for _, ns := range namespaces {
		err := cp.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, errors.Join(err, env.Stop())
		}
	}
	return cp, nil
}

// ExpectedServerVersionEnv names the kube-apiserver release a suite must run on when it is set
// (make test-compat sets it to the oldest release the README claims), so that a compatibility run
// on the wrong binary fails instead of proving nothing.
const ExpectedServerVersionEnv = "LOCKWARDEN_EXPECT_SERVER_VERSION"

// CheckServerVersion fails when ExpectedServerVersionEnv is set and the API server at cfg reports
// another release.
func CheckServerVersion(cfg *rest.Config) error {
	want := os.Getenv(ExpectedServerVersionEnv)
	if want == "" {
		return nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("asking the API server its version: %w", err)
	}
	if info.GitVersion != want {
		return fmt.Errorf("the API server is %s, but %s=%s: KUBEBUILDER_ASSETS points at the wrong kube-apiserver",
			info.GitVersion, ExpectedServerVersionEnv, want)
	}
	return nil
}

// Stop stops the control plane.
func (cp *ControlPlane) Stop() error { return cp.env.Stop() }

// Kubeconfig returns a kubeconfig for a new admin user (group system:masters) of the API server,
// for command-line tools such as kubectl and helm.
func (cp *ControlPlane) Kubeconfig() ([]byte, error) {
	user, err := cp.env.AddUser(envtest.User{Name: "lockwarden-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}

// ManagerOptions configure StartManager.
type ManagerOptions struct {
	// Namespace is the controller's namespace: the built-in backend's Leases and the Secrets
	// LockBackends name.
	Namespace string
	// Registry adds options to the backend registry (factories, wrappers); Secrets are read in
	// Namespace and calls are instrumented whatever these say.
	Registry []registry.Option
	// QPS and Burst limit the manager's API client as --kube-api-qps and --kube-api-burst do: a
	// QPS of zero sets no client-side limit, the manager's default.
	QPS   float32
	Burst int
	// Workers bounds parallel claim reconciles (default 4).
	Workers int
	// ProbeInterval overrides the LockBackend probe interval (default 30 s).
	ProbeInterval time.Duration
	// Restartable allows several managers in one process, one after the other, as a restarted
	// controller (controller names are registered again).
	Restartable bool
	// Clock is the controller's clock (reconcilers, Renewer and built-in backend); default the
	// real clock.
	Clock clock.Clock
	// LeaderElectionNamespace, when set, turns on leader election with its Lease there, as
	// --leader-elect and --leader-election-namespace do, with cmd/manager's defaults: the same
	// Lease name and timings, and the Lease given up on Stop. (The leader guard is left out: it
	// sends no request, and on a loaded test machine a long pause would stop the manager.)
	LeaderElectionNamespace string
	// WorkloadKinds are the workload kinds whose objects may hold locks, as --workload-kinds
	// spells them; empty: the manager's default (Jobs).
	WorkloadKinds string
	// SkipClaimRights makes the claims of annotated pods and workloads whatever their service
	// accounts may do (--check-claim-rights=false); by default an account needs the right to
	// create LockClaims (rbacenv.AllowClaims grants it to a namespace's accounts).
	SkipClaimRights bool
	// Queue is how the work queues hand out work (the fairness benchmark compares them).
	Queue fairqueue.Options
	// ControllersStartAfter holds back the start of every controller (not the Renewer, the
	// session bridge or other runnables) by this long once the manager leads, as on a large
	// cluster a new leader's controllers wait until their caches have seen every object.
	ControllersStartAfter time.Duration
	// Tracer, when set, sees the moments of each handoff inside the lock engine (test/bench).
	Tracer lockengine.Tracer
}

// Manager is a lockwarden manager running in this process.
type Manager struct {
	// Metrics are the manager's metrics, on a registry of their own.
	Metrics *metrics.Metrics
	cancel  context.CancelFunc
	done    chan error
}

// StartManager runs a manager against cfg until Stop.
func StartManager(cfg *rest.Config, o ManagerOptions) (*Manager, error) {
	mcfg := rest.CopyConfig(cfg)
	mcfg.QPS, mcfg.Burst = -1, o.Burst // client-go throttles only at a positive QPS
	if o.QPS > 0 {
		mcfg.QPS = o.QPS
	}
	scheme := Scheme()
	if o.WorkloadKinds == "" {
		o.WorkloadKinds = workloads.DefaultKinds
	}
	kinds, err := workloads.Parse(o.WorkloadKinds)
	if err != nil {
		return nil, err
	}
	opts := ctrl.Options{Scheme: scheme, Cache: controller.CacheOptions(kinds), NewCache: controller.NewCache, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	if o.Restartable {
		opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	}
	if o.LeaderElectionNamespace != "" {
		opts.LeaderElection, opts.LeaderElectionNamespace = true, o.LeaderElectionNamespace
		opts.LeaderElectionID = "lockwarden.locks.lockwarden.io"
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = ptr.To(15*time.Second), ptr.To(10*time.Second), ptr.To(2*time.Second)
		opts.LeaderElectionReleaseOnCancel = true
	}
	mgr, err := ctrl.NewManager(mcfg, opts)
	if err != nil {
		return nil, err
	}
	// The built-in backend reads its session Lease uncached, as in cmd/manager.
	direct, err := client.New(mcfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	var builtinOpts []kubernetesbackend.Option
	if o.Clock != nil {
		builtinOpts = append(builtinOpts, kubernetesbackend.WithClock(o.Clock))
	}
	builtin, err := kubernetesbackend.NewRecords(kubernetesbackend.Config{Client: direct, Namespace: o.Namespace}, builtinOpts...)
	if err != nil {
		return nil, err
	}
	var metricsOpts []metrics.Option
	if o.Clock != nil {
		metricsOpts = append(metricsOpts, metrics.WithClock(o.Clock))
	}
	m := metrics.New(mgr.GetCache(), metricsOpts...)
	if err := m.Register(prometheus.NewRegistry()); err != nil {
		return nil, err
	}
	regOpts := append([]registry.Option{
		registry.WithSecrets(registry.NamespacedSecrets{Reader: mgr.GetAPIReader(), Namespace: o.Namespace}),
		registry.WithWrapper(m.Instrument),
	}, o.Registry...)
	setupMgr := mgr
	if o.ControllersStartAfter > 0 {
		setupMgr = lateControllers{Manager: mgr, after: o.ControllersStartAfter}
	}
	err = controller.Setup(setupMgr, controller.Options{Registry: registry.New(builtin, regOpts...), Metrics: m,
		ProbeInterval: o.ProbeInterval, MaxConcurrentReconciles: o.Workers, Clock: o.Clock, Namespace: o.Namespace,
		Workloads: kinds, Tracer: o.Tracer, SkipClaimRights: o.SkipClaimRights, Queue: o.Queue})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return &Manager{Metrics: m, cancel: cancel, done: done}, nil
}

// lateControllers is a manager whose controllers start late (ManagerOptions.ControllersStartAfter).
type lateControllers struct {
	manager.Manager
	after time.Duration
}

// Add holds back the start of a controller; other runnables are added as they are.
func (m lateControllers) Add(r manager.Runnable) error {
	if c, ok := r.(ctrlcontroller.Controller); ok {
		return m.Manager.Add(lateController{Controller: c, after: m.after})
	}
	return m.Manager.Add(r)
}

// lateController starts its controller a while after the manager starts it.
type lateController struct {
	ctrlcontroller.Controller
	after time.Duration
}

// NeedLeaderElection implements manager.LeaderElectionRunnable, as controllers do: the delay
// counts from the moment the manager leads.
func (c lateController) NeedLeaderElection() bool { return true }

// Start waits, then runs the controller.
func (c lateController) Start(ctx context.Context) error {
	t := time.NewTimer(c.after)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-t.C:
	}
	return c.Controller.Start(ctx)
}

// Stop stops the manager and waits for it; the error is what Start returned.
func (m *Manager) Stop() error {
	m.cancel()
	return <-m.done
}
