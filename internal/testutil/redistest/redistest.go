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

// Package redistest runs real redis-server processes for tests. Each server listens on a free
// loopback port, keeps its files in a t.TempDir(), persists nothing (`--save "" --appendonly
// no`), and is stopped by its PID when the test ends. A test can kill a server (SIGKILL) and
// restart it on the same port, which loses every key as a crash without persistence does, and can
// pause (SIGSTOP) and resume (SIGCONT) it.
//
// The tests need Debian's redis-server package. When it is missing they fail, never skip, and
// say how to install it. REDIS_SERVER may name another binary.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/lockwarden/lockwarden/internal/testutil/proc"
)

// InstallCommand installs the redis-server the tests need (Debian, as root).
const InstallCommand = "apt-get update && apt-get install -y redis-server"

const (
	// startTimeout bounds how long a server may take to answer PING after it was started,
	// generous for a loaded 2-core machine.
	startTimeout = 30 * time.Second
	// startAttempts is how often Start tries another free port when a server cannot bind one
	// (another process took the port between the probe and the server's bind).
	startAttempts = 5
)

// Options configures a server.
type Options struct {
	// Password, when set, is required of clients (`--requirepass`).
	Password string
	// TLS, when set, makes the server speak TLS only.
	TLS *TLS
	// Args are further redis-server arguments.
	Args []string
}

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	bin  string
	opts Options
	// Dir is the server's working directory.
	Dir string
	// Port is the loopback port the server listens on, kept across restarts.
	Port int

	// proc is the server process, nil before the first start.
	proc *proc.Process

	mu      sync.Mutex // guards clients
	clients []*goredis.Client
}

// Start starts a redis-server on a free loopback port and waits until it answers PING. The
// server is killed when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, bin: binary(t), opts: opts, Dir: t.TempDir()}
	t.Cleanup(s.cleanup)
	var err error
	for range startAttempts {
		if s.Port, err = proc.FreePort(); err != nil {
			t.Fatalf("redistest: finding a free port: %v", err)
		}
		if err = s.start(); err == nil {
			return s
		}
	}
	t.Fatalf("redistest: %v", err)
	return nil
}

// StartN starts n servers with the same options.
func StartN(t testing.TB, n int, opts Options) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = Start(t, opts)
	}
	return servers
}

// Addr is the server's address, 127.0.0.1:port.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
}

// PID is the process ID of the running server; 0 when it is not running.
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Kill kills the server with SIGKILL and waits until it has exited. Its data is gone.
func (s *Server) Kill() {
	s.t.Helper()
	if s.PID() == 0 {
		s.t.Fatalf("redistest: Kill: the server on port %d is not running", s.Port)
	}
	s.kill()
}

// Restart starts a killed server again on the same port, empty, and waits until it answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	if s.PID() != 0 {
		s.t.Fatalf("redistest: Restart: the server on port %d is still running; Kill it first", s.Port)
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restarting: %v", err)
	}
}

// Pause stops the server with SIGSTOP: connections stay open and the kernel still accepts new
// ones, but nothing is answered until Resume.
func (s *Server) Pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() {
	s.t.Helper()
	s.signal(syscall.SIGCONT)
}

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.PID() == 0 {
		s.t.Fatalf("redistest: %v: the server on port %d is not running", sig, s.Port)
	}
	if err := s.proc.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
}

// Client returns a plain go-redis client of the server, closed when the test ends. It plays
// "another application" in tests, and reads the server's state for assertions.
func (s *Server) Client() *goredis.Client {
	c := goredis.NewClient(s.clientOptions())
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	return c
}

func (s *Server) clientOptions() *goredis.Options {
	o := &goredis.Options{
		Addr:                     s.Addr(),
		Password:                 s.opts.Password,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		ContextTimeoutEnabled:    true,
		DialTimeout:              5 * time.Second,
		ReadTimeout:              5 * time.Second,
		WriteTimeout:             5 * time.Second,
	}
	if s.opts.TLS != nil {
		o.TLSConfig = s.opts.TLS.Client
	}
	return o
}

// args builds the server's command line.
func (s *Server) args() []string {
	args := []string{
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.Dir,
		"--logfile", filepath.Join(s.Dir, "redis.log"),
		"--loglevel", "notice",
		"--daemonize", "no",
	}
	port := strconv.Itoa(s.Port)
	if t := s.opts.TLS; t != nil {
		clientAuth := "no"
		if t.ClientAuth {
			clientAuth = "yes"
		}
		args = append(args, "--port", "0", "--tls-port", port,
			"--tls-cert-file", t.CertFile, "--tls-key-file", t.KeyFile, "--tls-ca-cert-file", t.CAFile,
			"--tls-auth-clients", clientAuth)
	} else {
		args = append(args, "--port", port)
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	return append(args, s.opts.Args...)
}

// start runs the server (again, on a restart) and waits until it answers PING.
func (s *Server) start() error {
	var err error
	if s.proc == nil {
		s.proc, err = proc.Start(proc.Spec{
			Name:    "redis-server",
			Path:    s.bin,
			Args:    s.args(),
			Dir:     s.Dir,
			LogFile: filepath.Join(s.Dir, "stdout.log"),
		})
	} else {
		err = s.proc.Restart()
	}
	if err != nil {
		return err
	}

	if err := s.waitReady(s.proc.Exited()); err != nil {
		s.kill()
		s.proc = nil // the next attempt may use another port
		return fmt.Errorf("redis-server on port %d: %w\n%s", s.Port, err, s.logs())
	}
	return nil
}

// waitReady polls PING until the server answers, exits, or startTimeout passes.
func (s *Server) waitReady(exited <-chan struct{}) error {
	o := s.clientOptions()
	o.MaxRetries = -1
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
	c := goredis.NewClient(o)
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited before answering PING")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("did not answer PING within %s: %w", startTimeout, err)
}

// kill kills the process and waits for it.
func (s *Server) kill() {
	if s.proc == nil {
		return
	}
	if err := s.proc.Kill(); err != nil {
		s.t.Errorf("redistest: %v", err)
	}
}

func (s *Server) cleanup() {
	s.mu.Lock()
	for _, c := range s.clients {
		_ = c.Close()
	}
	s.clients = nil
	s.mu.Unlock()
	s.kill()
}

// logs returns the end of the server's log files, for failure messages.
func (s *Server) logs() string {
	return proc.FileTail(filepath.Join(s.Dir, "stdout.log"), 4000) + proc.FileTail(filepath.Join(s.Dir, "redis.log"), 4000)
}

// binary finds redis-server or fails the test with the command that installs it.
func binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("redistest: REDIS_SERVER=%s: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	t.Fatalf("redistest: redis-server is not installed (not on PATH, not at /usr/bin/redis-server). "+
		"These tests run against a real Redis and never skip. Install it with:\n\t%s", InstallCommand)
	return ""
}
