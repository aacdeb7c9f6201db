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
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// Exit codes of acquire, wait, release, status and version.
const (
	exitOK          = 0 // acquired, released, done
	exitError       = 1 // anything else: API server unreachable, token file not writable, ...
	exitUsage       = 2 // bad flags or arguments, missing POD_* environment
	exitTimedOut    = 3 // --timeout passed before the lock was granted
	exitClaimFailed = 4 // lock, pod, backend or claim missing, claim ended, another mode, or forbidden
	exitBusy        = 5 // acquire --try: the lock is taken
)

// Exit codes of run that are lockctl's own, not its command's. They sit just below the shell's
// 128+signal, where timeout(1) and env(1) put theirs (124 timed out, 125 the tool failed, 126
// not executable, 127 not found), so that a command's usual codes (0 to 119) pass through
// unmistaken. A command that exits 120 to 127 itself looks like lockctl: the docs say so.
const (
	runError          = 120 // lockctl failed: API server unreachable, token file not writable, ...
	runBusy           = 121 // --try: the lock is taken; COMMAND did not run
	runClaimFailed    = 122 // lock, pod, backend or claim missing, claim ended, or forbidden
	runLockLost       = 123 // the lock was lost while COMMAND ran; COMMAND was stopped
	runTimedOut       = 124 // --timeout passed before the lock was granted; COMMAND did not run
	runUsage          = 125 // bad flags or arguments
	runCannotExecute  = 126 // COMMAND was found but could not be started (not executable)
	runCommandMissing = 127 // COMMAND was not found
)

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// exitCode maps an error to the exit code of lockctl's command cmd ("acquire", "run", ...).
func exitCode(cmd string, err error) int {
	if cmd == "run" {
		return runExitCode(err)
	}
	var usage *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		return exitUsage
	case errors.Is(err, lockclient.ErrLockBusy):
		return exitBusy
	case errors.Is(err, lockclient.ErrTimedOut):
		return exitTimedOut
	case errors.Is(err, lockclient.ErrLockNotFound), errors.Is(err, lockclient.ErrPodNotFound),
		errors.Is(err, lockclient.ErrForbidden), errors.Is(err, lockclient.ErrBackendNotFound), errors.Is(err, lockclient.ErrKeyConflict),
		errors.Is(err, lockclient.ErrClaimNotFound), errors.Is(err, lockclient.ErrClaimEnded), errors.Is(err, lockclient.ErrModeConflict),
		errors.Is(err, lockclient.ErrPriorityConflict):
		return exitClaimFailed
	}
	return exitError
}

// runExitCode maps an error of run to its exit code: lockctl's own codes (120 to 127), 128+n
// when signal n stopped lockctl before its command ran, and the command's code (exitStatus).
func runExitCode(err error) int {
	var usage *usageError
	var status exitStatus
	var cmdErr *commandError
	var sig *interrupted
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &status):
		return int(status)
	case errors.As(err, &usage):
		return runUsage
	case errors.As(err, &cmdErr) && cmdErr.missing:
		return runCommandMissing
	case errors.As(err, &cmdErr):
		return runCannotExecute
	case errors.As(err, &sig):
		return 128 + int(sig.signal)
	}
	switch exitCode("", err) {
	case exitBusy:
		return runBusy
	case exitTimedOut:
		return runTimedOut
	case exitClaimFailed:
		return runClaimFailed
	}
	if errors.Is(err, lockclient.ErrLost) {
		return runLockLost
	}
	return runError
}

// commandError says that run's command could not be started.
type commandError struct {
	command string
	// missing: no such file, or not on PATH; else it exists but cannot be executed.
	missing bool
	err     error
}

func (e *commandError) Error() string {
	cause := e.err
	var execErr *exec.Error
	var pathErr *fs.PathError
	if errors.As(cause, &execErr) {
		cause = execErr.Err
	}
	if errors.As(cause, &pathErr) {
		cause = pathErr.Err
	}
	switch {
	case errors.Is(cause, exec.ErrNotFound):
		return fmt.Sprintf("command %q not found in PATH", e.command)
	case e.missing:
		return fmt.Sprintf("command %q not found: %v", e.command, cause)
	}
	return fmt.Sprintf("cannot execute %q: %v", e.command, cause)
}

func (e *commandError) Unwrap() error { return e.err }

// interrupted says that a signal stopped lockctl while it waited for a lock.
type interrupted struct {
	signal syscall.Signal
	lock   string
}

