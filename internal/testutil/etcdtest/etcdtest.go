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

// Package etcdtest starts real etcd servers for tests: single members or clusters, each member
// on free loopback client and peer ports with its data in a temporary directory, killed when the
// test ends. Members can be killed and restarted to test failures.
//
// The etcd binary is the one the project builds (hack/k8s-binaries.sh bin-dir prints the directory
// holding it; the script caches it). ETCD_BINARY overrides it. Tests that need etcd never skip:
// when the binary cannot be found or built, they fail and say why.
package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/internal/testutil/proc"
)

const (
	// startTimeout bounds how long a cluster may take to report healthy. Generous: the machines
	// running the tests are busy.
	startTimeout = 60 * time.Second
	// startAttempts is how many times Start and StartCluster try fresh ports when a member cannot
	// bind one (another process took the port between the probe and etcd's bind).
	startAttempts = 3
)

// Options configures the members of a cluster.
type Options struct {
	// TLS, when set, makes members serve clients over TLS.
	TLS *TLS
}

// Member is one etcd process of a cluster.
type Member struct {
	t testing.TB
	// Name is the member's name in the cluster.
	Name string
	// Dir holds the member's data directory and logs.
	Dir string
	// ClientPort and PeerPort are the loopback ports the member listens on, kept across restarts.
	ClientPort, PeerPort int

	bin     string
	opts    Options
	cluster string // --initial-cluster
	token   string // --initial-cluster-token

	// proc is the member's process, nil before the first launch.
	proc *proc.Process
}

// Start starts a single-member etcd cluster and waits until it is healthy.
func Start(t testing.TB) *Member {
	t.Helper()
	return StartCluster(t, 1)[0]
}

// StartWith starts a single-member etcd cluster with opts and waits until it is healthy.
func StartWith(t testing.TB, opts Options) *Member {
	t.Helper()
	return StartClusterWith(t, 1, opts)[0]
}

// StartCluster starts an n-member etcd cluster and waits until every member is healthy. The
// members are killed when the test ends.
func StartCluster(t testing.TB, n int) []*Member {
	t.Helper()
	return StartClusterWith(t, n, Options{})
}

// StartClusterWith starts an n-member etcd cluster with opts and waits until every member is
// healthy. The members are killed when the test ends.
func StartClusterWith(t testing.TB, n int, opts Options) []*Member {
	t.Helper()
	bin := binary(t)
	var err error
	for attempt := range startAttempts {
		var members []*Member
		if members, err = startCluster(t, bin, n, attempt, opts); err == nil {
			return members
		}
	}
	t.Fatalf("etcdtest: %v", err)
	return nil
}

func startCluster(t testing.TB, bin string, n, attempt int, opts Options) ([]*Member, error) {
	members := make([]*Member, n)
	var peers []string
	for i := range members {
		m := &Member{t: t, bin: bin, opts: opts, Name: fmt.Sprintf("m%d", i), Dir: t.TempDir()}
		var err error
		if m.ClientPort, err = proc.FreePort(); err != nil {
			return nil, err
		}
		if m.PeerPort, err = proc.FreePort(); err != nil {
			return nil, err
		}
		t.Cleanup(m.cleanup)
		members[i] = m
		peers = append(peers, m.Name+"="+m.peerURL())
	}
	token := fmt.Sprintf("etcdtest-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), attempt)
	for _, m := range members {
		m.cluster, m.token = strings.Join(peers, ","), token
		if err := m.launch(); err != nil {
			return nil, err
		}
	}
	for _, m := range members {
		if err := m.waitHealthy(); err != nil {
			for _, m := range members {
				m.cleanup()
			}
			return nil, err
		}
	}
	return members, nil
}

// Endpoints lists the client URLs of members.
func Endpoints(members []*Member) []string {
	eps := make([]string, len(members))
	for i, m := range members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// Endpoint is the member's client URL, http://127.0.0.1:port (https with TLS).
func (m *Member) Endpoint() string {
	scheme := "http://"
	if m.opts.TLS != nil {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.ClientPort))
}

func (m *Member) peerURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.PeerPort))
}

// PID is the process ID of the running member; 0 when it is not running.
func (m *Member) PID() int {
	if m.proc == nil {
		return 0
	}
	return m.proc.PID()
}

// Kill kills the member with SIGKILL and waits until it has exited. Its data directory stays, so
// Restart brings it back with its data.
func (m *Member) Kill() {
	m.t.Helper()
	if m.PID() == 0 {
		m.t.Fatalf("etcdtest: Kill: member %s (client port %d) is not running", m.Name, m.ClientPort)
	}
	m.kill()
}

