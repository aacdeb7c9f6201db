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
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name  string
		list  string
		kinds []string
		err   string
	}{
		{"the default", DefaultKinds, []string{"batch/v1/Job"}, ""},
		{"empty watches nothing", "", nil, ""},
		{"all the known kinds, spaces trimmed", "batch/v1/Job, tekton.dev/v1/PipelineRun,tekton.dev/v1/TaskRun,argoproj.io/v1alpha1/Workflow",
			[]string{"batch/v1/Job", "tekton.dev/v1/PipelineRun", "tekton.dev/v1/TaskRun", "argoproj.io/v1alpha1/Workflow"}, ""},
		{"a core kind", "v1/ConfigMap", []string{"v1/ConfigMap"}, ""},
		{"a kind lockwarden does not know", "example.com/v2/Rollout", []string{"example.com/v2/Rollout"}, ""},
		{"no version", "batch/Job", nil, `"batch/Job" is not group/version/Kind`},
		{"no kind", "batch/v1/", nil, `"batch/v1/" is not group/version/Kind`},
		{"a resource, not a kind", "batch/v1/jobs", nil, `the kind "jobs" must start with a capital letter`},
		{"too many slashes", "a/b/c/Job", nil, `"a/b/c/Job" is not group/version/Kind`},
		{"one kind twice", "batch/v1/Job,batch/v2/Job", nil, `"batch/v2/Job" is listed twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse(c.list)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Parse(%q) error = %v, want one containing %q", c.list, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.list, err)
			}
			var got []string
			for _, k := range r.Kinds() {
				got = append(got, k.String())
			}
			if strings.Join(got, ",") != strings.Join(c.kinds, ",") {
				t.Fatalf("Parse(%q) kinds = %v, want %v", c.list, got, c.kinds)
			}
		})
	}
}

func TestLookupRef(t *testing.T) {
	r, err := Parse("batch/v1/Job,tekton.dev/v1/PipelineRun")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, apiVersion, kind string
		want                   schema.GroupVersionKind
		err                    string
	}{
		{"listed", "batch/v1", "Job", Job, ""},
		{"another version of a listed kind reads through the listed one", "tekton.dev/v1beta1", "PipelineRun", PipelineRun, ""},
		{"not listed", "argoproj.io/v1alpha1", "Workflow", schema.GroupVersionKind{},
			"this install does not watch Workflow objects (argoproj.io/v1alpha1), so it cannot tell when one finishes; it watches: batch/v1/Job, tekton.dev/v1/PipelineRun"},
		{"same kind, another group", "example.com/v1", "Job", schema.GroupVersionKind{}, "does not watch Job objects (example.com/v1)"},
		{"apiVersion that does not parse", "a/b/c", "Job", schema.GroupVersionKind{}, `holder.object.apiVersion "a/b/c" is not group/version`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, err := r.LookupRef(c.apiVersion, c.kind)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("LookupRef error = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil || k.GVK != c.want {
				t.Fatalf("LookupRef = %v, %v; want %v", k.GVK, err, c.want)
			}
		})
	}
	var none *Registry
	if _, err := none.LookupRef("batch/v1", "Job"); err == nil || !strings.Contains(err.Error(), "it watches: none") {
		t.Fatalf("a nil registry's LookupRef error = %v, want one saying it watches none", err)
	}
}

func TestKindWords(t *testing.T) {
	r, err := Parse("batch/v1/Job,tekton.dev/v1/PipelineRun,tekton.dev/v1/TaskRun,argoproj.io/v1alpha1/Workflow,v1/ConfigMap")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		finished, suspended string
	}{
		"Job":         {"its Complete or Failed condition is True", "spec.suspend: true"},
		"PipelineRun": {"its Succeeded condition is True or False", "spec.status: PipelineRunPending"},
		"TaskRun":     {"its Succeeded condition is True or False", ""},
		"Workflow":    {"its phase is Succeeded, Failed or Error", "spec.suspend: true"},
		"ConfigMap":   {"it is deleted", ""},
	}
	for _, k := range r.Kinds() {
		w := want[k.GVK.Kind]
		if k.FinishedState() != w.finished || k.SuspendedState() != w.suspended || k.Suspendable() != (w.suspended != "") {
			t.Errorf("%s: finished %q, suspended %q, suspendable %v; want %q, %q", k, k.FinishedState(), k.SuspendedState(), k.Suspendable(), w.finished, w.suspended)
		}
	}
}