func (e *interrupted) Error() string {
	return fmt.Sprintf("interrupted by %s while waiting for lock %q; the claim was withdrawn", signalName(e.signal), e.lock)
}

// signalName is a signal's conventional name: SIGHUP, SIGTERM.
func signalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(s))
}

// errorLine is the one line that lockctl, invoked as prog ("lockctl", "kubectl lock"), prints to
// stderr for err from its command cmd ("acquire"; "" for none): what went wrong and what to do.
func errorLine(prog, cmd string, err error) string {
	var usage *usageError
	var lerr *lockclient.Error
	ns, lock := "NAMESPACE", "LOCK"
	if errors.As(err, &lerr) {
		if lerr.Namespace != "" {
			ns = lerr.Namespace
		}
		if lerr.Lock != "" {
			lock = lerr.Lock
		}
	}
	var hint string
	switch {
	case errors.As(err, &usage) && cmd == "":
		hint = fmt.Sprintf("run %s --help", prog)
	case errors.As(err, &usage):
		hint = fmt.Sprintf("see %s %s -h", prog, cmd)
	case errors.Is(err, lockclient.ErrExpired):
		hint = "its fencing token may be stale; the command was stopped (is the API server reachable from here?)"
	case errors.Is(err, lockclient.ErrLost):
		hint = "its fencing token is stale; the command was stopped"
	case errors.Is(err, lockclient.ErrLockBusy):
		hint = fmt.Sprintf("try again later, or see who holds it: %s status %s -n %s", prog, lock, ns)
	case errors.Is(err, lockclient.ErrTimedOut) && cmd == "release":
		hint = "check that the lockwarden controller is running"
	case errors.Is(err, lockclient.ErrTimedOut):
		hint = fmt.Sprintf("raise --timeout, or see who holds the lock: %s status %s -n %s", prog, lock, ns)
	case errors.Is(err, lockclient.ErrLockNotFound):
		hint = "create the DistributedLock or fix --lock"
	case errors.Is(err, lockclient.ErrPodNotFound) && cmd == "acquire":
		hint = "set POD_NAME, POD_NAMESPACE and POD_UID from the downward API of the pod lockctl runs in (docs/lockctl.md)"
	case errors.Is(err, lockclient.ErrPodNotFound):
		hint = "the claim's pod is gone; create a new claim"
	case errors.Is(err, lockclient.ErrForbidden) && strings.Contains(err.Error(), `resource "leases"`):
		// Only lockctl run outside a pod writes a Lease, its heartbeat, which the lockctl Role
		// leaves out on purpose.
		hint = "give the account the lockctl-run Role (config/samples/pods/lockctl-run-rbac.yaml), or pass --heartbeat 0"
	case errors.Is(err, lockclient.ErrForbidden):
		hint = "give the service account the lockctl Role (config/samples/pods/lockctl-rbac.yaml) or fix --as"
	case errors.Is(err, lockclient.ErrBackendNotFound):
		hint = "ask a cluster admin to create the LockBackend or admit this namespace, or fix the lock's spec.backendRef"
	case errors.Is(err, lockclient.ErrKeyConflict):
		hint = "give the DistributedLock another spec.key (re-create it), or delete the lock that took the key"
	case errors.Is(err, lockclient.ErrClaimNotFound):
		hint = fmt.Sprintf("list the claims with: kubectl get lockclaims -n %s", ns)
	case errors.Is(err, lockclient.ErrClaimEnded):
		hint = fmt.Sprintf("run %s again to queue a new claim", prog)
	case errors.Is(err, lockclient.ErrModeConflict):
		hint = "give --mode the claim's mode (the pod's locks.lockwarden.io/lock-mode annotation sets it) or leave --mode out"
	case errors.Is(err, lockclient.ErrPriorityConflict):
		hint = "give --priority the claim's priority (the pod's locks.lockwarden.io/lock-priority annotation sets it) or leave --priority out"
	}
	var cmdErr *commandError
	switch {
	case errors.As(err, &cmdErr) && cmdErr.missing:
		hint = "check the command's name and PATH"
	case errors.As(err, &cmdErr):
		hint = "check the file's permissions and interpreter line"
	}
	if errors.Is(err, context.Canceled) && lerr == nil {
		return prog + ": interrupted by a signal"
	}
	line := prog + ": " + err.Error()
	if hint != "" {
		line += "; " + hint
	}
	return strings.Join(strings.Fields(line), " ")
}