// Restart starts a killed member again on the same ports with its data, and waits until it is
// healthy (which, in a cluster, needs a quorum of members running).
func (m *Member) Restart() {
	m.t.Helper()
	if m.PID() != 0 {
		m.t.Fatalf("etcdtest: Restart: member %s is still running; Kill it first", m.Name)
	}
	if err := m.launch(); err != nil {
		m.t.Fatalf("etcdtest: restarting: %v", err)
	}
	if err := m.waitHealthy(); err != nil {
		m.t.Fatalf("etcdtest: restarting: %v", err)
	}
}

// args builds the member's command line.
func (m *Member) args() []string {
	args := []string{
		"--name", m.Name,
		"--data-dir", filepath.Join(m.Dir, "data"),
		"--listen-client-urls", m.Endpoint(),
		"--advertise-client-urls", m.Endpoint(),
		"--listen-peer-urls", m.peerURL(),
		"--initial-advertise-peer-urls", m.peerURL(),
		"--initial-cluster", m.cluster,
		"--initial-cluster-token", m.token,
		"--initial-cluster-state", "new", // ignored on a restart: the data directory exists
		"--unsafe-no-fsync", // test data need not survive a power cut; saves the busy disk
		"--log-level", "warn",
	}
	if t := m.opts.TLS; t != nil {
		args = append(args, "--cert-file", t.CertFile, "--key-file", t.KeyFile, "--trusted-ca-file", t.CAFile)
		if t.ClientAuth {
			args = append(args, "--client-cert-auth")
		}
	}
	return args
}

// launch runs the member (again, on a restart) without waiting for it.
func (m *Member) launch() error {
	if m.proc != nil {
		return m.proc.Restart()
	}
	p, err := proc.Start(proc.Spec{
		Name:    "etcd member " + m.Name,
		Path:    m.bin,
		Args:    m.args(),
		Dir:     m.Dir,
		LogFile: filepath.Join(m.Dir, "etcd.log"),
	})
	if err != nil {
		return err
	}
	m.proc = p
	return nil
}

// waitHealthy polls the member's /health endpoint until it reports healthy, the member exits, or
// startTimeout passes. On failure the member is killed and the error carries its log.
func (m *Member) waitHealthy() error {
	exited := m.proc.Exited()
	client := &http.Client{Timeout: time.Second}
	if m.opts.TLS != nil {
		client.Transport = &http.Transport{TLSClientConfig: m.opts.TLS.Client}
	}
	deadline := time.Now().Add(startTimeout)
	err := errors.New("not polled")
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			err = errors.New("exited before becoming healthy")
			return m.failed(err)
		default:
		}
		if err = health(client, m.Endpoint()); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return m.failed(fmt.Errorf("not healthy within %s: %w", startTimeout, err))
}

func (m *Member) failed(err error) error {
	m.kill()
	return fmt.Errorf("etcd member %s on client port %d: %w\n%s", m.Name, m.ClientPort, err, m.logs())
}

// health asks one member's /health endpoint.
func health(client *http.Client, endpoint string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"health":"true"`)) {
		return fmt.Errorf("/health answered %d: %s", resp.StatusCode, body)
	}
	return nil
}

// kill kills the process and waits for it.
func (m *Member) kill() {
	if m.proc == nil {
		return
	}
	if err := m.proc.Kill(); err != nil {
		m.t.Errorf("etcdtest: %v", err)
	}
}

func (m *Member) cleanup() { m.kill() }

// logs returns the end of the member's log, for failure messages.
func (m *Member) logs() string { return proc.FileTail(filepath.Join(m.Dir, "etcd.log"), 4000) }

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary finds the etcd binary (ETCD_BINARY, else hack/k8s-binaries.sh bin-dir, which builds
// it once and caches it) or fails the test saying why.
func binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binPath, binErr = findBinary() })
	if binErr != nil {
		t.Fatalf("etcdtest: %v. These tests run against a real etcd and never skip; set ETCD_BINARY "+
			"to an etcd v3.6 binary or make hack/k8s-binaries.sh work", binErr)
	}
	return binPath
}

func findBinary() (string, error) {
	if p := os.Getenv("ETCD_BINARY"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("ETCD_BINARY=%s: %w", p, err)
		}
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "hack", "k8s-binaries.sh")
	cmd := exec.Command(script, "bin-dir")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s bin-dir: %w\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	p := filepath.Join(dir, "etcd")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s bin-dir printed %q, which holds no etcd: %w", script, dir, err)
	}
	return p, nil
}

// moduleRoot walks up from the working directory (the test's package directory) to go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the module root (no go.mod above the working directory)")
		}
		dir = parent
	}
}
