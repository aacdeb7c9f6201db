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
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestAnnotatedSpec: the claim spec a pod's or workload object's annotations ask for, or the
// first annotation that makes none, with the exact message of its Warning event.
func TestAnnotatedSpec(t *testing.T) {
	const (
		lock     = locksv1alpha1.PodLockAnnotation
		mode     = locksv1alpha1.PodLockModeAnnotation
		priority = locksv1alpha1.LockPriorityAnnotation
		timeout  = locksv1alpha1.LockWaitTimeoutAnnotation
	)
	for name, tc := range map[string]struct {
		annotations map[string]string
		owner       ownerKind
		spec        locksv1alpha1.LockClaimSpec
		problem     *annotationProblem
	}{
		"one lock, nothing else": {annotations: map[string]string{lock: "db"},
			spec: locksv1alpha1.LockClaimSpec{LockName: "db"}},
		"several locks, in name order": {annotations: map[string]string{lock: "staging, prod"},
			spec: locksv1alpha1.LockClaimSpec{LockNames: []string{"prod", "staging"}}},
		"mode, priority and timeout of a workload object": {owner: ownerWorkload,
			annotations: map[string]string{lock: "db", mode: "Exclusive", priority: " -7 ", timeout: "30"},
			spec:        locksv1alpha1.LockClaimSpec{LockName: "db", Mode: locksv1alpha1.LockModeExclusive, Priority: -7, WaitTimeoutSeconds: ptr.To[int32](30)}},
		"a timeout of 0 takes the lock only if it is free": {owner: ownerWorkload, annotations: map[string]string{lock: "db", timeout: "0"},
			spec: locksv1alpha1.LockClaimSpec{LockName: "db", WaitTimeoutSeconds: ptr.To[int32](0)}},
		"a pod's claim has no timeout, whatever its annotations": {owner: ownerPod,
			annotations: map[string]string{lock: "db", mode: "Shared", timeout: "-1"},
			spec:        locksv1alpha1.LockClaimSpec{LockName: "db", Mode: locksv1alpha1.LockModeShared}},
		"not a lock name": {annotations: map[string]string{lock: "Not_A_Lock"}, problem: &annotationProblem{"InvalidLockAnnotation",
			`Annotation locks.lockwarden.io/lock="Not_A_Lock" is not a DistributedLock name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'); no claim was made`}},
		"a lock twice": {annotations: map[string]string{lock: "a,b,a"}, problem: &annotationProblem{"InvalidLockAnnotation",
			`Annotation locks.lockwarden.io/lock="a,b,a" names "a" twice; no claim was made`}},
		"not a mode (pod)": {owner: ownerPod, annotations: map[string]string{lock: "db", mode: "exclusive"}, problem: &annotationProblem{"InvalidLockModeAnnotation",
			`Annotation locks.lockwarden.io/lock-mode="exclusive" is not a lock mode: use Shared or Exclusive (absent means Shared); no claim was made`}},
		"not a mode (workload), before a bad priority": {owner: ownerWorkload, annotations: map[string]string{lock: "db", mode: "Sometimes", priority: "high"},
			problem: &annotationProblem{"InvalidLockModeAnnotation",
				`Annotation locks.lockwarden.io/lock-mode="Sometimes" is not a lock mode: use Shared or Exclusive (absent means Shared); no claim was made`}},
		"not a priority": {annotations: map[string]string{lock: "db", priority: "high"}, problem: &annotationProblem{"InvalidLockPriorityAnnotation",
			`Annotation locks.lockwarden.io/lock-priority="high" is not a priority: use a whole number from -2147483648 to 2147483647 (absent means 0; higher is granted first); no claim was made`}},
		"a priority beyond 32 bits": {annotations: map[string]string{lock: "db", priority: "2147483648"}, problem: &annotationProblem{"InvalidLockPriorityAnnotation",
			`Annotation locks.lockwarden.io/lock-priority="2147483648" is not a priority: use a whole number from -2147483648 to 2147483647 (absent means 0; higher is granted first); no claim was made`}},
		"a negative timeout": {owner: ownerWorkload, annotations: map[string]string{lock: "db", timeout: "-1"}, problem: &annotationProblem{"InvalidLockWaitTimeoutAnnotation",
			`Annotation locks.lockwarden.io/lock-wait-timeout-seconds="-1" is not a whole number of seconds from 0 up (0: take the lock only if it is free); no claim was made`}},
		"a timeout that is not a number": {owner: ownerWorkload, annotations: map[string]string{lock: "db", timeout: "1m"}, problem: &annotationProblem{"InvalidLockWaitTimeoutAnnotation",
			`Annotation locks.lockwarden.io/lock-wait-timeout-seconds="1m" is not a whole number of seconds from 0 up (0: take the lock only if it is free); no claim was made`}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			spec, problem := annotatedSpec(tc.annotations, tc.owner)
			g.Expect(problem).To(Equal(tc.problem))
			if tc.problem == nil {
				g.Expect(spec).To(Equal(tc.spec))
			}
		})
	}
}

