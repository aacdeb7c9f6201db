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

// Package podliveness decides whether the pod a lock is held for is still alive, by the rules of
// DESIGN.md §3: a holder is dead when its pod object is gone, when a pod of the same name has
// another UID (the original was replaced), or when its phase is Succeeded or Failed. A terminating
// pod still holds: its containers may still run.
package podliveness

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Verdict is the outcome of a liveness check.
type Verdict struct {
	// Alive is true while the lock may be held for the pod.
	Alive bool
	// Reason says, for a dead holder, why, in words fit for a condition message.
	Reason string
	// Completed is true for a dead holder that ran to completion (phase Succeeded): none of its
	// processes remain, and it ended as its program meant to, so a lock delay serves nothing.
	Completed bool
}

// Check judges pod (nil when the object does not exist) against the UID recorded when the lock
// was granted (empty when none was recorded yet).
func Check(pod *corev1.Pod, name string, recordedUID types.UID) Verdict {
	switch {
	case pod == nil:
		return Verdict{Reason: fmt.Sprintf("pod %s no longer exists", name)}
	case recordedUID != "" && pod.UID != recordedUID:
		return Verdict{Reason: fmt.Sprintf("pod %s was replaced (UID %s, held for %s)", name, pod.UID, recordedUID)}
	case pod.Status.Phase == corev1.PodSucceeded:
		return Verdict{Reason: fmt.Sprintf("pod %s succeeded", name), Completed: true}
	case pod.Status.Phase == corev1.PodFailed:
		return Verdict{Reason: fmt.Sprintf("pod %s failed", name)}
	default:
		return Verdict{Alive: true}
	}
}
