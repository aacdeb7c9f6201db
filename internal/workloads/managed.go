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

package workloads

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// KueueQueueLabel puts an object in a Kueue queue: Kueue then suspends and resumes it itself, as
// its quota admits it, and lockwarden's suspension would be undone by the one and would undo the
// other (Kueue admits a Job lockwarden holds back, and lockwarden resumes one Kueue preempted).
const KueueQueueLabel = "kueue.x-k8s.io/queue-name"

// KeptLabels are the labels of a workload object that the rules read (ManagedElsewhere): whoever
// keeps less of an object than all of it keeps these.
var KeptLabels = []string{KueueQueueLabel}

// jobController is the spec.managedBy of a Job that the built-in Job controller runs (also what
// an absent field means).
const jobController = "kubernetes.io/job-controller"

// ManagedElsewhere names the controller that suspends and resumes obj itself, when there is one:
// Kueue, for an object in one of its queues; the controller that a Job's spec.managedBy names
// (MultiKueue, or another), which also decides when the Job runs. lockwarden makes no claim for
// such an object and never patches it.
func ManagedElsewhere(k Kind, obj *unstructured.Unstructured) (manager string, elsewhere bool) {
	if q := obj.GetLabels()[KueueQueueLabel]; q != "" {
		return fmt.Sprintf("Kueue (label %s: %s)", KueueQueueLabel, q), true
	}
	if k.suspend == suspendJob {
		if m := jobManagedByField.stringIn(obj); m != "" && m != jobController {
			return fmt.Sprintf("%s (spec.managedBy)", m), true
		}
	}
	return "", false
}
