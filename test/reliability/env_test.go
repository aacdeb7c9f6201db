//go:build reliability

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

package reliability

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/faultproxy"
	"github.com/lockwarden/lockwarden/internal/testutil/proc"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

// controllerNamespace holds the managers' leader-election Lease and the built-in backend's
// session.
const controllerNamespace = "lockwarden-system"

// electionNamespace holds the managers' leader-election Lease, apart from controllerNamespace so
// that neither of the shipped Roles' Lease rules can pass for the other's.
const electionNamespace = "lockwarden-election"

// managerAccount is the ServiceAccount the managers act as (impersonated through their
// kubeconfigs), bound to the RBAC of config/rbac, which the chart's templates match rule for rule
// (charts/chart_test.go): a code path that needs a verb the shipped RBAC lacks is refused, and the
// rbac checker fails the scenario, instead of passing as an admin would.
var managerAccount = rbacenv.Account{Name: "lockwarden", Namespace: controllerNamespace, ElectionNamespace: electionNamespace}

// env is the control plane shared by every scenario: a real kube-apiserver and etcd (envtest),
// the CRDs, a direct client for the harness (the claimants' side, never faulted) and the manager
// binary built from ./cmd/manager.
type env struct {
	cfg     *rest.Config
	scheme  *runtime.Scheme
	c       client.WithWatch
	manager string // path of the built manager binary (test clock, failpoints)
	dir     string // scratch directory: kubeconfigs, manager logs
	audit   string // the API server's audit log (AuditPolicy, JSON lines)
	// apiserver and etcd are the processes envtest started (found among this process's
	// children), which faults under the API server pause, or kill and start again.
	apiserver, etcd *controlPlaneProc
	// registry is a client of the API server's etcd, where the harness reads the built-in
	// backend's records below the API server (registryReader).
	registry *clientv3.Client

	sched scheduler // the kube-scheduler of gated runs, started on first use

	lockctl, lockctlMutants builtOnce // lockctl, built on first use (commands runs), and with the mutants tag

	mutantOnce sync.Once
	mutantBin  string // the same with the deliberate bugs of internal/mutant, built on first use
	mutantErr  error
}

// registryReader reads the built-in backend's records in the API server's etcd.
func (e *env) registryReader() registryReader {
	return registryReader{etcd: e.registry, leases: newLeaseDecoder(e.scheme)}
}

func startEnv(t *testing.T) *env {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run through hack/test-reliability.sh")
	}
	// Manager logs and kubeconfigs go to a directory that outlives a failed run, so that the
	// paths printed with a failure can still be read; a run that passed removes it.
	dir, err := os.MkdirTemp("", "lockwarden-reliability-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	e := &env{scheme: runtime.NewScheme(), dir: dir}
	if err := clientgoscheme.AddToScheme(e.scheme); err != nil {
		t.Fatal(err)
	}
	if err := locksv1alpha1.AddToScheme(e.scheme); err != nil {
		t.Fatal(err)
	}

	// LOCKWARDEN_MANAGER may name a prebuilt manager binary; by default it is built here.
	e.manager = os.Getenv("LOCKWARDEN_MANAGER")
	if e.manager == "" {
		e.manager = filepath.Join(e.dir, "manager")
		if err := buildManager(e.manager, managerTags); err != nil {
			t.Fatal(err)
		}
	}

	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	policy := filepath.Join(e.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(AuditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	e.audit = filepath.Join(e.dir, "audit.log")
	// The log backend writes each event before the response goes out (blocking mode), so a
	// write the harness has seen answered is already in the file.
	te.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).Set("audit-log-path", e.audit).Set("audit-log-format", "json").
		Set("audit-log-mode", "blocking").Set("audit-log-maxsize", "0")
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	e.cfg = cfg
	t.Cleanup(e.sched.stop) // before envtest stops its API server (cleanups run last first)
	// Before any backend server starts: the only etcd child now is the API server's.
	apiservers, etcds := proc.ChildrenNamed("kube-apiserver"), proc.ChildrenNamed("etcd")
	if len(apiservers) != 1 || len(etcds) != 1 {
		t.Fatalf("envtest's processes: kube-apiserver %v, etcd %v; want one of each", apiservers, etcds)
	}
	if e.apiserver, err = adoptControlPlaneProc("kube-apiserver", apiservers[0], filepath.Join(e.dir, "kube-apiserver.log")); err != nil {
		t.Fatal(err)
	}
	if e.etcd, err = adoptControlPlaneProc("etcd", etcds[0], filepath.Join(e.dir, "apiserver-etcd.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A fault cut short by a failure must not leave the control plane stopped for envtest's
		// own shutdown; the processes a fault restarted are the harness's to stop, the API
		// server before its etcd.
		_ = e.apiserver.signal(syscall.SIGCONT)
		_ = e.etcd.signal(syscall.SIGCONT)
		if e.etcd.restartedByHarness() && !e.apiserver.restartedByHarness() {
			// envtest would stop its API server after the etcd below is gone, and wait for a
			// graceful shutdown that cannot finish.
			_ = e.apiserver.kill()
		}
		for _, p := range []*controlPlaneProc{e.apiserver, e.etcd} {
			if err := p.stopRestarted(); err != nil {
				t.Error(err)
			}
		}
	})
	e.registry, err = clientv3.New(clientv3.Config{Endpoints: []string{te.ControlPlane.Etcd.URL.String()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.registry.Close() })
	if e.c, err = client.NewWithWatch(cfg, client.Options{Scheme: e.scheme}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}}); err != nil {
		t.Fatal(err)
	}
	objs, grants, err := rbacenv.Load(filepath.Join("..", "..", "config", "rbac"), managerAccount)
	if err != nil {
		t.Fatal(err)
	}
	if err := rbacenv.Install(context.Background(), e.c, managerAccount, objs, grants); err != nil {
		t.Fatal(err)
	}
	return e
}

