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

// Command manager runs the lockwarden controller. It only wires things together: flags, scheme,
// the controller-runtime manager with leader election, health and ready probes, and metrics.
// --version prints the build (internal/version) and exits.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubeconfig auth plugins (OIDC, exec)
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/apirequests"
	etcdbackend "github.com/lockwarden/lockwarden/internal/backends/etcd"
	kubernetesbackend "github.com/lockwarden/lockwarden/internal/backends/kubernetes"
	redisbackend "github.com/lockwarden/lockwarden/internal/backends/redis"
	redlockbackend "github.com/lockwarden/lockwarden/internal/backends/redlock"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	sqlbackend "github.com/lockwarden/lockwarden/internal/backends/sql"
	zookeeperbackend "github.com/lockwarden/lockwarden/internal/backends/zookeeper"
	"github.com/lockwarden/lockwarden/internal/controller"
	"github.com/lockwarden/lockwarden/internal/fairqueue"
	"github.com/lockwarden/lockwarden/internal/leaderguard"
	"github.com/lockwarden/lockwarden/internal/memlimit"
	"github.com/lockwarden/lockwarden/internal/metrics"
	"github.com/lockwarden/lockwarden/internal/version"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// defaultClaimWorkers is --claim-workers' default. A lock pass mostly waits for the API server to
// answer its writes, so the workers bound the manager's write rate: at 1,000 held locks on a 10 s
// lease, 4 workers (the earlier default) could not keep the claims' expireTime refreshed once the
// API server took 35 ms a write, and 16 could (docs/scale.md, make bench-scale -workers).
const defaultClaimWorkers = 16

// defaultGCPercent is --gc-percent's default. At 10,000 pods and their claims the manager's live
// heap is about 40 MB, nearly all of it caches that live as long as the process: at Go's default
// of 100 the heap in use reached 113 MiB, at 50 78 MiB, with the collector's CPU under churn
// about the same (docs/scale.md, make bench-scale).
const defaultGCPercent = 50

// options are the manager's command-line flags.
type options struct {
	metricsAddr      string
	metricsSecure    bool
	metricsCertPath  string
	metricsCertName  string
	metricsCertKey   string
	enableHTTP2      bool
	probeAddr        string
	pprofAddr        string
	apiRequestCounts bool
	leaderElect      bool
	leaderElectionID string
	leaderElectionNS string
	leaseDuration    time.Duration
	renewDeadline    time.Duration
	retryPeriod      time.Duration
	secretNamespace  string
	sessionName      string
	qps              float64
	burst            int
	workers          int
	namespaceWorkers int
	namespaceRate    float64
	memLimitRatio    float64
	gcPercent        int
	workloadKinds    string
	workloads        *workloads.Registry
	checkClaimRights bool
	printVersion     bool
	zap              zap.Options
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(2)
	}
	if opts.printVersion {
		fmt.Println("lockwarden manager", version.Get())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.zap)))
	if err := checkMutants(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(2)
	}
	if err := run(opts); err != nil {
		ctrl.Log.WithName("setup").Error(err, "Manager stopped")
		os.Exit(1)
	}
}

