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
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// runCommand holds a lock while a command runs. In a pod (POD_NAME set) the claim is the pod's,
// as acquire's, so that the lock goes with the pod even if lockctl is killed; elsewhere the claim
// is detached, with a heartbeat Lease (--heartbeat) that lockctl renews, so that the lock goes
// with lockctl even if it is killed. The command gets the token in LOCKWARDEN_FENCING_TOKEN; the claim is deleted when
// the command ends. If the lock is lost meanwhile, the command gets SIGTERM, then SIGKILL after
// --grace, and lockctl exits with runLockLost.
func (a *app) runCommand(k *kubeFlags) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run --lock NAME [--mode Shared|Exclusive] [--try] [--timeout D] [--grace D] [--heartbeat D] [--clock-skew D] [--token-file PATH] -- COMMAND [ARG...]",
		Short: "Hold a lock while a command runs",
		Long: `Take the lock, run COMMAND with the fencing token in LOCKWARDEN_FENCING_TOKEN, release the lock
when COMMAND ends and exit with its code. If the lock is lost meanwhile, COMMAND gets SIGTERM and
SIGKILL after --grace. So does it when lockctl sees no renewal before the claim's expireTime (less
--clock-skew), as when the API server is out of reach: the lock may be granted to another holder
from then on. To be sure COMMAND is gone before the next holder starts, give the lock a
spec.lockDelaySeconds of at least --grace. A signal (INT, TERM, HUP, QUIT) while lockctl waits for the lock withdraws
the claim; once COMMAND runs, lockctl passes such signals on to it. With --try lockctl does not
queue: if the lock is not granted at once, COMMAND does not run. --mode says how to hold a lock
of several places (spec.maxHolders): Shared, the default, beside other Shared holders, or
Exclusive, alone. Flags end at COMMAND; "--" before it is optional.

Outside a pod (no POD_NAME), the claim carries a heartbeat: a Lease named after the claim, which
lockctl renews every third of --heartbeat and deletes when it exits. If lockctl is killed
(SIGKILL) or its machine stops, the controller releases the lock once the Lease has gone
--heartbeat without renewal, and grants it to the next claim. --heartbeat 0 turns this off: the
claim then holds the lock until it is deleted (the release command). In a pod the pod's
own liveness serves, and --heartbeat is not used.

Exit codes: COMMAND's own, or one of lockctl's, which COMMAND's usual codes do not reach:
  120     lockctl failed: API server unreachable, token file not writable, ...
  121     --try: the lock is taken; COMMAND did not run
  122     the claim cannot succeed: lock, pod or backend missing, forbidden, claim ended
  123     the lock was lost while COMMAND ran; COMMAND was stopped
  124     --timeout passed before the lock was granted; COMMAND did not run
  125     bad flags or arguments
  126     COMMAND cannot be executed
  127     COMMAND not found
  128+N   lockctl got signal N while waiting for the lock; the claim was withdrawn
          (COMMAND killed by signal N also exits 128+N, as in a shell)
A COMMAND that exits 120 to 127 itself looks like lockctl; lockctl's own failures also print
one line starting with "lockctl:" on stderr.`,
		Example: fmt.Sprintf(`  %[1]s run --lock nightly-migration -n team-a --timeout 10m -- ./migrate.sh
  %[1]s run --lock nightly-report --try -- ./report.sh   # skip the run if another one holds the lock
  %[1]s run --lock reports --mode Exclusive -- ./migrate.sh   # alone, while readers hold it Shared`, a.name()),
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.run(k, &o, args)
		},
	}
	argsAreCommand(cmd)
	f := cmd.Flags()
	lockFlag(cmd, &o.locks, "Name of the DistributedLock (required); repeat it, or separate names by commas, to hold 2 to 8 locks together")
	f.DurationVar(&o.timeout, "timeout", 0, "Give up waiting for the lock after this long, exit code 124 (0 waits forever; with --try, default 30s for the controller's answer)")
	f.DurationVar(&o.grace, "grace", 10*time.Second, "After the lock is lost, how long the command has between SIGTERM and SIGKILL")
	f.StringVar(&o.tokenFile, "token-file", "", "Also write the fencing token to this file")
	f.DurationVar(&o.heartbeat, "heartbeat", defaultHeartbeat, "Outside a pod: release the lock this long after lockctl stops renewing its heartbeat Lease (killed, machine down); 0 turns the heartbeat off and the claim holds until deleted")
	f.BoolVar(&o.try, "try", false, "Do not queue: run the command only if the lock is granted at once, else exit code 121")
	f.DurationVar(&o.clockSkew, "clock-skew", lockclient.DefaultClockSkew, "How far this machine's clock may run behind the controller's: when no renewal is seen (the API server out of reach), the command is stopped this long before the claim's last expireTime (at most a sixteenth of the lease)")
	modeFlag(cmd, &o.mode)
	priorityFlag(cmd, &o.priority)
	_ = cmd.RegisterFlagCompletionFunc("lock", a.completeNames(k, "DistributedLock"))
	return cmd
}

