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
)

// controllerNamespace holds the managers' leader-election Lease and the built-in backend's
// session.
const controllerNamespace = "lockwarden-system"

// env is the control plane shared by every scenario: a real kube-apiserver and etcd (envtest),
// the CRDs, a direct client for the harness (the claimants' side, never faulted) and the manager
// binary built from ./cmd/manager.
type env struct {
	cfg     *rest.Config
	scheme  *runtime.Scheme
	c       client.WithWatch
	manager string // path of the built manager binary
	dir     string // scratch directory: kubeconfigs, manager logs
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
		// The testclock tag gives the manager a clock the clock-jump faults can step, through
		// the file named by LOCKWARDEN_TEST_CLOCK_OFFSET_FILE.
		build := exec.Command("go", "build", "-tags", "testclock", "-o", e.manager, "./cmd/manager")
		build.Dir = filepath.Join("..", "..")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the manager: %v\n%s", err, out)
		}
	}

	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
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
	if e.c, err = client.NewWithWatch(cfg, client.Options{Scheme: e.scheme}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}}); err != nil {
		t.Fatal(err)
	}
	return e
}

// apiAddr is the API server's host:port.
func (e *env) apiAddr() string {
	u, err := url.Parse(e.cfg.Host)
	if err != nil {
		panic(err)
	}
	return u.Host
}

// writeKubeconfig writes a kubeconfig that reaches the API server through addr (a fault proxy).
// TLS passes through the proxy untouched; the serving certificate names 127.0.0.1, which is
// what the proxy listens on, so verification still holds.
func (e *env) writeKubeconfig(name, addr string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthorityData: e.cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.cfg.CertData, ClientKeyData: e.cfg.KeyData, Token: e.cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
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
	runID int    // bumped by every (re)start

	mu       sync.Mutex
	down     bool  // a fault killed it; the fault's heal restarts it
	paused   bool  // SIGSTOPped by a fault
	logStart int64 // size of the log when the current run started
	restarts int
	stop     chan struct{}
	done     chan struct{}
}

func (e *env) startManager(t *testing.T, name string) *manager {
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
		stop: make(chan struct{}), done: make(chan struct{})}
	m.p, err = proc.Start(proc.Spec{
		Name: name, Path: e.manager, LogFile: m.log,
		Env: append(os.Environ(), "LOCKWARDEN_TEST_CLOCK_OFFSET_FILE="+m.clock),
		Args: []string{"--kubeconfig", kc, "--leader-elect",
			"--leader-election-namespace", controllerNamespace, "--secret-namespace", controllerNamespace,
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