// parseFlags reads the command line and rejects combinations the manager cannot run with.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("manager", flag.ExitOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443",
		"Address the metrics endpoint (/metrics) binds to, e.g. :8443; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS to clients that send a bearer token the API server accepts (TokenReview) "+
			"and that may get the non-resource URL /metrics (SubjectAccessReview; the metrics-reader ClusterRole grants it). "+
			"--metrics-secure=false serves plain HTTP to anyone who reaches the address: for local runs on a loopback address only.")
	fs.StringVar(&o.metricsCertPath, "metrics-cert-path", "",
		"Directory with the metrics endpoint's TLS certificate and key (see --metrics-cert-name and --metrics-cert-key), "+
			"reloaded when they change; empty: a self-signed certificate generated at start.")
	fs.StringVar(&o.metricsCertName, "metrics-cert-name", "tls.crt",
		"File name of the metrics endpoint's certificate in --metrics-cert-path.")
	fs.StringVar(&o.metricsCertKey, "metrics-cert-key", "tls.key",
		"File name of the metrics endpoint's private key in --metrics-cert-path.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Allow HTTP/2 on the metrics server (off by default: CVE-2023-44487 and CVE-2023-39325).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0",
		"Address Go's /debug/pprof profiling endpoints bind to, e.g. 127.0.0.1:6060; 0 (the default) disables them. "+
			"They are served over plain HTTP without authentication and reveal the process's memory: bind them to loopback only.")
	fs.BoolVar(&o.apiRequestCounts, "api-request-metrics", false,
		"Count every request this process sends to the API server by verb, resource, subresource and status code, "+
			"in the metric lockwarden_api_requests_total (for benchmarks and write-budget checks; make bench-scale turns it on).")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader so that only one replica grants and renews locks.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "lockwarden.locks.lockwarden.io",
		"Name of the Lease used for leader election.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "",
		"Namespace of the leader election Lease; defaults to --secret-namespace.")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second,
		"How long a standby waits after the leader's last renewal before it takes over. Keep it below every lock's leaseDurationSeconds, so that a failover loses no held lock.")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second,
		"How long the leader keeps trying to renew its Lease before it steps down (and the process exits).")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second,
		"How often candidates try to acquire or renew the leader Lease.")
	fs.StringVar(&o.secretNamespace, "secret-namespace", defaultNamespace(),
		"The only namespace in which the controller reads Secrets named by LockBackends; defaults to its own namespace.")
	fs.StringVar(&o.sessionName, "session-name", "lockwarden-session",
		"Name of the Lease in --secret-namespace through which the built-in backend renews every lock it holds.")
	fs.Float64Var(&o.qps, "kube-api-qps", 0,
		"Queries per second the controller may send to the API server; 0 sets no client-side limit, leaving it to the API server's priority and fairness.")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "Burst of queries to the API server above --kube-api-qps, when that is set.")
	fs.IntVar(&o.workers, "claim-workers", defaultClaimWorkers, "Locks served in parallel (each lock by one worker at a time), as many refreshes of held claims' status.expireTime besides, and pods reconciled in parallel.")
	fs.IntVar(&o.namespaceWorkers, "namespace-workers", 0,
		"Most locks (and, in their controllers, pods and workload objects) of one namespace served at once, so that a namespace with a backlog "+
			"leaves workers and API server capacity to the others (docs/scale.md, \"Fairness between namespaces\"); 0 sets no bound beyond --claim-workers.")
	fs.Float64Var(&o.namespaceRate, "namespace-rate", 0,
		"Most passes of one namespace's locks (and, in their controllers, pods and workload objects) begun per second, with bursts of a second's worth, "+
			"so that a namespace in churn keeps its load on the API server below what the server can answer for the others "+
			"(docs/scale.md, \"Fairness between namespaces\"); 0 sets no bound.")
	fs.Float64Var(&o.memLimitRatio, "memory-limit-ratio", 0.9,
		"Set Go's soft memory limit to this share of the container's memory limit (read from its cgroup), so that the garbage collector "+
			"works harder before the kernel would kill the process; 0 leaves it unset. GOMEMLIMIT in the environment takes precedence.")
	fs.IntVar(&o.gcPercent, "gc-percent", defaultGCPercent,
		"The garbage collector's target: how far, in percent, the heap may grow past the live heap (mostly the informers' caches) before "+
			"the next collection, as GOGC sets it; lower keeps the heap smaller for more frequent collections. GOGC in the environment takes precedence.")
	fs.StringVar(&o.workloadKinds, "workload-kinds", workloads.DefaultKinds,
		"Workload kinds whose objects may hold locks (a LockClaim's spec.holder.object, the lock annotation on the object), comma-separated "+
			"group/version/Kind: batch/v1/Job, tekton.dev/v1/PipelineRun, tekton.dev/v1/TaskRun, argoproj.io/v1alpha1/Workflow, or any other kind, "+
			"which then holds until it is deleted. The controller watches each (it needs get, list and watch on them, and patch to resume suspended ones); "+
			"a claim naming a kind not listed fails with reason WorkloadKindNotWatched. Empty: none.")
	fs.BoolVar(&o.checkClaimRights, "check-claim-rights", true,
		"Make the claim that an annotated pod or workload asks for only when the service account it (or its pods) runs as may create LockClaims "+
			"in its namespace (a SubjectAccessReview; answers are kept 10 s), so that the annotation gives no one a lock their RBAC does not; "+
			"a refused pod or workload gets a Warning event ClaimNotAllowed. false makes the claim for whoever may create the pod or workload.")
	fs.BoolVar(&o.printVersion, "version", false, "Print the version, git commit and Go version, and exit.")
	config.RegisterFlags(fs) // --kubeconfig, read by ctrl.GetConfig
	o.zap.BindFlags(fs)
	_ = fs.Parse(args) // ExitOnError: Parse exits on a bad flag
	if o.printVersion {
		return o, nil
	}
	if o.leaderElectionNS == "" {
		o.leaderElectionNS = o.secretNamespace
	}
	var err error
	if o.workloads, err = workloads.Parse(o.workloadKinds); err != nil {
		return o, fmt.Errorf("--workload-kinds: %w", err)
	}
	// client-go's leader election refuses other orders, with a less helpful message and only
	// once the manager starts.
	switch {
	case o.retryPeriod <= 0:
		return o, fmt.Errorf("--leader-election-retry-period must be positive, got %s", o.retryPeriod)
	case o.renewDeadline <= o.retryPeriod*6/5:
		return o, fmt.Errorf("--leader-election-renew-deadline (%s) must be longer than 1.2 × --leader-election-retry-period (%s)", o.renewDeadline, o.retryPeriod)
	case o.leaseDuration <= o.renewDeadline:
		return o, fmt.Errorf("--leader-election-lease-duration (%s) must be longer than --leader-election-renew-deadline (%s)", o.leaseDuration, o.renewDeadline)
	case o.memLimitRatio < 0 || o.memLimitRatio > 1:
		return o, fmt.Errorf("--memory-limit-ratio must be from 0 (off) to 1, got %v", o.memLimitRatio)
	case o.gcPercent < 10:
		// Go takes a negative value as "off", which a cache that only grows would not survive;
		// below 10 the collector would run nearly all the time.
		return o, fmt.Errorf("--gc-percent must be at least 10, got %d", o.gcPercent)
	case o.namespaceWorkers < 0:
		return o, fmt.Errorf("--namespace-workers must be 0 (no bound) or more, got %d", o.namespaceWorkers)
	case o.namespaceRate < 0 || math.IsNaN(o.namespaceRate) || math.IsInf(o.namespaceRate, 0):
		return o, fmt.Errorf("--namespace-rate must be 0 (no bound) or a positive number of passes per second, got %v", o.namespaceRate)
	case o.metricsCertPath != "" && !o.metricsSecure:
		// A certificate for a server that speaks plain HTTP is a mistake worth stopping for: the
		// operator expects the endpoint to be protected.
		return o, fmt.Errorf("--metrics-cert-path needs --metrics-secure: plain HTTP uses no certificate")
	}
	return o, nil
}