// runOptions are run's flags.
type runOptions struct {
	locks                     []string
	tokenFile, mode           string
	timeout, grace, heartbeat time.Duration
	clockSkew                 time.Duration
	try                       bool
	priority                  int32
}

// defaultHeartbeat is --heartbeat's default: long enough that a busy laptop or a slow API server
// does not miss it (renewed every 5 s), short enough that a killed lockctl's lock is soon free.
const defaultHeartbeat = 15 * time.Second

// run takes the lock, runs command under supervise and releases the lock.
func (a *app) run(k *kubeFlags, o *runOptions, command []string) error {
	switch {
	case len(command) == 0:
		return usagef("run needs a command: %s run --lock NAME -- COMMAND [ARG...]", a.name())
	case o.timeout < 0 || o.grace < 0 || o.heartbeat < 0 || o.clockSkew < 0:
		return usagef("--timeout, --grace, --heartbeat and --clock-skew must not be negative")
	}
	lock, several, err := lockNames(o.locks)
	if err != nil {
		return err
	}
	mode, err := parseMode(o.mode)
	if err != nil {
		return err
	}
	// Before queueing: a command that cannot run must not take the lock from those that can.
	if _, err := exec.LookPath(command[0]); err != nil {
		return startError(command[0], err)
	}
	pod := a.podFromEnv()
	if pod != nil {
		if err := a.checkPodNamespace(k); err != nil {
			return err
		}
	}
	c, ns, err := a.connect(k, lockclient.WithClockSkew(o.clockSkew))
	if err != nil {
		return err
	}

	// One subscription from the wait to the end, so that no signal finds lockctl without a
	// handler (and dies leaving its claim) between the two.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, stopSignals...)
	defer signal.Stop(signals)

	acquire := c.Acquire
	if o.try {
		acquire = c.TryAcquire
	}
	req := lockclient.Request{Namespace: ns, Lock: lock, Locks: several, Pod: pod, Mode: mode, Priority: o.priority, Timeout: o.timeout}
	if pod == nil {
		req.Heartbeat = o.heartbeat
	}
	hold, err := waitForLock(locksLabel(lock, several), signals, func(ctx context.Context) (*lockclient.Hold, error) { return acquire(ctx, req) })
	if err != nil {
		return err
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := hold.Release(ctx); err != nil {
			fmt.Fprintln(a.stderr, errorLine(a.name(), "release", err))
		}
	}
	if o.tokenFile != "" {
		if err := writeTokenFile(o.tokenFile, tokenFileContent(&hold.Result)); err != nil {
			release()
			return err
		}
	}

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), tokenEnv(&hold.Result),
		"LOCKWARDEN_LOCK="+hold.Lock,
		"LOCKWARDEN_CLAIM="+hold.Claim,
		"LOCKWARDEN_NAMESPACE="+hold.Namespace,
	)
	ownGroup := !hasControllingTerminal()
	if ownGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	fmt.Fprintln(a.stderr, a.name()+": "+acquiredLine(&hold.Result))
	if err := cmd.Start(); err != nil {
		release()
		return startError(command[0], err)
	}

	child := &target{pid: cmd.Process.Pid, ownGroup: ownGroup, foreground: inForeground}
	code, lostErr := supervise(cmd, child, signals, o.grace, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case <-hold.Context().Done():
			return hold.Err()
		}
	})
	release()
	if lostErr != nil {
		return lostErr
	}
	return exitStatus(code)
}

