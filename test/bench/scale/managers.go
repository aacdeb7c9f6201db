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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockwarden/lockwarden/internal/testutil/proc"
)

const (
	// systemNS is the manager's namespace: its leader election Lease and the built-in backend's
	// session Lease live there.
	systemNS = "lockwarden-system"
	// electionID is the manager's default leader election Lease name (--leader-election-id).
	electionID = "lockwarden.locks.lockwarden.io"
)

// replica is one manager process, started from this tree's binary, with its metrics, probes and
// (when profiling) pprof on loopback ports.
type replica struct {
	name                             string
	p                                *proc.Process
	metricsAddr, probeAddr, pprofURL string
	// expected is the Exited channel of the run that the harness itself is ending, so that the
	// watcher does not count that exit as unexpected.
	mu       sync.Mutex
	expected <-chan struct{}
}

// expectExit marks the current run's exit as the harness's doing.
func (r *replica) expectExit() {
	r.mu.Lock()
	r.expected = r.p.Exited()
	r.mu.Unlock()
}

// managers are the two replicas under test.
type managers struct {
	replicas []*replica
	http     *http.Client
	// unexpected counts replica exits the harness did not cause (a crash, a lost leader election,
	// running out of memory); each is restarted and reported.
	mu         sync.Mutex
	unexpected []string
}

// managerConfig says how to run the replicas.
type managerConfig struct {
	binary, kubeconfig, logDir string
	leaderLease, leaderRenew   time.Duration
	leaderRetry                time.Duration
	workers                    int
	pprof                      bool
	extraArgs                  []string
}

// startManagers starts two replicas with leader election and waits until one leads.
func startManagers(ctx context.Context, cfg managerConfig) (*managers, error) {
	m := &managers{http: &http.Client{Timeout: 30 * time.Second}}
	for _, name := range []string{"a", "b"} {
		r, err := startReplica(cfg, name)
		if err != nil {
			m.stop()
			return nil, err
		}
		m.replicas = append(m.replicas, r)
	}
	for _, r := range m.replicas {
		if err := r.p.WaitTCP(ctx, r.probeAddr); err != nil {
			m.stop()
			return nil, fmt.Errorf("manager %s: %w\n%s", r.name, err, r.p.LogTail(4000))
		}
		go m.watch(ctx, r)
	}
	if _, err := m.waitLeader(ctx, 2*time.Minute); err != nil {
		m.stop()
		return nil, err
	}
	return m, nil
}

func startReplica(cfg managerConfig, name string) (*replica, error) {
	ports := make([]int, 3)
	for i := range ports {
		p, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	r := &replica{name: name,
		metricsAddr: "127.0.0.1:" + strconv.Itoa(ports[0]),
		probeAddr:   "127.0.0.1:" + strconv.Itoa(ports[1])}
	args := []string{
		"--kubeconfig=" + cfg.kubeconfig,
		"--secret-namespace=" + systemNS,
		"--leader-elect",
		"--leader-election-lease-duration=" + cfg.leaderLease.String(),
		"--leader-election-renew-deadline=" + cfg.leaderRenew.String(),
		"--leader-election-retry-period=" + cfg.leaderRetry.String(),
		"--metrics-bind-address=" + r.metricsAddr,
		"--metrics-secure=false",
		"--health-probe-bind-address=" + r.probeAddr,
		"--api-request-metrics",
	}
	if cfg.pprof {
		addr := "127.0.0.1:" + strconv.Itoa(ports[2])
		r.pprofURL = "http://" + addr
		args = append(args, "--pprof-bind-address="+addr)
	}
	if cfg.workers > 0 {
		args = append(args, "--claim-workers="+strconv.Itoa(cfg.workers))
	}
	args = append(args, cfg.extraArgs...)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	p, err := proc.Start(proc.Spec{Name: "manager " + name, Path: cfg.binary, Args: args, Env: env,
		LogFile: filepath.Join(cfg.logDir, "manager-"+name+".log")})
	if err != nil {
		return nil, err
	}
	r.p = p
	return r, nil
}

// watch restarts a replica that exits without the harness asking, and records it.
func (m *managers) watch(ctx context.Context, r *replica) {
	for {
		exited := r.p.Exited()
		if exited == nil {
			// Stopped by the harness; it restarts and watches again if it wants to.
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-exited:
		}
		r.mu.Lock()
		expected := r.expected == exited
		r.mu.Unlock()
		if expected || ctx.Err() != nil {
			return
		}
		msg := fmt.Sprintf("%s manager %s (pid %d) exited on its own; restarted (log: %s)",
			time.Now().Format("15:04:05"), r.name, pidOf(r), r.p.LogFile())
		logf("WARNING: %s\n%s", msg, r.p.LogTail(3000))
		m.mu.Lock()
		m.unexpected = append(m.unexpected, msg)
		m.mu.Unlock()
		_ = r.p.Kill() // reap it, so that Restart may run it again
		if err := r.p.Restart(); err != nil {
			logf("WARNING: restarting manager %s: %v", r.name, err)
			return
		}
	}
}

func pidOf(r *replica) int {
	if pid := r.p.PID(); pid != 0 {
		return pid
	}
	return -1
}

// unexpectedExits lists the replica exits the harness did not cause.
func (m *managers) unexpectedExits() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.unexpected...)
}