// defaultNamespace is the controller's own namespace: POD_NAMESPACE from the downward API,
// else the service account's namespace file, else lockwarden-system.
func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(b) > 0 {
		return string(b)
	}
	return "lockwarden-system"
}

// newScheme has the Kubernetes types and lockwarden's.
func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(locksv1alpha1.AddToScheme(scheme))
	return scheme
}

// run starts the manager with its controllers and blocks until a signal stops it.
func run(o options) error {
	setupLog := ctrl.Log.WithName("setup")
	setupLog.Info("Go memory limit", "setting", memlimit.Apply(o.memLimitRatio))
	setupLog.Info("Go collector target", "setting", memlimit.SetGCPercent(o.gcPercent))

	scheme := newScheme()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no Kubernetes config (set --kubeconfig or KUBECONFIG, or run in a pod): %w", err)
	}
	cfg.QPS, cfg.Burst = clientQPS(o.qps), o.burst
	if o.apiRequestCounts {
		// Before any client is built from cfg, so that every one of them is counted.
		counter := apirequests.New()
		if err := counter.Register(ctrlmetrics.Registry); err != nil {
			return fmt.Errorf("registering %s: %w", apirequests.MetricName, err)
		}
		cfg.Wrap(counter.Wrap)
	}

	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), setupLog)
	// Checked before the manager starts: in a namespace that does not exist the manager would run,
	// log a reconciler error for every claim and grant nothing.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating API client: %w", err)
	}
	if err := checkNamespaces(ctx, direct, o); err != nil {
		return err
	}

	mgr, err := newManager(cfg, scheme, o)
	if err != nil {
		return err
	}
	if err := setupControllers(mgr, cfg, scheme, o); err != nil {
		return err
	}

	if !o.metricsSecure && o.metricsAddr != "0" {
		setupLog.Info("Serving metrics over plain HTTP to anyone who reaches the address (--metrics-secure=false)", "address", o.metricsAddr)
	}
	info := version.Get()
	setupLog.Info("Starting manager", "version", info.Version, "commit", info.Commit,
		"secretNamespace", o.secretNamespace, "leaderElect", o.leaderElect)
	return mgr.Start(ctx)
}

