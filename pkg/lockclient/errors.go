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

package lockclient

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Sentinel errors, for errors.Is. Every error this package returns about a lock or a claim is an
// *Error that unwraps to one of them.
var (
	// ErrTimedOut: the wait ended (the caller's deadline, or the claim's waitTimeoutSeconds)
	// before the lock was granted.
	ErrTimedOut = errors.New("timed out waiting for the lock")
	// ErrLockNotFound: the DistributedLock does not exist, or is being deleted.
	ErrLockNotFound = errors.New("lock not found")
	// ErrPodNotFound: the holder pod does not exist, was replaced (another UID) or has finished.
	ErrPodNotFound = errors.New("pod not found")
	// ErrBackendNotFound: the lock's LockBackend does not exist or does not admit the namespace.
	ErrBackendNotFound = errors.New("lock backend not usable")
	// ErrKeyConflict: another DistributedLock on the same backend resolves to the lock's key and
	// took it first; the lock grants nothing while that one exists.
	ErrKeyConflict = errors.New("lock key taken by another lock")
	// ErrForbidden: the API server refused a request (RBAC).
	ErrForbidden = errors.New("forbidden")
	// ErrClaimNotFound: the LockClaim does not exist.
	ErrClaimNotFound = errors.New("claim not found")
	// ErrClaimEnded: the claim ended (Released, Lost, Failed) or was deleted without holding
	// the lock.
	ErrClaimEnded = errors.New("claim ended without the lock")
	// ErrLost: a held claim stopped holding its lock.
	ErrLost = errors.New("lock lost")
	// ErrLockBusy: TryAcquire found the lock taken (held, or claims queued ahead) and did not
	// queue, or the lock's queue was full (its spec.maxQueue) and the claim ended without
	// waiting.
	ErrLockBusy = errors.New("lock busy")
	// ErrModeConflict: the pod already has a claim for the lock in another mode than
	// Request.Mode (its lock-mode annotation, or an earlier call, made it), and a claim's mode
	// cannot change.
	ErrModeConflict = errors.New("claim exists in another mode")
	// ErrPriorityConflict: the pod already has a claim for the lock at another priority than
	// Request.Priority (its lock-priority annotation, or an earlier call, made it), and a claim's
	// priority cannot change.
	ErrPriorityConflict = errors.New("claim exists at another priority")
)

// Error describes a failure about one lock or claim. Kind is one of the sentinels above.
type Error struct {
	// Kind is the sentinel that errors.Is matches.
	Kind error
	// Namespace, Lock and Claim name what the error is about; Claim may be empty.
	Namespace, Lock, Claim string
	// Phase and Reason are the claim's phase and Acquired reason, when a claim said so.
	Phase  locksv1alpha1.ClaimPhase
	Reason string
	// Detail is a human-readable explanation on one line.
	Detail string
	// Err is the underlying error (an API error, a context error), if any.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Detail != "":
		return oneLine(e.Detail)
	case e.Err != nil:
		return oneLine(e.Kind.Error() + ": " + e.Err.Error())
	}
	return e.Kind.Error()
}

// Unwrap returns the sentinel and the underlying error.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// apiError turns an API error into an *Error when it is one lockclient names (forbidden), and
// wraps others with what was being done.
func apiError(err error, doing string) error {
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return &Error{Kind: ErrForbidden, Detail: apiMessage(err), Err: err}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// apiMessage is the message the API server gave for err.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return oneLine(status.Status().Message)
	}
	return oneLine(err.Error())
}
