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
	"slices"
	"testing"
)

// TestFields: each kind lists the fields its rules read, and nothing for a kind that only ends by
// deletion.
func TestFields(t *testing.T) {
	r, err := Parse("batch/v1/Job,tekton.dev/v1/PipelineRun,tekton.dev/v1/TaskRun,argoproj.io/v1alpha1/Workflow,v1/ConfigMap")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"batch/v1/Job":                  {"status.conditions", "spec.suspend", "spec.template.spec.serviceAccountName", "spec.managedBy"},
		"tekton.dev/v1/PipelineRun":     {"status.conditions", "spec.status", "spec.taskRunTemplate.serviceAccountName"},
		"tekton.dev/v1/TaskRun":         {"status.conditions"},
		"argoproj.io/v1alpha1/Workflow": {"status.phase", "spec.suspend", "spec.serviceAccountName"},
		"v1/ConfigMap":                  nil,
	}
	for _, k := range r.Kinds() {
		var got []string
		for _, f := range k.Fields() {
			got = append(got, f.String())
			if f.String() == "status.conditions" && !slices.Equal(f.Keys, []string{"type", "status", "reason"}) {
				t.Errorf("%s: status.conditions keeps %v, want type, status, reason", k, f.Keys)
			}
		}
		if !slices.Equal(got, want[k.String()]) {
			t.Errorf("%s: Fields %v, want %v", k, got, want[k.String()])
		}
	}
}
