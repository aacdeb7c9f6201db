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
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The fields of a workload object that this package's rules read (Finished, Check, Suspended,
// ServiceAccount, ManagedElsewhere; its labels are KeptLabels), each a Field that knows its path: the rules read through them, and
// Kind.Fields lists a kind's, so that whoever keeps less of an object than all of it (the
// manager's cache, controller.trimWorkload) keeps exactly what the rules read. A new kind, or a
// rule that reads a new field, changes this package only.

// Field is a field of a workload object that a rule reads: the value at Path and, for a list of
// objects (status.conditions), only Keys of each item.
type Field struct {
	// Path is where the field is, from the object's root: ["spec", "suspend"].
	Path []string
	// Keys, for a list of objects, are the keys of each item that a rule reads; nil: all of the
	// value.
	Keys []string
}

// String spells the field's path with dots: "spec.suspend".
func (f Field) String() string { return strings.Join(f.Path, ".") }

// The keys of a status.conditions item that the rules read.
const (
	keyType   = "type"
	keyStatus = "status"
	keyReason = "reason"
)

var (
	// suspendField is a Job's or an Argo Workflow's spec.suspend (suspendJob, suspendWorkflow).
	suspendField = Field{Path: []string{"spec", "suspend"}}
	// runStatusField is a Tekton PipelineRun's spec.status (suspendPipelineRun).
	runStatusField = Field{Path: []string{"spec", "status"}}
	// phaseField is an Argo Workflow's status.phase (finishWorkflowPhase).
	phaseField = Field{Path: []string{"status", "phase"}}
	// conditionsField is status.conditions, of which the rules read each item's type, status and
	// reason (finishJob, finishSucceededCondition).
	conditionsField = Field{Path: []string{"status", "conditions"}, Keys: []string{keyType, keyStatus, keyReason}}
	// jobAccountField is the service account of a Job's pods.
	jobAccountField = Field{Path: []string{"spec", "template", "spec", "serviceAccountName"}}
	// pipelineRunAccountField is the service account of a PipelineRun's TaskRuns.
	pipelineRunAccountField = Field{Path: []string{"spec", "taskRunTemplate", "serviceAccountName"}}
	// workflowAccountField is the service account of a Workflow's steps.
	workflowAccountField = Field{Path: []string{"spec", "serviceAccountName"}}
	// jobManagedByField names the controller that runs a Job, when not the Job controller
	// (ManagedElsewhere).
	jobManagedByField = Field{Path: []string{"spec", "managedBy"}}
)

// Fields lists the fields that the rules read of an object of the kind; none for a kind whose
// only end is its deletion and that cannot wait suspended.
func (k Kind) Fields() []Field {
	var fields []Field
	switch k.finish {
	case finishJob, finishSucceededCondition:
		fields = append(fields, conditionsField)
	case finishWorkflowPhase:
		fields = append(fields, phaseField)
	}
	if f, ok := k.suspend.stateField(); ok {
		fields = append(fields, f)
	}
	if f, ok := k.suspend.accountField(); ok {
		fields = append(fields, f)
	}
	if k.suspend == suspendJob {
		fields = append(fields, jobManagedByField)
	}
	return fields
}

// stateField is the field that holds the suspended state of a kind that waits by this rule.
func (r suspendRule) stateField() (Field, bool) {
	switch r {
	case suspendJob, suspendWorkflow:
		return suspendField, true
	case suspendPipelineRun:
		return runStatusField, true
	}
	return Field{}, false
}

// accountField is the field that names the service account of a kind that waits by this rule.
func (r suspendRule) accountField() (Field, bool) {
	switch r {
	case suspendJob:
		return jobAccountField, true
	case suspendPipelineRun:
		// Every TaskRun of the run, unless the run names another account for one task
		// (taskRunSpecs): the run's own account is the one its author chose for the whole.
		return pipelineRunAccountField, true
	case suspendWorkflow:
		return workflowAccountField, true
	}
	return Field{}, false
}

// stringIn is the field's value in obj as a string; empty when it is absent or not a string.
func (f Field) stringIn(obj *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(obj.Object, f.Path...)
	return s
}

// boolIn is the field's value in obj as a bool; false when it is absent or not a bool.
func (f Field) boolIn(obj *unstructured.Unstructured) bool {
	b, _, _ := unstructured.NestedBool(obj.Object, f.Path...)
	return b
}

// itemIn is the item of the field's list in obj whose key is value; nil when there is none.
func (f Field) itemIn(obj *unstructured.Unstructured, key, value string) map[string]any {
	items, _, _ := unstructured.NestedSlice(obj.Object, f.Path...)
	for _, item := range items {
		if m, ok := item.(map[string]any); ok && m[key] == value {
			return m
		}
	}
	return nil
}
