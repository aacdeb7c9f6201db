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
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// object is an object of kind gvk named "run", with UID uid and the given status.
func object(gvk schema.GroupVersionKind, uid types.UID, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetGroupVersionKind(gvk)
	u.SetName("run")
	u.SetUID(uid)
	return u
}

// conditions is a status with the given condition types and statuses (and reason r on each).
func conditions(r string, typeStatus ...string) map[string]any {
	var list []any
	for i := 0; i+1 < len(typeStatus); i += 2 {
		list = append(list, map[string]any{"type": typeStatus[i], "status": typeStatus[i+1], "reason": r})
	}
	return map[string]any{"conditions": list}
}

func TestCheck(t *testing.T) {
	r, err := Parse("batch/v1/Job,tekton.dev/v1/PipelineRun,argoproj.io/v1alpha1/Workflow,v1/ConfigMap")
	if err != nil {
		t.Fatal(err)
	}
	kind := func(gvk schema.GroupVersionKind) Kind {
		k, ok := r.Lookup(gvk.GroupKind())
		if !ok {
			t.Fatalf("%s not listed", gvk)
		}
		return k
	}
	configMap := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	cases := []struct {
		name      string
		kind      schema.GroupVersionKind
		obj       *unstructured.Unstructured
		recorded  types.UID
		alive     bool
		reason    string
		completed bool
	}{
		{"job running", Job, object(Job, "u1", conditions("", "Suspended", "False")), "u1", true, "", false},
		{"job with nothing recorded yet", Job, object(Job, "u1", nil), "", true, "", false},
		{"job whose success criteria are met but pods still terminate", Job, object(Job, "u1", conditions("", "SuccessCriteriaMet", "True")), "u1", true, "", false},
		{"job failing but not failed yet", Job, object(Job, "u1", conditions("BackoffLimitExceeded", "FailureTarget", "True")), "u1", true, "", false},
		{"job complete", Job, object(Job, "u1", conditions("", "SuccessCriteriaMet", "True", "Complete", "True")), "u1", false,
			"Job run succeeded: its condition Complete is True", true},
		{"job failed", Job, object(Job, "u1", conditions("BackoffLimitExceeded", "Failed", "True")), "u1", false,
			"Job run failed: its condition Failed is True (BackoffLimitExceeded)", false},
		{"job deleted", Job, nil, "u1", false, "Job run no longer exists", false},
		{"job replaced", Job, object(Job, "u2", nil), "u1", false, "Job run was replaced (UID u2, held for u1)", false},
		{"pipelinerun running", PipelineRun, object(PipelineRun, "u1", conditions("Running", "Succeeded", "Unknown")), "u1", true, "", false},
		{"pipelinerun succeeded", PipelineRun, object(PipelineRun, "u1", conditions("Succeeded", "Succeeded", "True")), "u1", false,
			"PipelineRun run succeeded: its condition Succeeded is True", true},
		{"pipelinerun cancelled", PipelineRun, object(PipelineRun, "u1", conditions("Cancelled", "Succeeded", "False")), "u1", false,
			"PipelineRun run failed: its condition Succeeded is False (Cancelled)", false},
		{"workflow running", Workflow, object(Workflow, "u1", map[string]any{"phase": "Running"}), "u1", true, "", false},
		{"workflow pending", Workflow, object(Workflow, "u1", map[string]any{"phase": "Pending"}), "u1", true, "", false},
		{"workflow succeeded", Workflow, object(Workflow, "u1", map[string]any{"phase": "Succeeded"}), "u1", false, "Workflow run succeeded: its phase is Succeeded", true},
		{"workflow error", Workflow, object(Workflow, "u1", map[string]any{"phase": "Error"}), "u1", false, "Workflow run failed: its phase is Error", false},
		{"workflow failed", Workflow, object(Workflow, "u1", map[string]any{"phase": "Failed"}), "u1", false, "Workflow run failed: its phase is Failed", false},
		{"a kind without a finished state lives while it exists", configMap, object(configMap, "u1", conditions("", "Complete", "True")), "u1", true, "", false},
		{"its deletion is its normal end", configMap, nil, "u1", false, "ConfigMap run no longer exists", true},
		{"so is its replacement", configMap, object(configMap, "u2", nil), "u1", false, "ConfigMap run was replaced (UID u2, held for u1)", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Check(kind(c.kind), c.obj, "run", c.recorded)
			if got.Alive != c.alive || got.Reason != c.reason || got.Completed != c.completed {
				t.Fatalf("Check = %+v, want alive=%v reason=%q completed=%v", got, c.alive, c.reason, c.completed)
			}
		})
	}
}
