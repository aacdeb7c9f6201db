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
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockwarden/lockwarden/internal/podliveness"
)

// finishRule is how an object of a kind shows that it has finished.
type finishRule int

const (
	// finishDeletion: the kind has no finished state; only its deletion ends a hold.
	finishDeletion finishRule = iota
	// finishJob: a batch/v1 Job's Complete or Failed condition is True. (The earlier
	// SuccessCriteriaMet and FailureTarget conditions are not the end: the Job's pods may still be
	// terminating then.)
	finishJob
	// finishSucceededCondition: a Tekton run's Succeeded condition is True or False (False also
	// for a cancelled or timed-out run).
	finishSucceededCondition
	// finishWorkflowPhase: an Argo Workflow's status.phase is Succeeded, Failed or Error.
	finishWorkflowPhase
)

// Outcome is how far an object of a watched kind has run.
type Outcome int

const (
	// Running means the object has not finished (or its kind ends only by deletion).
	Running Outcome = iota
	// Succeeded means it finished as it meant to.
	Succeeded
	// Failed means it finished otherwise: failed, cancelled, timed out.
	Failed
)

// Finished says how far obj, an object of kind k, has run, and in words why it counts as
// finished ("condition Complete is True").
func Finished(k Kind, obj *unstructured.Unstructured) (Outcome, string) {
	switch k.finish {
	case finishJob:
		if condition(obj, "Complete") == "True" {
			return Succeeded, "its condition Complete is True"
		}
		if condition(obj, "Failed") == "True" {
			return Failed, "its condition Failed is True" + conditionReason(obj, "Failed")
		}
	case finishSucceededCondition:
		switch condition(obj, "Succeeded") {
		case "True":
			return Succeeded, "its condition Succeeded is True"
		case "False":
			return Failed, "its condition Succeeded is False" + conditionReason(obj, "Succeeded")
		}
	case finishWorkflowPhase:
		switch phase := phaseField.stringIn(obj); phase {
		case "Succeeded":
			return Succeeded, "its phase is Succeeded"
		case "Failed", "Error":
			return Failed, "its phase is " + phase
		}
	}
	return Running, ""
}

// Check judges a holder object of kind k: obj is the object (nil when it does not exist), name
// its name, and recordedUID the UID the claim recorded when it first saw it (empty when none yet).
// An object that finished, is gone, or was replaced by another of the same name is dead. A
// success is a completion (no lock delay), and so is the deletion of a kind that has no finished
// state, since deleting it is how its hold is meant to end; a failure, or a run deleted or
// replaced before it finished, is not. An object being deleted still holds, as a terminating pod
// does: what it runs may still run.
func Check(k Kind, obj *unstructured.Unstructured, name string, recordedUID types.UID) podliveness.Verdict {
	what := k.GVK.Kind + " " + name
	switch {
	case obj == nil:
		return podliveness.Verdict{Reason: what + " no longer exists", Completed: k.finish == finishDeletion}
	case recordedUID != "" && obj.GetUID() != recordedUID:
		return podliveness.Verdict{Reason: fmt.Sprintf("%s was replaced (UID %s, held for %s)", what, obj.GetUID(), recordedUID),
			Completed: k.finish == finishDeletion}
	}
	switch outcome, why := Finished(k, obj); outcome {
	case Succeeded:
		return podliveness.Verdict{Reason: what + " succeeded: " + why, Completed: true}
	case Failed:
		return podliveness.Verdict{Reason: what + " failed: " + why}
	}
	return podliveness.Verdict{Alive: true}
}

// condition is the status of obj's status.conditions entry of type t; empty when it has none.
func condition(obj *unstructured.Unstructured, t string) string {
	s, _ := conditionsField.itemIn(obj, keyType, t)[keyStatus].(string)
	return s
}

// conditionReason is the reason of obj's condition of type t, as it follows a status in a
// message (" (reason)"); empty when there is none.
func conditionReason(obj *unstructured.Unstructured, t string) string {
	if r, _ := conditionsField.itemIn(obj, keyType, t)[keyReason].(string); r != "" {
		return " (" + r + ")"
	}
	return ""
}