// waitForLock takes the lock with acquire. A signal on signals ends the wait: acquire withdraws
// its claim (or, had it just got the lock, the lock is released), and the error is an
// *interrupted naming the signal.
func waitForLock(lock string, signals <-chan os.Signal, acquire func(context.Context) (*lockclient.Hold, error)) (*lockclient.Hold, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got os.Signal
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case got = <-signals:
			cancel()
		case <-done:
		}
	}()
	hold, err := acquire(ctx)
	close(done)
	<-watched
	if got == nil {
		return hold, err
	}
	if err == nil {
		release, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = hold.Release(release)
	}
	sig, _ := got.(syscall.Signal)
	return nil, &interrupted{signal: sig, lock: lock}
}

// startError describes why command could not be started: not found (exit code 127) or not
// executable (126), as a shell tells them apart.
func startError(command string, err error) error {
	missing := errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)
	return &commandError{command: command, missing: missing, err: err}
}

// Which process group the command runs in.
//
// With a controlling terminal (an interactive shell, a script started from one, `kubectl exec
// -it`), the command stays in lockctl's process group. The terminal and the shell's job control
// work on process groups: only the terminal's foreground group may read from it (a process of
// another group that reads gets SIGTTIN and stops), ^C, ^\ and ^Z go to the foreground group,
// and fg/bg move whole groups. A command in a group of its own would sit in the background of a
// terminal whose foreground is lockctl's, and an interactive command (a prompt, psql) would hang,
// stopped, at its first read. In lockctl's group it is wherever lockctl is, as with env(1),
// nice(1) or flock(1); the keys of the terminal reach it directly, so lockctl does not pass on
// SIGINT and SIGQUIT while it is in the foreground (the command would get them twice), and it
// signals the command's process alone (a signal to the group would reach lockctl too).
//
// Without a controlling terminal (a pod, a CronJob, CI, systemd) there is no job control, and
// the command leads a process group of its own: a lock loss or a signal passed on then reaches
// every process the command started (a shell script's children too), not only the first.

// hasControllingTerminal says whether lockctl has a controlling terminal.
func hasControllingTerminal() bool {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false
	}
	_ = tty.Close()
	return true
}

// inForeground says whether lockctl's process group is the foreground group of its controlling
// terminal.
func inForeground() bool {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false
	}
	defer func() { _ = tty.Close() }()
	pgrp, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// target is the command as lockctl signals it.
type target struct {
	pid int
	// ownGroup: the command leads its own process group, which gets every signal.
	ownGroup bool
	// foreground says whether lockctl is in the foreground of its terminal now.
	foreground func() bool
}

// kill sends sig to the command: its process group, or its process in lockctl's group.
func (t *target) kill(sig syscall.Signal) {
	if t.ownGroup {
		_ = syscall.Kill(-t.pid, sig)
		return
	}
	_ = syscall.Kill(t.pid, sig)
}

// forward passes on a signal that lockctl got, except SIGINT and SIGQUIT that the terminal sent
// to the whole foreground group, the command included.
func (t *target) forward(sig syscall.Signal) {
	if !t.ownGroup && (sig == syscall.SIGINT || sig == syscall.SIGQUIT) && t.foreground() {
		return
	}
	t.kill(sig)
}

// supervise waits for cmd, passing signals on to it. When waitLost reports the lock lost, the
// command gets SIGTERM, then SIGKILL after grace. It returns the command's exit code (128+n for
// a command killed by signal n) and the loss, if any.
func supervise(cmd *exec.Cmd, child *target, signals <-chan os.Signal, grace time.Duration, waitLost func(context.Context) error) (int, error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lost := make(chan error, 1)
	go func() { lost <- waitLost(ctx) }()

	var lostErr error
	var kill <-chan time.Time
	for {
		select {
		case err := <-done:
			return commandExitCode(err), lostErr
		case err := <-lost:
			lost = nil
			if err == nil {
				continue
			}
			lostErr = err
			child.kill(syscall.SIGTERM)
			kill = time.After(grace)
		case <-kill:
			child.kill(syscall.SIGKILL)
		case s := <-signals:
			if sig, ok := s.(syscall.Signal); ok {
				child.forward(sig)
			}
		}
	}
}

// commandExitCode is a finished command's exit code, shell style.
func commandExitCode(err error) int {
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		if err != nil {
			return exitError
		}
		return 0
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exitErr.ExitCode()
}
