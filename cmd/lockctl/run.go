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
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// runCommand holds a lock while a command runs. In a pod (POD_NAME set) the claim is the pod's,
// as acquire's, so that the lock goes with the pod even if lockctl is killed; elsewhere the claim
// is detached. The command gets the token in LOCKWARDEN_FENCING_TOKEN; the claim is deleted when
// the command ends. If the lock is lost meanwhile, the command gets SIGTERM, then SIGKILL after
// --grace, and lockctl exits with exitLockLost.
func (a *app) runCommand(k *kubeFlags) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run --lock NAME [--timeout D] [--grace D] [--token-file PATH] -- COMMAND [ARG...]",
		Short: "Hold a lock while a command runs",
		Long: `Take the lock, run COMMAND with the fencing token in LOCKWARDEN_FENCING_TOKEN, release the lock
when COMMAND ends and exit with its code. If the lock is lost meanwhile, COMMAND gets SIGTERM,
SIGKILL after --grace, and the exit code is 5. Flags end at COMMAND; "--" before it is optional.`,
		Example: fmt.Sprintf("  %s run --lock nightly-migration -n team-a --timeout 10m -- ./migrate.sh", a.name()),
		Args:    cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.run(k, &o, args)
		},
	}
	argsAreCommand(cmd)
	f := cmd.Flags()
	f.StringVar(&o.lock, "lock", "", "Name of the DistributedLock (required)")
	f.DurationVar(&o.timeout, "timeout", 0, "Give up waiting for the lock after this long, exit code 3 (0 waits forever)")
	f.DurationVar(&o.grace, "grace", 10*time.Second, "After the lock is lost, how long the command has between SIGTERM and SIGKILL")
	f.StringVar(&o.tokenFile, "token-file", "", "Also write the fencing token to this file")
	_ = cmd.RegisterFlagCompletionFunc("lock", a.completeNames(k, "DistributedLock"))
	return cmd
}

// runOptions are run's flags.
type runOptions struct {
	lock, tokenFile string
	timeout, grace  time.Duration
}

// run takes the lock, runs command under supervise and releases the lock.
func (a *app) run(k *kubeFlags, o *runOptions, command []string) error {
	switch {
	case len(command) == 0:
		return usagef("run needs a command: %s run --lock NAME -- COMMAND [ARG...]", a.name())
	case o.lock == "":
		return usagef("--lock is required")
	case o.timeout < 0 || o.grace < 0:
		return usagef("--timeout and --grace must not be negative")
	}
	pod := a.podFromEnv()
	if pod != nil {
		if err := a.checkPodNamespace(k); err != nil {
			return err
		}
	}
	c, ns, err := a.connect(k)
	if err != nil {
		return err
	}

	// Until the command starts, a signal just stops the wait (and Acquire deletes the claim).
	ctx, cancel := signalContext()
	res, err := c.Acquire(ctx, lockclient.Request{Namespace: ns, Lock: o.lock, Pod: pod, Timeout: o.timeout})
	cancel()
	if err != nil {
		return err
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Release(ctx, ns, res.Claim); err != nil {
			fmt.Fprintln(a.stderr, errorLine(a.name(), "release", err))
		}
	}
	if o.tokenFile != "" {
		if err := writeTokenFile(o.tokenFile, res.FencingToken); err != nil {
			release()
			return err
		}
	}

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"LOCKWARDEN_FENCING_TOKEN="+strconv.FormatInt(res.FencingToken, 10),
		"LOCKWARDEN_LOCK="+res.Lock,
		"LOCKWARDEN_CLAIM="+res.Claim,
		"LOCKWARDEN_NAMESPACE="+res.Namespace,
	)
	// Its own process group, so that signals reach the whole command (a shell and its children).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(signals)
	fmt.Fprintln(a.stderr, a.name()+": "+acquiredLine(res))
	if err := cmd.Start(); err != nil {
		release()
		return fmt.Errorf("starting %s: %w", command[0], err)
	}

	code, lostErr := supervise(cmd, signals, o.grace, func(ctx context.Context) error {
		return c.WaitLost(ctx, ns, res.Claim)
	})
	release()
	if lostErr != nil {
		return lostErr
	}
	return exitStatus(code)
}

// supervise waits for cmd, forwarding signals to its process group. When waitLost reports the lock
// lost, the group gets SIGTERM, then SIGKILL after grace. It returns the command's exit code
// (128+n for a command killed by signal n) and the loss, if any.
func supervise(cmd *exec.Cmd, signals <-chan os.Signal, grace time.Duration, waitLost func(context.Context) error) (int, error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lost := make(chan error, 1)
	go func() { lost <- waitLost(ctx) }()

	group := -cmd.Process.Pid
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
			_ = syscall.Kill(group, syscall.SIGTERM)
			kill = time.After(grace)
		case <-kill:
			_ = syscall.Kill(group, syscall.SIGKILL)
		case s := <-signals:
			if sig, ok := s.(syscall.Signal); ok {
				_ = syscall.Kill(group, sig)
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
