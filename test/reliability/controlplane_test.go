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
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// controlPlaneProc is one process of envtest's control plane (kube-apiserver or its etcd) that a
// fault under the API server stops, or kills and starts again. Envtest started it; a restart
// runs the same command line, environment and working directory (so the same ports,
// certificates and data directory) as a child of the harness, which stops it before envtest
// stops the rest.
type controlPlaneProc struct {
	name string
	argv []string
	env  []string
	dir  string
	logs string // where a restarted process writes its output

	mu        sync.Mutex
	pid       int
	restarted *exec.Cmd // nil while envtest's own process runs
	exited    chan struct{}
}

// adoptControlPlaneProc reads how process pid was started, from /proc.
func adoptControlPlaneProc(name string, pid int, logs string) (*controlPlaneProc, error) {
	base := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(base, "cmdline"))
	if err != nil {
		return nil, err
	}
	environ, err := os.ReadFile(filepath.Join(base, "environ"))
	if err != nil {
		return nil, err
	}
	dir, err := os.Readlink(filepath.Join(base, "cwd"))
	if err != nil {
		return nil, err
	}
	split := func(b []byte) []string {
		var out []string
		for _, f := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
			out = append(out, string(f))
		}
		return out
	}
	argv := split(cmdline)
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("%s (pid %d) has no command line", name, pid)
	}
	return &controlPlaneProc{name: name, argv: argv, env: split(environ), dir: dir, logs: logs, pid: pid}, nil
}

// PID is the process running now.
func (p *controlPlaneProc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

func (p *controlPlaneProc) signal(sig syscall.Signal) error {
	if err := syscall.Kill(p.PID(), sig); err != nil {
		return fmt.Errorf("%s (pid %d): %w", p.name, p.PID(), err)
	}
	return nil
}

// kill sends SIGKILL and waits until the process is gone (reaped by envtest or by the harness),
// so that its ports are free for a restart.
func (p *controlPlaneProc) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if exited != nil {
			select {
			case <-exited:
				return nil
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if syscall.Kill(p.PID(), 0) != nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s (pid %d) did not exit within 10 s of SIGKILL", p.name, p.PID())
}

// restart starts the process again as it was first started.
func (p *controlPlaneProc) restart() error {
	out, err := os.OpenFile(p.logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = p.env, p.dir, out, out
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return fmt.Errorf("restarting %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(exited)
	}()
	p.mu.Lock()
	p.pid, p.restarted, p.exited = cmd.Process.Pid, cmd, exited
	p.mu.Unlock()
	return nil
}

// restartedByHarness says whether the process running now is one the harness started.
func (p *controlPlaneProc) restartedByHarness() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarted != nil
}

// stopRestarted ends a process the harness restarted (SIGTERM, then SIGKILL after stopGrace), so
// that envtest, which stops only the processes it started, leaves nothing running.
func (p *controlPlaneProc) stopRestarted() error {
	p.mu.Lock()
	cmd, exited := p.restarted, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(stopGrace):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not stop within %v of SIGTERM", p.name, stopGrace)
	}
}

// stopGrace is how long a restarted control-plane process may take to stop after SIGTERM. A
// kube-apiserver lets its in-flight requests finish first, for up to its request timeout (60 s by
// default); 20 s was too short once, at the end of a full matrix (session 35: every scenario had
// passed, and the run failed in teardown).
const stopGrace = 70 * time.Second

// restartAPIServerCompacted performs an apiserver-restart fault: SIGKILL of kube-apiserver,
// then a compaction of its etcd at the latest revision, so that neither a new API server's watch
// cache nor etcd itself holds the history a resumed watch would ask for. It returns the heal,
// which starts the API server again and waits until it answers /readyz.
func restartAPIServerCompacted(t *testing.T, e *env) (heal func()) {
	t.Helper()
	// A resourceVersion every client may hold when the API server dies: after the restart a
	// watch from it must be answered 410 Gone, or the fault did not do what it is for.
	var before locksv1alpha1.LockClaimList
	if err := e.c.List(context.Background(), &before, client.Limit(1)); err != nil {
		t.Errorf("reading a resourceVersion before the restart: %v", err)
	}
	if err := e.apiserver.kill(); err != nil {
		t.Errorf("killing: %v", err)
		return func() {}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.registry.Get(ctx, "compact-probe", clientv3.WithCountOnly())
	if err == nil {
		_, err = e.registry.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	}
	if err != nil {
		t.Errorf("compacting the API server's etcd: %v", err)
	}
	return func() {
		if err := e.apiserver.restart(); err != nil {
			t.Error(err)
			return
		}
		if err := e.waitReady(60 * time.Second); err != nil {
			t.Errorf("the restarted kube-apiserver: %v", err)
			return
		}
		if err := e.expectGone(before.ResourceVersion); err != nil {
			t.Errorf("apiserver-restart did not expire the watch history: %v", err)
		}
	}
}

// expectGone watches LockClaims from resourceVersion rv and wants the API server's answer to be
// 410 Gone (an Expired error event, or the request refused so), within 10 s.
func (e *env) expectGone(rv string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := e.c.Watch(ctx, &locksv1alpha1.LockClaimList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("watch from resourceVersion %s: %w", rv, err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type != watch.Error {
			continue // events after rv: the history is still there, unless an error follows
		}
		if status, ok := ev.Object.(*metav1.Status); ok && status.Code == http.StatusGone {
			return nil
		}
		return fmt.Errorf("watch from resourceVersion %s ended with %v", rv, ev.Object)
	}
	return fmt.Errorf("a watch from resourceVersion %s, before the restart, was served without 410 Gone", rv)
}

// waitReady polls the API server's /readyz until it answers ok.
func (e *env) waitReady(within time.Duration) error {
	dc, err := discovery.NewDiscoveryClientForConfig(e.cfg)
	if err != nil {
		return err
	}
	rc := dc.RESTClient()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		body, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if err == nil && string(body) == "ok" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s: %v %s", within, err, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
