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
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// suspendRule is how an object of a kind waits for its lock in its own suspended state.
type suspendRule int

const (
	// suspendNone: the kind cannot wait suspended; it can hold only through a claim that names it.
	suspendNone suspendRule = iota
	// suspendJob: a batch/v1 Job with spec.suspend true creates no pods.
	suspendJob
	// suspendPipelineRun: a Tekton PipelineRun with spec.status PipelineRunPending does not start.
	suspendPipelineRun
	// suspendWorkflow: an Argo Workflow with spec.suspend true runs no step.
	suspendWorkflow
)

// pipelineRunPending is the spec.status of a PipelineRun that has not been let start.
const pipelineRunPending = "PipelineRunPending"

// SuspendedState says in words how an object of the kind waits for its lock, for docs and
// messages; empty for a kind that cannot.
func (k Kind) SuspendedState() string {
	switch k.suspend {
	case suspendJob, suspendWorkflow:
		return "spec.suspend: true"
	case suspendPipelineRun:
		return "spec.status: " + pipelineRunPending
	}
	return ""
}

// Suspended says whether obj, of kind k, waits in its suspended state.
func Suspended(k Kind, obj *unstructured.Unstructured) bool {
	switch k.suspend {
	case suspendJob, suspendWorkflow:
		return suspendField.boolIn(obj)
	case suspendPipelineRun:
		return runStatusField.stringIn(obj) == pipelineRunPending
	}
	return false
}

// ResumePatch is the JSON merge patch that gives obj (of kind k, UID uid) its fencing token and
// holder identity and lets it run, in one write, so that nothing of the run starts before the
// token is there to read: the annotations on the object, for a Job also on its pod template
// (which Kubernetes lets change while the Job is suspended and has not started; its pods read
// the token from a downward-API file), and the suspended state cleared. The UID is a
// precondition: a patch meant for one run never lands on another of the same name.
func ResumePatch(k Kind, uid types.UID, token, holder string) ([]byte, error) {
	annotations := map[string]any{
		locksv1alpha1.PodFencingTokenAnnotation: token,
		locksv1alpha1.PodHolderAnnotation:       holder,
	}
	spec := map[string]any{}
	switch k.suspend {
	case suspendJob:
		spec["suspend"] = false
		spec["template"] = map[string]any{"metadata": map[string]any{"annotations": annotations}}
	case suspendWorkflow:
		spec["suspend"] = nil
	case suspendPipelineRun:
		spec["status"] = nil
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid, "annotations": annotations},
		"spec":     spec,
	})
}

// SuspendAgainPatch is the JSON merge patch that suspends again a running object (of kind k, UID
// uid) whose hold ended, so that it waits for a new one; ok is false for a kind whose runs cannot
// be held back once started: a PipelineRun is pending only before it starts, and a Job's pod
// template, where its token is, may not change once the Job has started. An Argo Workflow with
// spec.suspend true runs no further step until it is cleared.
func SuspendAgainPatch(k Kind, uid types.UID) (patch []byte, ok bool, err error) {
	if k.suspend != suspendWorkflow {
		return nil, false, nil
	}
	patch, err = json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"spec":     map[string]any{"suspend": true},
	})
	return patch, true, err
}

// TokenPatch is the JSON merge patch that gives a running object (UID uid) its fencing token and
// holder identity, and nothing else: an object created running (not suspended) is not resumed,
// and a running Job's pod template may not change.
func TokenPatch(uid types.UID, token, holder string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid, "annotations": map[string]any{
			locksv1alpha1.PodFencingTokenAnnotation: token,
			locksv1alpha1.PodHolderAnnotation:       holder,
		}},
	})
}
