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

package controller

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// This file holds what an annotated owner (a pod, or a workload object) asks for by its
// annotations: its locks, and the claim spec (mode, priority, wait timeout), with the message of
// the Warning event that says what is wrong with a value. Its functions are pure. The other half,
// owned_claim.go, finds, allows and creates the owner's claim with them; podlock_controller.go and
// workload_controller.go call both.

// ownerKind is the kind of object that asks for a claim by annotation: pods and workload objects
// read the same annotations but two.
type ownerKind int

const (
	// ownerPod: the lock-wait annotation counts (a pod waits Gated or Standby); the wait timeout
	// does not (a pod waits until it holds).
	ownerPod ownerKind = iota
	// ownerWorkload: the wait timeout counts; a workload object waits in its suspended state.
	ownerWorkload
)

// annotationProblem is an annotation that makes no claim, or that the claim does not follow: the
// reason and message of the Warning event on the owner that says so.
type annotationProblem struct {
	reason, message string
}

// annotatedSpec is the claim spec that an owner's annotations ask for: its locks (spec.lockName,
// or spec.lockNames for several), mode, priority and, for a workload object, wait timeout; or the
// first annotation that cannot make one. The holder is the caller's to set.
func annotatedSpec(annotations map[string]string, owner ownerKind) (locksv1alpha1.LockClaimSpec, *annotationProblem) {
	var spec locksv1alpha1.LockClaimSpec
	label, problem := annotatedLocks(annotations)
	if problem != nil {
		return spec, problem
	}
	spec.LockName = label
	if names := lockNamesOf(label); len(names) > 1 {
		spec.LockName, spec.LockNames = "", names
	}
	mode, ok := annotatedMode(annotations)
	if !ok {
		return spec, &annotationProblem{"InvalidLockModeAnnotation", invalidModeMessage(annotations)}
	}
	spec.Mode = mode
	if spec.Priority, ok = annotatedPriority(annotations); !ok {
		return spec, &annotationProblem{"InvalidLockPriorityAnnotation", invalidPriorityMessage(annotations)}
	}
	if owner == ownerWorkload {
		if spec.WaitTimeoutSeconds, ok = annotatedWaitTimeout(annotations); !ok {
			return spec, &annotationProblem{"InvalidLockWaitTimeoutAnnotation", invalidWaitTimeoutMessage(annotations)}
		}
	}
	return spec, nil
}

// annotatedLocks reads the lock annotation: its locks in name order joined by commas (the label
// that names the owner's hold, its claim and its messages), or what is wrong with it.
func annotatedLocks(annotations map[string]string) (label string, problem *annotationProblem) {
	value := annotations[locksv1alpha1.PodLockAnnotation]
	label, wrong := parseLockAnnotation(value)
	if wrong != "" {
		return "", &annotationProblem{"InvalidLockAnnotation",
			fmt.Sprintf("Annotation %s=%q %s; no claim was made", locksv1alpha1.PodLockAnnotation, value, wrong)}
	}
	return label, nil
}

// Several locks: an owner annotated with a comma-separated list of 2 to 8 locks holds them
// together (spec.lockNames). Its lockName in the controllers is then the list in name order,
// joined by commas (locksv1alpha1.LocksLabel): the key of its hold, its claim's name and its
// messages.

// parseLockAnnotation reads the lock annotation's value: one lock, or 2 to 8 separated by commas;
// the result is the locks in name order joined by commas, or what is wrong with the value, to
// follow it in a message ("Annotation lock=<value> <problem>").
func parseLockAnnotation(value string) (label, problem string) {
	if !strings.Contains(value, ",") {
		if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
			return "", fmt.Sprintf("is not a DistributedLock name: %s", errs[0])
		}
		return value, ""
	}
	var names []string
	seen := map[string]bool{}
	for n := range strings.SplitSeq(value, ",") {
		n = strings.TrimSpace(n)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return "", fmt.Sprintf("lists %q, which is not a DistributedLock name (name one lock, or 2 to 8 separated by commas): %s", n, errs[0])
		}
		if seen[n] {
			return "", fmt.Sprintf("names %q twice", n)
		}
		seen[n] = true
		names = append(names, n)
	}
	if len(names) > maxLocksTogether {
		return "", fmt.Sprintf("names %d locks: at most %d are held together", len(names), maxLocksTogether)
	}
	slices.Sort(names)
	return locksv1alpha1.LocksLabel(names), ""
}

// maxLocksTogether is how many locks one claim holds at most (spec.lockNames' CEL bound).
const maxLocksTogether = 8

// lockNamesOf are the locks of a label that parseLockAnnotation made.
func lockNamesOf(label string) []string { return strings.Split(label, ",") }

// annotatedMode is the mode a lock-mode annotation asks for: empty when the annotation is absent
// (the API server then defaults the claim to Shared), and ok false when its value is not a mode.
func annotatedMode(annotations map[string]string) (mode locksv1alpha1.LockMode, ok bool) {
	value, set := annotations[locksv1alpha1.PodLockModeAnnotation]
	if !set {
		return "", true
	}
	mode = locksv1alpha1.LockMode(value)
	return mode, mode.IsValid()
}

// invalidModeMessage says what is wrong with a lock-mode annotation.
func invalidModeMessage(annotations map[string]string) string {
	return fmt.Sprintf("Annotation %s=%q is not a lock mode: use %s or %s (absent means %s); no claim was made",
		locksv1alpha1.PodLockModeAnnotation, annotations[locksv1alpha1.PodLockModeAnnotation],
		locksv1alpha1.LockModeShared, locksv1alpha1.LockModeExclusive, locksv1alpha1.LockModeShared)
}

