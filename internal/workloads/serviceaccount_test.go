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
)

func TestServiceAccount(t *testing.T) {
	reg, err := Parse("batch/v1/Job,tekton.dev/v1/PipelineRun,argoproj.io/v1alpha1/Workflow,tekton.dev/v1/TaskRun")
	if err != nil {
		t.Fatal(err)
	}
	kind := func(k string) Kind {
		for _, c := range reg.Kinds() {
			if c.GVK.Kind == k {
				return c
			}
		}
		t.Fatalf("no kind %s", k)
		return Kind{}
	}
	for _, tc := range []struct {
		name, kind string
		spec       map[string]any
		want       string
	}{
		{"a Job's pod template", "Job", map[string]any{"template": map[string]any{"spec": map[string]any{"serviceAccountName": "batch"}}}, "batch"},
		{"a Job naming none", "Job", map[string]any{"template": map[string]any{"spec": map[string]any{}}}, ""},
		{"a PipelineRun's task run template", "PipelineRun", map[string]any{"taskRunTemplate": map[string]any{"serviceAccountName": "ci"}}, "ci"},
		{"a PipelineRun naming none", "PipelineRun", map[string]any{"pipelineRef": map[string]any{"name": "build"}}, ""},
		{"a Workflow", "Workflow", map[string]any{"serviceAccountName": "argo-run"}, "argo-run"},
		{"a kind that cannot be suspended has none", "TaskRun", map[string]any{"serviceAccountName": "ci"}, ""},
		{"a value of the wrong type is none", "Workflow", map[string]any{"serviceAccountName": int64(3)}, ""},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
		if got := kind(tc.kind).ServiceAccount(obj); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
