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
	"strings"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// Exit codes. `lockctl run` exits with its command's code unless the lock was lost.
const (
	exitOK          = 0 // acquired, released, done
	exitError       = 1 // anything else: API server unreachable, token file not writable, ...
	exitUsage       = 2 // bad flags or arguments, missing POD_* environment
	exitTimedOut    = 3 // --timeout passed before the lock was granted
	exitClaimFailed = 4 // lock, pod, backend or claim missing, claim ended, or forbidden
	exitLockLost    = 5 // run: the lock was lost while the command ran
)

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// exitCode maps an error to lockctl's exit code.
func exitCode(err error) int {
	var usage *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		return exitUsage
	case errors.Is(err, lockclient.ErrLost):
		return exitLockLost
	case errors.Is(err, lockclient.ErrTimedOut):
		return exitTimedOut
	case errors.Is(err, lockclient.ErrLockNotFound), errors.Is(err, lockclient.ErrPodNotFound),
		errors.Is(err, lockclient.ErrForbidden), errors.Is(err, lockclient.ErrBackendNotFound), errors.Is(err, lockclient.ErrKeyConflict),
		errors.Is(err, lockclient.ErrClaimNotFound), errors.Is(err, lockclient.ErrClaimEnded):
		return exitClaimFailed
	}
	return exitError
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
	case errors.Is(err, lockclient.ErrLost):
		hint = "its fencing token is stale; the command was stopped"
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