// scrape reads a replica's /metrics.
func (m *managers) scrape(ctx context.Context, r *replica) (metricSet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("manager %s /metrics: %s", r.name, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// leaderStatus is leader_election_master_status of each replica that answered: 1 leads.
func (m *managers) leaderStatus(ctx context.Context) map[*replica]float64 {
	out := map[*replica]float64{}
	for _, r := range m.replicas {
		if r.p.PID() == 0 {
			continue
		}
		ms, err := m.scrape(ctx, r)
		if err != nil {
			continue
		}
		v, _ := ms.value("leader_election_master_status", map[string]string{"name": electionID})
		out[r] = v
	}
	return out
}

// leader is the replica that says it leads (leader_election_master_status 1), if exactly one does.
func (m *managers) leader(ctx context.Context) (*replica, error) {
	var leaders []*replica
	for r, v := range m.leaderStatus(ctx) {
		if v == 1 {
			leaders = append(leaders, r)
		}
	}
	switch len(leaders) {
	case 1:
		return leaders[0], nil
	case 0:
		return nil, errors.New("no replica reports leader_election_master_status 1")
	default:
		return nil, fmt.Errorf("%d replicas report leader_election_master_status 1", len(leaders))
	}
}

// waitLeader waits until exactly one replica leads.
func (m *managers) waitLeader(ctx context.Context, timeout time.Duration) (*replica, error) {
	deadline := time.Now().Add(timeout)
	for {
		r, err := m.leader(ctx)
		if err == nil {
			return r, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no leader within %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// other is the replica that is not r.
func (m *managers) other(r *replica) *replica {
	for _, o := range m.replicas {
		if o != r {
			return o
		}
	}
	return nil
}

// kill ends a replica by its PID, with SIGKILL (a crash) or SIGTERM (a graceful stop, which gives
// up the leader Lease at once), and waits until it has exited.
func (m *managers) kill(r *replica, sig syscall.Signal) error {
	r.expectExit()
	if sig == syscall.SIGKILL {
		return r.p.Kill()
	}
	return r.p.Stop(30 * time.Second)
}

// restart runs a replica the harness stopped again, on the same ports, and waits for its probe.
func (m *managers) restart(ctx context.Context, r *replica) error {
	if err := r.p.Restart(); err != nil {
		return err
	}
	if err := r.p.WaitTCP(ctx, r.probeAddr); err != nil {
		return fmt.Errorf("manager %s after restart: %w\n%s", r.name, err, r.p.LogTail(4000))
	}
	go m.watch(ctx, r)
	return nil
}

// stop ends every replica by PID: SIGTERM, then SIGKILL after a grace period.
func (m *managers) stop() {
	for _, r := range m.replicas {
		r.expectExit()
		if err := r.p.Stop(20 * time.Second); err != nil {
			logf("stopping manager %s: %v", r.name, err)
		}
	}
}

// electionHolder is the leader election Lease's holderIdentity.
func electionHolder(ctx context.Context, c client.Client) (string, error) {
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: electionID}, l); err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

// memory is a replica's heap in use and resident set, from its own /metrics.
type memory struct{ heap, rss float64 }

func (m *managers) memory(ctx context.Context, r *replica) (memory, error) {
	ms, err := m.scrape(ctx, r)
	if err != nil {
		return memory{}, err
	}
	heap, ok1 := ms.value("go_memstats_heap_inuse_bytes", nil)
	rss, ok2 := ms.value("process_resident_memory_bytes", nil)
	if !ok1 || !ok2 {
		return memory{}, fmt.Errorf("manager %s /metrics lacks go_memstats_heap_inuse_bytes or process_resident_memory_bytes", r.name)
	}
	return memory{heap: heap, rss: rss}, nil
}

// profile fetches a /debug/pprof profile from a replica into path.
func (m *managers) profile(ctx context.Context, r *replica, what string, seconds int, path string) error {
	if r.pprofURL == "" {
		return errors.New("the managers run without --pprof-bind-address (set -profile-dir)")
	}
	url := r.pprofURL + "/debug/pprof/" + what
	if seconds > 0 {
		url += "?seconds=" + strconv.Itoa(seconds)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+60)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// apiServerProfile fetches the API server's CPU profile over seconds into path, through its
// /debug/pprof (on by default: --profiling), as `kubectl get --raw` would.
func apiServerProfile(ctx context.Context, cfg *rest.Config, seconds int, path string) error {
	clients, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+60)*time.Second)
	defer cancel()
	body, err := clients.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(seconds)).Timeout(time.Duration(seconds+30) * time.Second).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("the API server's CPU profile: %w", err)
	}
	return os.WriteFile(path, body, 0o644)
}
