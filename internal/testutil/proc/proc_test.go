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

package proc_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/testutil/proc"
)

// running reports whether a process exists and is not a zombie (an exited process its new parent
// has not reaped yet).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

// A shell that forks a worker stands in for a server: Kill takes the whole group, Restart runs it
// again, Stop sends the stop signal first, and the log collects the output of every run.
func TestProcessLifecycle(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	workerPID := filepath.Join(dir, "worker.pid")
	p, err := proc.Start(proc.Spec{
		Name:    "fake-server",
		Path:    "/bin/sh",
		Args:    []string{"-c", "sleep 300 & echo $! > " + workerPID + "; echo started; trap 'echo bye; exit 0' TERM; wait"},
		LogFile: filepath.Join(dir, "server.log"),
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Kill() })

	readWorker := func() int {
		var pid int
		g.Eventually(func() error {
			b, err := os.ReadFile(workerPID)
			if err != nil {
				return err
			}
			pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
			return err
		}, 10*time.Second, 10*time.Millisecond).Should(Succeed())
		return pid
	}
	first, worker := p.PID(), readWorker()
	g.Expect(first).To(BeNumerically(">", 0))
	g.Expect(p.Restart()).To(MatchError(ContainSubstring("still running")))

	g.Expect(p.Kill()).To(Succeed())
	g.Expect(p.PID()).To(BeZero())
	g.Expect(p.Exited()).To(BeNil())
	g.Expect(running(worker)).To(BeFalse(), "Kill returns once the forked worker is gone too")
	g.Expect(p.Kill()).To(Succeed(), "killing a stopped server is a no-op")

	_ = os.Remove(workerPID)
	g.Expect(p.Restart()).To(Succeed())
	g.Expect(p.PID()).NotTo(Equal(first))
	worker = readWorker()
	g.Expect(p.Stop(10 * time.Second)).To(Succeed())
	g.Expect(p.PID()).To(BeZero())
	g.Expect(running(worker)).To(BeFalse(), "Stop returns once the forked worker is gone too")
	g.Expect(p.LogTail(4000)).To(And(ContainSubstring("started\nstarted"), ContainSubstring("bye")), "both runs and the clean exit are logged")
}

// A worker that left the server's process group (PostgreSQL's backends call setsid()) is killed
// and waited for too: one that lingers keeps the old server's shared memory, and a restart fails.
func TestKillReachesWorkersOutsideTheGroup(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	workerPID := filepath.Join(dir, "worker.pid")
	p, err := proc.Start(proc.Spec{
		Name:    "fake-server",
		Path:    "/bin/sh",
		Args:    []string{"-c", "setsid sh -c 'echo $$ > " + workerPID + "; exec sleep 300' & wait"},
		LogFile: filepath.Join(dir, "server.log"),
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Kill() })
	var worker int
	g.Eventually(func() error {
		b, err := os.ReadFile(workerPID)
		if err != nil {
			return err
		}
		worker, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	}, 10*time.Second, 10*time.Millisecond).Should(Succeed())
	g.Eventually(func() bool { return running(worker) }).Should(BeTrue())

	g.Expect(p.Kill()).To(Succeed())
	g.Expect(running(worker)).To(BeFalse(), "Kill returns once the worker outside the group is gone too")
}

// WaitTCP returns once the port listens, and fails at once when the server exits first.
func TestWaitTCP(t *testing.T) {
	g := NewWithT(t)
	port, err := proc.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	dies, err := proc.Start(proc.Spec{Path: "/bin/sh", Args: []string{"-c", "exit 3"}, LogFile: filepath.Join(dir, "dies.log")})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = dies.Kill() })
	g.Expect(dies.WaitTCP(ctx, addr)).To(MatchError(ContainSubstring("exited before it was ready")))

	// The server is a sleep; the test listens on its behalf, a moment after WaitTCP starts.
	sleeps, err := proc.Start(proc.Spec{Path: "/bin/sleep", Args: []string{"300"}, LogFile: filepath.Join(dir, "sleep.log")})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = sleeps.Kill() })
	time.AfterFunc(200*time.Millisecond, func() {
		if l, err := net.Listen("tcp", addr); err == nil {
			t.Cleanup(func() { _ = l.Close() })
		}
	})
	g.Expect(sleeps.WaitTCP(ctx, addr)).To(Succeed())
}

// A child started by other code is found by its command name, and only this process's children.
func TestChildrenNamed(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	// A copy of sleep under a name no other process has.
	bin := filepath.Join(dir, "lw-childtest")
	data, err := os.ReadFile("/bin/sleep")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(bin, data, 0o755)).To(Succeed())
	cmd := exec.Command(bin, "300")
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	g.Eventually(func() []int { return proc.ChildrenNamed("lw-childtest") }).Should(Equal([]int{cmd.Process.Pid}))
	g.Expect(proc.ChildrenNamed("lw-no-such-child")).To(BeEmpty())
}
