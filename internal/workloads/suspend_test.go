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
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSuspendedAndResume(t *testing.T) {
	r, err := Parse("batch/v1/Job,tekton.dev/v1/PipelineRun,argoproj.io/v1alpha1/Workflow")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		kind      string
		suspended map[string]any
		running   map[string]any
		resumed   string
	}{
		{"Job", map[string]any{"suspend": true, "parallelism": int64(2)}, map[string]any{"suspend": false},
			`{"metadata":{"annotations":{"locks.lockwarden.io/fencing-token":"7","locks.lockwarden.io/holder":"h"},"uid":"u1"},` +
				`"spec":{"parallelism":2,"suspend":false,"template":{"metadata":{"annotations":{"locks.lockwarden.io/fencing-token":"7","locks.lockwarden.io/holder":"h"}}}}}`},
		{"PipelineRun", map[string]any{"status": "PipelineRunPending", "timeouts": "1h"}, map[string]any{"status": "Cancelled"},
			`{"metadata":{"annotations":{"locks.lockwarden.io/fencing-token":"7","locks.lockwarden.io/holder":"h"},"uid":"u1"},"spec":{"timeouts":"1h"}}`},
		{"Workflow", map[string]any{"suspend": true, "entrypoint": "main"}, map[string]any{},
			`{"metadata":{"annotations":{"locks.lockwarden.io/fencing-token":"7","locks.lockwarden.io/holder":"h"},"uid":"u1"},"spec":{"entrypoint":"main"}}`},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			var k Kind
			for _, each := range r.Kinds() {
				if each.GVK.Kind == c.kind {
					k = each
				}
			}
			suspended := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"uid": "u1"}, "spec": c.suspended}}
			if !Suspended(k, suspended) {
				t.Fatalf("Suspended(%v) = false", c.suspended)
			}
			if Suspended(k, &unstructured.Unstructured{Object: map[string]any{"spec": c.running}}) {
				t.Fatalf("Suspended(%v) = true", c.running)
			}
			patch, err := ResumePatch(k, "u1", "7", "h")
			if err != nil {
				t.Fatal(err)
			}
			// Apply it as the API server applies a merge patch, and see the object run.
			before, _ := json.Marshal(suspended.Object)
			after, err := jsonpatch.MergePatch(before, patch)
			if err != nil {
				t.Fatal(err)
			}
			resumed := &unstructured.Unstructured{}
			if err := json.Unmarshal(after, &resumed.Object); err != nil {
				t.Fatal(err)
			}
			if after, _ = json.Marshal(resumed.Object); string(after) != c.resumed {
				t.Fatalf("resumed object\n got %s\nwant %s", after, c.resumed)
			}
			if Suspended(k, resumed) {
				t.Fatalf("still suspended after the resume patch: %s", after)
			}
		})
	}
}

// TestSuspendAgainPatch: only a Workflow can be held back again once it runs; the patch leaves it
// suspended, preconditioned on its UID.
func TestSuspendAgainPatch(t *testing.T) {
	r, err := Parse("batch/v1/Job,tekton.dev/v1/PipelineRun,argoproj.io/v1alpha1/Workflow")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range r.Kinds() {
		patch, ok, err := SuspendAgainPatch(k, "u1")
		if err != nil {
			t.Fatal(err)
		}
		if want := k.GVK.Kind == "Workflow"; ok != want {
			t.Fatalf("%s: SuspendAgainPatch ok = %v, want %v", k.GVK.Kind, ok, want)
		}
		if !ok {
			continue
		}
		obj := map[string]any{"metadata": map[string]any{"uid": "u1"}, "spec": map[string]any{"entrypoint": "main"}}
		doc, _ := json.Marshal(obj)
		out, err := jsonpatch.MergePatch(doc, patch)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(out, &u.Object); err != nil {
			t.Fatal(err)
		}
		if !Suspended(k, u) {
			t.Fatalf("%s after the patch %s: %s, want suspended", k.GVK.Kind, patch, out)
		}
	}
}