// managerTags are the build tags of the manager under test: testclock gives it a clock the
// clock-jump faults can step (through LOCKWARDEN_TEST_CLOCK_OFFSET_FILE), failpoints the pause
// points a deposed-leader fault stops it at (through LOCKWARDEN_FAILPOINT_FILE). Neither changes
// what it does unless those files say so.
const managerTags = "testclock,failpoints"

func buildManager(out, tags string) error {
	build := exec.Command("go", "build", "-tags", tags, "-o", out, "./cmd/manager")
	build.Dir = filepath.Join("..", "..")
	if msg, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the manager with tags %s: %v\n%s", tags, err, msg)
	}
	return nil
}

// mutantManager returns the manager built with the mutants tag as well (internal/mutant).
func (e *env) mutantManager() (string, error) {
	e.mutantOnce.Do(func() {
		e.mutantBin = filepath.Join(e.dir, "manager-mutants")
		e.mutantErr = buildManager(e.mutantBin, managerTags+",mutants")
	})
	return e.mutantBin, e.mutantErr
}

// apiAddr is the API server's host:port.
func (e *env) apiAddr() string {
	u, err := url.Parse(e.cfg.Host)
	if err != nil {
		panic(err)
	}
	return u.Host
}

// writeKubeconfig writes a kubeconfig that reaches the API server through addr (a fault proxy), as
// managerAccount.
// TLS passes through the proxy untouched; the serving certificate names 127.0.0.1, which is
// what the proxy listens on, so verification still holds.
func (e *env) writeKubeconfig(name, addr string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthorityData: e.cfg.CAData}
	// The envtest admin's credentials, impersonating the managers' ServiceAccount.
	kc.AuthInfos["manager"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.cfg.CertData, ClientKeyData: e.cfg.KeyData, Token: e.cfg.BearerToken,
		Impersonate: managerAccount.User(), ImpersonateGroups: managerAccount.Groups(),
		// The replicas share the ServiceAccount; the audit log tells them apart by this extra.
		ImpersonateUserExtra: map[string][]string{ReplicaExtra: {name}}}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "manager"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(e.dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// writeHolderKubeconfig writes a kubeconfig for a lockctl holder that reaches the API server
// through addr (its fault proxy) as account (the envtest admin's credentials, impersonating it).
func (e *env) writeHolderKubeconfig(name, addr string, account rbacenv.Account) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthorityData: e.cfg.CAData}
	kc.AuthInfos["holder"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.cfg.CertData, ClientKeyData: e.cfg.KeyData, Token: e.cfg.BearerToken,
		Impersonate: account.User(), ImpersonateGroups: account.Groups()}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "holder"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(e.dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// manager is one replica of the manager, run as a separate process that reaches the API server
// through its own fault proxy. A supervisor restarts it when it exits on its own (as a
// Deployment would, e.g. after "leader election lost"), but not while a fault holds it down.
type manager struct {
	name  string
	api   *faultproxy.Proxy
	p     *proc.Process
	log   string
	clock string // the offset file of the manager's test clock (a Go duration; absent: none)
	// failpoint is the file that arms a pause point (internal/failpoint) and tells where the
	// manager stopped.
	failpoint string

	mu       sync.Mutex
	down     bool      // a fault killed it; the fault's heal restarts it
	paused   bool      // SIGSTOPped by a fault
	logStart int64     // size of the log when the current run started
	exited   time.Time // when the supervisor last saw a run exit on its own
	restarts int
	stop     chan struct{}
	done     chan struct{}
}

// startManager starts one replica; a non-empty mutant runs the mutants build with that bug on.
func (e *env) startManager(t *testing.T, name, mutant string) *manager {
	t.Helper()
	api, err := faultproxy.New(e.apiAddr())
	if err != nil {
		t.Fatal(err)
	}
	kc, err := e.writeKubeconfig(name, api.Addr())
	if err != nil {
		t.Fatal(err)
	}
	m := &manager{name: name, api: api, log: filepath.Join(e.dir, name+".log"), clock: filepath.Join(e.dir, name+".clock"),
		failpoint: filepath.Join(e.dir, name+".failpoint"), stop: make(chan struct{}), done: make(chan struct{})}
	bin, env := e.manager, append(os.Environ(), "LOCKWARDEN_TEST_CLOCK_OFFSET_FILE="+m.clock, "LOCKWARDEN_FAILPOINT_FILE="+m.failpoint)
	if mutant != "" {
		if bin, err = e.mutantManager(); err != nil {
			t.Fatal(err)
		}
		env = append(env, "LOCKWARDEN_MUTANT="+mutant)
	}
	m.p, err = proc.Start(proc.Spec{
		Name: name, Path: bin, LogFile: m.log,
		Env: env,
		Args: []string{"--kubeconfig", kc, "--leader-elect",
			"--leader-election-namespace", electionNamespace, "--secret-namespace", controllerNamespace,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	go m.supervise()
	return m
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (m *manager) supervise() {
	defer close(m.done)
	for {
		exited := m.p.Exited()
		if exited == nil {
			select {
			case <-m.stop:
				return
			case <-time.After(200 * time.Millisecond):
				continue
			}
		}
		select {
		case <-m.stop:
			return
		case <-exited:
		}
		m.mu.Lock()
		m.exited = time.Now()
		m.mu.Unlock()
		select { // restart back-off
		case <-m.stop:
			return
		case <-time.After(time.Second):
		}
		m.mu.Lock()
		if !m.down {
			_ = m.p.Kill() // reaps the exited run so that Restart may run it again
			m.logStart = fileSize(m.log)
			if err := m.p.Restart(); err == nil {
				m.restarts++
			}
		}
		m.mu.Unlock()
	}
}

// isLeader says whether the current run of the manager has logged that it acquired the
// leader-election lease.
func (m *manager) isLeader() bool {
	m.mu.Lock()
	start, down := m.logStart, m.down
	m.mu.Unlock()
	if down || m.p.PID() == 0 {
		return false
	}
	data, err := os.ReadFile(m.log)
	if err != nil || int64(len(data)) < start {
		return false
	}
	return strings.Contains(string(data[start:]), "Successfully acquired lease")
}

// kill SIGKILLs the manager and keeps it down until restart.
func (m *manager) kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = true
	return m.p.Kill()
}

// restart starts a killed manager again.
func (m *manager) restart() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = false
	_ = m.p.Kill()
	m.logStart = fileSize(m.log)
	m.restarts++
	return m.p.Restart()
}

// pause and resume SIGSTOP and SIGCONT the manager.
func (m *manager) pause() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = true
	return m.p.Signal(syscall.SIGSTOP)
}

func (m *manager) resume() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = false
	if m.p.PID() == 0 {
		return nil
	}
	return m.p.Signal(syscall.SIGCONT)
}

// shutdown stops the supervisor and the process (SIGTERM, then SIGKILL) and closes its proxy.
func (m *manager) shutdown() {
	close(m.stop)
	<-m.done
	_ = m.p.Signal(syscall.SIGCONT)
	_ = m.p.Stop(10 * time.Second)
	_ = m.api.Close()
}

// waitLeader waits until one of managers is the leader and returns it.
func waitLeader(ctx context.Context, managers []*manager, timeout time.Duration) (*manager, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, m := range managers {
			if m.isLeader() {
				return m, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("no manager became leader within %s", timeout)
}

// jumpClock steps the manager's clock to real time + offset (0 puts it back).
func (m *manager) jumpClock(offset time.Duration) error {
	return os.WriteFile(m.clock, []byte(offset.String()), 0o644)
}

// armFailpoint arms pause point p: the manager stops itself the next time it gets there.
func (m *manager) armFailpoint(p string) error { return os.WriteFile(m.failpoint, []byte(p), 0o644) }

// disarmFailpoint clears the pause point file.
func (m *manager) disarmFailpoint() { _ = os.Remove(m.failpoint) }

// stoppedAt says where the manager stopped itself ("" while it has not): the detail its pause
// point reported, e.g. the claim whose grant it was about to write.
func (m *manager) stoppedAt() string {
	b, err := os.ReadFile(m.failpoint)
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(b))
	if len(fields) < 3 || fields[0] != "stopped" {
		return ""
	}
	return fields[2]
}

// markStopped records that the manager is stopped (by its own failpoint), so that resume sends
// SIGCONT.
func (m *manager) markStopped() {
	m.mu.Lock()
	m.paused = true
	m.mu.Unlock()
}

// logSince returns what the manager logged from byte offset off on.
func (m *manager) logSince(off int64) string {
	data, err := os.ReadFile(m.log)
	if err != nil || int64(len(data)) < off {
		return ""
	}
	return string(data[off:])
}

// exitedSince returns when the supervisor saw a run of the manager exit on its own after t, or
// the zero time if none has.
func (m *manager) exitedSince(t time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.exited.After(t) {
		return m.exited
	}
	return time.Time{}
}

// logSize is the manager log's current size, an offset for logSince.
func (m *manager) logSize() int64 { return fileSize(m.log) }