// TestLockWaitProblem: a lock-wait value that is neither Gated nor Standby is reported, and the
// pod waits as Gated.
func TestLockWaitProblem(t *testing.T) {
	g := NewWithT(t)
	for _, ok := range []map[string]string{{}, {locksv1alpha1.PodLockWaitAnnotation: "Gated"}, {locksv1alpha1.PodLockWaitAnnotation: "Standby"}} {
		g.Expect(lockWaitProblem(ok, "db")).To(BeNil(), "%v", ok)
	}
	g.Expect(lockWaitProblem(map[string]string{locksv1alpha1.PodLockWaitAnnotation: "standby"}, "a,b")).To(Equal(&annotationProblem{"InvalidLockWaitAnnotation",
		`Annotation locks.lockwarden.io/lock-wait="standby" is neither Gated nor Standby: the pod waits as Gated (not scheduled until it holds lock a,b)`}))
}

// TestAnnotationsChanged: a pod whose mode or priority annotation no longer matches its claim is
// told that the claim's, which cannot change, still count.
func TestAnnotationsChanged(t *testing.T) {
	claim := &locksv1alpha1.LockClaim{}
	claim.Name = "web-0-db-0123456789"
	claim.Spec = locksv1alpha1.LockClaimSpec{LockName: "db", Mode: locksv1alpha1.LockModeExclusive, Priority: 5}
	modeMsg := func(annotated string) annotationProblem {
		return annotationProblem{"LockModeChanged", "Annotation locks.lockwarden.io/lock-mode is " + annotated +
			", but LockClaim web-0-db-0123456789 was made with mode Exclusive, which cannot change: the pod holds or waits for lock db in mode Exclusive; replace the pod to hold the lock in another mode"}
	}
	priorityMsg := func(annotated string) annotationProblem {
		return annotationProblem{"LockPriorityChanged", "Annotation locks.lockwarden.io/lock-priority is " + annotated +
			", but LockClaim web-0-db-0123456789 was made with priority 5, which cannot change: the pod holds or waits for lock db at priority 5; replace the pod to wait at another priority"}
	}
	for name, tc := range map[string]struct {
		annotations map[string]string
		want        []annotationProblem
	}{
		"as made": {annotations: map[string]string{locksv1alpha1.PodLockModeAnnotation: "Exclusive", locksv1alpha1.LockPriorityAnnotation: "5"}},
		"both removed": {annotations: map[string]string{},
			want: []annotationProblem{modeMsg("absent (Shared)"), priorityMsg("absent (0)")}},
		"both edited": {annotations: map[string]string{locksv1alpha1.PodLockModeAnnotation: "Shared", locksv1alpha1.LockPriorityAnnotation: "high"},
			want: []annotationProblem{modeMsg(`"Shared"`), priorityMsg(`"high"`)}},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(annotationsChanged(tc.annotations, claim)).To(Equal(tc.want))
		})
	}
}