// newManager creates the controller-runtime manager with the metrics server, the health and
// ready probes and leader election as the flags say, and no controllers yet.
func newManager(cfg *rest.Config, scheme *runtime.Scheme, o options) (ctrl.Manager, error) {
	metricsOpts, certWatcher, err := metricsServerOptions(o)
	if err != nil {
		return nil, err
	}
	// The election's lock is built after the manager, whose event recorder it needs, and checks
	// a release against the record it has just read (leaderguard.ReleaseCheckedLock).
	var electionLock *leaderguard.ReleaseCheckedLock
	if o.leaderElect {
		electionLock = &leaderguard.ReleaseCheckedLock{}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controller.CacheOptions(o.workloads),
		NewCache:                controller.NewCache,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderElectionID,
		LeaderElectionNamespace: o.leaderElectionNS,
		LeaseDuration:           &o.leaseDuration,
		RenewDeadline:           &o.renewDeadline,
		RetryPeriod:             &o.retryPeriod,
		// The process exits right after the manager stops, so giving up the Lease at once lets a
		// standby replica take over without waiting for it to expire.
		LeaderElectionReleaseOnCancel:       true,
		LeaderElectionResourceLockInterface: resourceLockOrNil(electionLock),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if electionLock != nil {
		inner, err := leaderelection.NewResourceLock(cfg, mgr, leaderelection.Options{
			LeaderElection: true, LeaderElectionID: o.leaderElectionID, LeaderElectionNamespace: o.leaderElectionNS,
			RenewDeadline: o.renewDeadline,
		})
		if err != nil {
			return nil, fmt.Errorf("creating the leader election lock: %w", err)
		}
		electionLock.Bind(inner)
	}
	if certWatcher != nil {
		// The watcher reloads the certificate when its files change (a renewed Secret), on every
		// replica: the metrics server does not wait for leader election.
		if err := mgr.Add(certWatcher); err != nil {
			return nil, fmt.Errorf("adding the metrics certificate watcher: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding ready check: %w", err)
	}
	return mgr, nil
}

// resourceLockOrNil is l as the manager's option: a nil interface, not a typed nil, when there is
// no leader election.
func resourceLockOrNil(l *leaderguard.ReleaseCheckedLock) resourcelock.Interface {
	if l == nil {
		return nil
	}
	return l
}

// setupControllers builds the built-in backend, the metrics and the backend registry, and hands
// them to controller.Setup, which adds the five reconcilers (DistributedLock, pod lock, workload
// lock, holder eviction, LockBackend) and the two lanes beside them (the Renewer and the refresh
// lane) to the manager.
func setupControllers(mgr ctrl.Manager, cfg *rest.Config, scheme *runtime.Scheme, o options) error {
	// The built-in backend must read straight from the API server: a cache could show a lock as
	// free after someone else took it.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating API client: %w", err)
	}
	clk, err := managerClock()
	if err != nil {
		return err
	}
	builtin, err := kubernetesbackend.NewRecords(kubernetesbackend.Config{
		Client: direct, Namespace: o.secretNamespace, SessionName: o.sessionName,
	}, kubernetesbackend.WithClock(clk))
	if err != nil {
		return fmt.Errorf("creating the built-in kubernetes backend: %w", err)
	}

	// The scrape-time gauges read the manager's informer cache, on every replica, and measure
	// ages with the controller's clock.
	m := metrics.New(mgr.GetCache(), metrics.WithClock(clk))
	if err := m.Register(ctrlmetrics.Registry); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if err := ctrlmetrics.Registry.Register(metrics.NewBuildInfo(version.Get())); err != nil {
		return fmt.Errorf("registering lockwarden_build_info: %w", err)
	}
	reg := registry.New(builtin,
		// Secrets are read uncached, one get per backend session, so that the controller needs
		// only get on Secrets in its namespace (config/rbac/namespace_role.yaml), not list and
		// watch, and holds no copy of the namespace's other Secrets.
		registry.WithSecrets(registry.NamespacedSecrets{Reader: mgr.GetAPIReader(), Namespace: o.secretNamespace}),
		registry.WithFactory(locksv1alpha1.BackendRedis, redisbackend.NewFactory(redisbackend.WithClock(clk))),
		registry.WithFactory(locksv1alpha1.BackendRedlock, redlockbackend.NewFactory(redlockbackend.WithClock(clk))),
		registry.WithFactory(locksv1alpha1.BackendEtcd, etcdbackend.NewFactory(etcdbackend.WithClock(clk))),
		registry.WithFactory(locksv1alpha1.BackendZooKeeper, zookeeperbackend.NewFactory(zookeeperbackend.WithClock(clk))),
		registry.WithFactory(locksv1alpha1.BackendSQL, sqlbackend.NewFactory(sqlbackend.WithClock(clk))),
		registry.WithWrapper(m.Instrument),
	)
	opts := controller.Options{Registry: reg, Metrics: m, MaxConcurrentReconciles: o.workers, Clock: clk, Namespace: o.secretNamespace,
		Workloads: o.workloads, SkipClaimRights: !o.checkClaimRights, Queue: fairqueue.Options{MaxPerNamespace: o.namespaceWorkers, NamespaceRate: o.namespaceRate}}
	if o.leaderElect {
		// A standby may take over once the lease has gone unrenewed for leaseDuration; the
		// leader gives up after renewDeadline without a renewal. A stall longer than the
		// difference could outlast the lease while the leader's own election code has not yet
		// noticed: the guard ends the process first.
		opts.Guard = leaderguard.New(o.leaseDuration - o.renewDeadline)
	}
	return controller.Setup(mgr, opts)
}

// clientQPS is the rest.Config QPS for --kube-api-qps: client-go throttles only at a positive
// QPS, and reads zero as its own default of 5, so no limit is a negative QPS.
func clientQPS(flag float64) float32 {
	if flag <= 0 {
		return -1
	}
	return float32(flag)
}
