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

// Package proc starts and stops the real servers that tests run against: one process per
// server, in its own process group, with its output appended to a log file, stopped by its PID
// (never by name). Kill sends SIGKILL to the whole group, so servers that fork workers
// (PostgreSQL) leave nothing behind; on Linux the kernel also kills the server if the test binary
// dies without cleaning up. Restart runs the same command again, e.g. on the same port and data
// directory after a Kill, to test crashes and recoveries.
package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// KillTimeout bounds how long Kill waits for a killed process to be reaped.
const KillTimeout = 30 * time.Second

// Spec says how to run a server.
type Spec struct {
	// Name names the server in errors, e.g. "redis-server".
	Name string
	// Path is the executable.
	Path string
	// Args are its arguments.
	Args []string
	// Dir is its working directory; empty means the test's.
	Dir string
	// Env, when set, is its whole environment; nil means the test's.
	Env []string
	// LogFile receives its stdout and stderr, appended, across restarts. Required.
	LogFile string
	// Credential, when set, runs the server as another user (PostgreSQL refuses to run as root).
	Credential *syscall.Credential
	// StopSignal is what Stop sends first; default SIGTERM.
	StopSignal syscall.Signal
}

// Process is a server started from a Spec, and restartable from it. It is safe for concurrent
// use.
type Process struct {
	spec Spec

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// Start starts the server described by spec and returns at once; use WaitReady or WaitTCP to wait
// until it serves.
func Start(spec Spec) (*Process, error) {
	if spec.Path == "" || spec.LogFile == "" {
		return nil, fmt.Errorf("proc: Spec needs Path and LogFile (got %q, %q)", spec.Path, spec.LogFile)
	}
	if spec.Name == "" {
		spec.Name = spec.Path
	}
	if spec.StopSignal == 0 {
		spec.StopSignal = syscall.SIGTERM
	}
	p := &Process{spec: spec}
	if err := p.Restart(); err != nil {
		return nil, err
	}
	return p, nil
}

// Restart starts the server again from its Spec. It must not be running: Kill or Stop it first.
func (p *Process) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("proc: %s (pid %d) is still running; Kill or Stop it first", p.spec.Name, p.cmd.Process.Pid)
	}
	out, err := os.OpenFile(p.spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("proc: opening the log of %s: %w", p.spec.Name, err)
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Dir, cmd.Env = p.spec.Dir, p.spec.Env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	cmd.SysProcAttr.Credential = p.spec.Credential
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("proc: starting %s: %w", p.spec.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

// Name is the Spec's name.
func (p *Process) Name() string { return p.spec.Name }

// LogFile is the file the server writes its output to.
func (p *Process) LogFile() string { return p.spec.LogFile }

// PID is the process ID of the running server; 0 when it is not running.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited is closed when the current run of the server ends; nil when it is not running.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Signal sends sig to the server's process group (SIGSTOP and SIGCONT pause and resume it).
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("proc: %v: %s is not running", sig, p.spec.Name)
	}
	if err := signalGroup(p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("proc: sending %v to %s (pid %d): %w", sig, p.spec.Name, p.cmd.Process.Pid, err)
	}
	return nil
}

// Kill sends SIGKILL to the server's process group and waits until the server has exited. A
// server that is not running is left alone.
func (p *Process) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killLocked()
}

func (p *Process) killLocked() error {
	if p.cmd == nil {
		return nil
	}
	pid := p.cmd.Process.Pid
	workers := descendants(pid)
	_ = signalGroup(pid, syscall.SIGKILL) // works on a stopped process too
	for _, w := range workers {
		_ = syscall.Kill(w, syscall.SIGKILL) // those that left the group
	}
	select {
	case <-p.exited:
	case <-time.After(KillTimeout):
		return fmt.Errorf("proc: %s (pid %d) did not exit within %s of SIGKILL", p.spec.Name, pid, KillTimeout)
	}
	p.cmd, p.exited = nil, nil
	return waitGroupGone(p.spec.Name, pid, workers)
}

// waitGroupGone waits until no process of the group that pid led, and none of its workers, runs
// any more, so that a restart never meets the old server's workers (their ports, locks and
// shared memory).
func waitGroupGone(name string, pid int, workers []int) error {
	deadline := time.Now().Add(KillTimeout)
	for groupAlive(pid) || alive(workers) {
		if time.Now().After(deadline) {
			return fmt.Errorf("proc: processes of %s's group (pid %d) still run %s after SIGKILL", name, pid, KillTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// Stop sends the Spec's StopSignal to the server and waits up to grace for it to exit, then
// kills the process group. A server that is not running is left alone.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(p.spec.StopSignal)
	select {
	case <-p.exited:
		// Workers the server forked and did not reap die with the group.
		pid := p.cmd.Process.Pid
		_ = signalGroup(pid, syscall.SIGKILL)
		p.cmd, p.exited = nil, nil
		return waitGroupGone(p.spec.Name, pid, nil)
	case <-time.After(grace):
	}
	return p.killLocked()
}

// signalGroup signals the process group that pid leads; Start makes every server the leader of
// its own group.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // the group is gone already
	}
	return err
}

// WaitReady calls probe every interval until it succeeds, the server exits, or ctx ends, and
// returns nil, or an error that says which happened and what probe last said.
func (p *Process) WaitReady(ctx context.Context, interval time.Duration, probe func(ctx context.Context) error) error {
	exited := p.Exited()
	if exited == nil {
		return fmt.Errorf("%s is not running", p.spec.Name)
	}
	err := errors.New("not probed yet")
	for {
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it was ready (last probe: %v)", p.spec.Name, err)
		default:
		}
		if err = probe(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready in time: %w", p.spec.Name, err)
		case <-exited:
		case <-time.After(interval):
		}
	}
}

// WaitTCP waits until addr accepts TCP connections, the server exits, or ctx ends.
func (p *Process) WaitTCP(ctx context.Context, addr string) error {
	return p.WaitReady(ctx, 20*time.Millisecond, func(ctx context.Context) error { return DialTCP(ctx, addr) })
}

// DialTCP connects to addr and closes the connection at once.
func DialTCP(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// LogTail returns the last n bytes of the server's log, headed by its path, for failure
// messages; empty when the log is empty or unreadable.
func (p *Process) LogTail(n int) string {
	return FileTail(p.spec.LogFile, n)
}

// FileTail returns the last n bytes of a file, headed by its path; empty when the file is
// empty or unreadable.
func FileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return fmt.Sprintf("--- %s ---\n%s\n", path, data)
}

// FreePort returns a loopback TCP port that nothing listens on right now. Another process may
// take it before the server binds it: callers retry with a new port when a server fails to start.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