// annotatedPriority is the priority a lock-priority annotation asks for: 0 when the annotation is
// absent, and ok false when its value is not a 32-bit whole number.
func annotatedPriority(annotations map[string]string) (priority int32, ok bool) {
	value, set := annotations[locksv1alpha1.LockPriorityAnnotation]
	if !set {
		return 0, true
	}
	p, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(p), true
}

// invalidPriorityMessage says what is wrong with a lock-priority annotation.
func invalidPriorityMessage(annotations map[string]string) string {
	return fmt.Sprintf("Annotation %s=%q is not a priority: use a whole number from %d to %d (absent means 0; higher is granted first); no claim was made",
		locksv1alpha1.LockPriorityAnnotation, annotations[locksv1alpha1.LockPriorityAnnotation], math.MinInt32, math.MaxInt32)
}

// annotatedWaitTimeout is the spec.waitTimeoutSeconds a lock-wait-timeout-seconds annotation asks
// for: nil when the annotation is absent, and ok false when its value is not a whole number of
// seconds from 0 up.
func annotatedWaitTimeout(annotations map[string]string) (timeout *int32, ok bool) {
	value, set := annotations[locksv1alpha1.LockWaitTimeoutAnnotation]
	if !set {
		return nil, true
	}
	seconds, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil || seconds < 0 {
		return nil, false
	}
	t := int32(seconds)
	return &t, true
}

// invalidWaitTimeoutMessage says what is wrong with a lock-wait-timeout-seconds annotation.
func invalidWaitTimeoutMessage(annotations map[string]string) string {
	return fmt.Sprintf("Annotation %s=%q is not a whole number of seconds from 0 up (0: take the lock only if it is free); no claim was made",
		locksv1alpha1.LockWaitTimeoutAnnotation, annotations[locksv1alpha1.LockWaitTimeoutAnnotation])
}

// lockWaitProblem says what is wrong with a pod's lock-wait annotation: nil when it is absent or
// one of its two values. A pod with another value still gets its claim, and waits as Gated
// (label: the locks it waits for).
func lockWaitProblem(annotations map[string]string, label string) *annotationProblem {
	v, set := annotations[locksv1alpha1.PodLockWaitAnnotation]
	if !set || v == locksv1alpha1.PodLockWaitGated || v == locksv1alpha1.PodLockWaitStandby {
		return nil
	}
	return &annotationProblem{"InvalidLockWaitAnnotation", fmt.Sprintf(
		"Annotation %s=%q is neither %s nor %s: the pod waits as %s (not scheduled until it holds lock %s)",
		locksv1alpha1.PodLockWaitAnnotation, v, locksv1alpha1.PodLockWaitGated, locksv1alpha1.PodLockWaitStandby,
		locksv1alpha1.PodLockWaitGated, label)}
}

// annotationsChanged are the Warning events a pod gets when its lock-mode or lock-priority
// annotation no longer asks for what its existing claim was made with (someone edited or removed
// it after the claim was created): both are immutable, so the pod holds or waits as its claim says.
func annotationsChanged(annotations map[string]string, claim *locksv1alpha1.LockClaim) []annotationProblem {
	var changed []annotationProblem
	label := locksv1alpha1.LocksLabel(claim.Spec.Locks())
	if annotated, differs := modeChanged(annotations, claim); differs {
		changed = append(changed, annotationProblem{"LockModeChanged", fmt.Sprintf(
			"Annotation %s is %s, but LockClaim %s was made with mode %s, which cannot change: the pod holds or waits for lock %s in mode %s; replace the pod to hold the lock in another mode",
			locksv1alpha1.PodLockModeAnnotation, annotated, claim.Name, modeOf(claim), label, modeOf(claim))})
	}
	if annotated, differs := priorityChanged(annotations, claim); differs {
		changed = append(changed, annotationProblem{"LockPriorityChanged", fmt.Sprintf(
			"Annotation %s is %s, but LockClaim %s was made with priority %d, which cannot change: the pod holds or waits for lock %s at priority %d; replace the pod to wait at another priority",
			locksv1alpha1.LockPriorityAnnotation, annotated, claim.Name, claim.Spec.Priority, label, claim.Spec.Priority)})
	}
	return changed
}

// modeOf is the claim's mode, Shared when the claim predates modes.
func modeOf(claim *locksv1alpha1.LockClaim) locksv1alpha1.LockMode {
	if claim.Spec.Mode == "" {
		return locksv1alpha1.LockModeShared
	}
	return claim.Spec.Mode
}

// modeChanged says whether the lock-mode annotation no longer asks for the mode the existing
// claim was made with, and describes the annotation for a message: its quoted value, or that it
// is absent.
func modeChanged(annotations map[string]string, claim *locksv1alpha1.LockClaim) (annotated string, changed bool) {
	mode, ok := annotatedMode(annotations)
	annotated = strconv.Quote(string(mode))
	if ok && mode == "" {
		mode, annotated = locksv1alpha1.LockModeShared, "absent (Shared)"
	}
	return annotated, !ok || mode != modeOf(claim)
}

// priorityChanged says whether the lock-priority annotation no longer asks for the existing
// claim's priority, and describes the annotation for a message: its quoted value, or that it is
// absent.
func priorityChanged(annotations map[string]string, claim *locksv1alpha1.LockClaim) (annotated string, changed bool) {
	priority, ok := annotatedPriority(annotations)
	value, set := annotations[locksv1alpha1.LockPriorityAnnotation]
	annotated = strconv.Quote(value)
	if !set {
		annotated = "absent (0)"
	}
	return annotated, !ok || priority != claim.Spec.Priority
}
