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

func TestManagedElsewhere(t *testing.T) {
	r, err := Parse("batch/v1/Job,argoproj.io/v1alpha1/Workflow")
	if err != nil {
		t.Fatal(err)
	}
	job, workflow := r.Kinds()[0], r.Kinds()[1]
	obj := func(labels map[string]string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetLabels(labels)
		return u
	}
	for _, tc := range []struct {
		name    string
		kind    Kind
		obj     *unstructured.Unstructured
		manager string
	}{
		{"a plain Job", job, obj(nil, map[string]any{"suspend": true}), ""},
		{"a Job in a Kueue queue", job, obj(map[string]string{KueueQueueLabel: "q"}, nil), "Kueue (label kueue.x-k8s.io/queue-name: q)"},
		{"a Workflow in a Kueue queue", workflow, obj(map[string]string{KueueQueueLabel: "q"}, nil), "Kueue (label kueue.x-k8s.io/queue-name: q)"},
		{"a Job for MultiKueue", job, obj(nil, map[string]any{"managedBy": "kueue.x-k8s.io/multikueue"}), "kueue.x-k8s.io/multikueue (spec.managedBy)"},
		{"a Job that names the Job controller", job, obj(nil, map[string]any{"managedBy": "kubernetes.io/job-controller"}), ""},
		{"a Workflow's spec.managedBy means nothing", workflow, obj(nil, map[string]any{"managedBy": "x.io/y"}), ""},
	} {
		manager, elsewhere := ManagedElsewhere(tc.kind, tc.obj)
		if manager != tc.manager || elsewhere != (tc.manager != "") {
			t.Errorf("%s: ManagedElsewhere = %q, %v; want %q", tc.name, manager, elsewhere, tc.manager)
		}
	}
}
