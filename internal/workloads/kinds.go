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

// Package workloads knows the workload kinds that can hold a lock (docs/design.md §3 Workloads): which
// kinds an install watches, when an object of each has finished, and how each waits suspended
// for its lock and is resumed. Its functions are pure: the lock engine judges holders with them,
// and the workload controller asks them what to patch. They read an object only through the
// Fields of its kind (fields.go), which is all the manager's cache keeps of it.
package workloads

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is a workload kind that an install watches.
type Kind struct {
	// GVK is the kind, through the version the install reads it with.
	GVK schema.GroupVersionKind
	// finish says how an object of the kind shows that it has finished.
	finish finishRule
	// suspend says how an object of the kind waits for its lock; suspendNone when it cannot.
	suspend suspendRule
}

// String names the kind as the --workload-kinds flag spells it: group/version/Kind, or
// version/Kind for the core group.
func (k Kind) String() string {
	return k.GVK.GroupVersion().String() + "/" + k.GVK.Kind
}

// FinishedState says in words when an object of the kind has finished, for docs and messages.
func (k Kind) FinishedState() string {
	switch k.finish {
	case finishJob:
		return "its Complete or Failed condition is True"
	case finishSucceededCondition:
		return "its Succeeded condition is True or False"
	case finishWorkflowPhase:
		return "its phase is Succeeded, Failed or Error"
	}
	return "it is deleted"
}

// Suspendable says whether an object of the kind can wait for its lock in its own suspended state,
// so that the annotation locks.lockwarden.io/lock on it works.
func (k Kind) Suspendable() bool {
	return k.suspend != suspendNone
}

// The kinds whose finished state lockwarden knows. Any other kind an install lists holds until
// it is deleted.
var (
	Job         = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	PipelineRun = schema.GroupVersionKind{Group: "tekton.dev", Version: "v1", Kind: "PipelineRun"}
	TaskRun     = schema.GroupVersionKind{Group: "tekton.dev", Version: "v1", Kind: "TaskRun"}
	Workflow    = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"}
)

// DefaultKinds is the manager's default --workload-kinds: Jobs, which every cluster has.
const DefaultKinds = "batch/v1/Job"

// known gives the rules of the kinds lockwarden knows, by group and kind (any version).
func known(gk schema.GroupKind) (finishRule, suspendRule) {
	switch gk {
	case Job.GroupKind():
		return finishJob, suspendJob
	case PipelineRun.GroupKind():
		return finishSucceededCondition, suspendPipelineRun
	case TaskRun.GroupKind():
		return finishSucceededCondition, suspendNone
	case Workflow.GroupKind():
		return finishWorkflowPhase, suspendWorkflow
	}
	return finishDeletion, suspendNone
}

// Registry is the set of workload kinds an install watches.
type Registry struct {
	kinds []Kind
}

// Parse reads the --workload-kinds flag: a comma-separated list of group/version/Kind (for the
// core group, version/Kind), e.g. "batch/v1/Job,tekton.dev/v1/PipelineRun". An empty list
// watches no kind. A group and kind listed twice, under any versions, is an error: the
// controller reads each kind through one version.
func Parse(list string) (*Registry, error) {
	r := &Registry{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		gvk, err := parseKind(item)
		if err != nil {
			return nil, err
		}
		if _, dup := r.Lookup(gvk.GroupKind()); dup {
			return nil, fmt.Errorf("workload kind %q is listed twice (the controller reads each kind through one version)", item)
		}
		finish, suspend := known(gvk.GroupKind())
		r.kinds = append(r.kinds, Kind{GVK: gvk, finish: finish, suspend: suspend})
	}
	return r, nil
}

// versionPattern is how Kubernetes API versions are spelled (v1, v1beta1, v2alpha3): it tells
// "batch/Job" (no version) from "v1/ConfigMap" (the core group).
var versionPattern = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

// parseKind reads one group/version/Kind (or version/Kind).
func parseKind(item string) (schema.GroupVersionKind, error) {
	slash := strings.LastIndex(item, "/")
	if slash <= 0 || slash == len(item)-1 {
		return schema.GroupVersionKind{}, fmt.Errorf("workload kind %q is not group/version/Kind (e.g. batch/v1/Job, tekton.dev/v1/PipelineRun)", item)
	}
	gv, err := schema.ParseGroupVersion(item[:slash])
	if err != nil || !versionPattern.MatchString(gv.Version) {
		return schema.GroupVersionKind{}, fmt.Errorf("workload kind %q is not group/version/Kind (e.g. batch/v1/Job, tekton.dev/v1/PipelineRun)", item)
	}
	kind := item[slash+1:]
	if kind[0] < 'A' || kind[0] > 'Z' {
		return schema.GroupVersionKind{}, fmt.Errorf("workload kind %q: the kind %q must start with a capital letter, as in a manifest's kind", item, kind)
	}
	return gv.WithKind(kind), nil
}

// Kinds lists the watched kinds, in the order they were listed.
func (r *Registry) Kinds() []Kind {
	if r == nil {
		return nil
	}
	return slices.Clone(r.kinds)
}

// Lookup finds the watched kind of a group and kind, whatever version a claim names.
func (r *Registry) Lookup(gk schema.GroupKind) (Kind, bool) {
	if r == nil {
		return Kind{}, false
	}
	for _, k := range r.kinds {
		if k.GVK.GroupKind() == gk {
			return k, true
		}
	}
	return Kind{}, false
}

// LookupRef finds the watched kind of a holder object's apiVersion and kind. The error says, in
// words fit for a claim's condition, why there is none: an apiVersion that does not parse, or a
// kind the install does not list.
func (r *Registry) LookupRef(apiVersion, kind string) (Kind, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return Kind{}, fmt.Errorf("holder.object.apiVersion %q is not group/version: %v", apiVersion, err)
	}
	if k, ok := r.Lookup(gv.WithKind(kind).GroupKind()); ok {
		return k, nil
	}
	listed := make([]string, 0, len(r.Kinds()))
	for _, k := range r.Kinds() {
		listed = append(listed, k.String())
	}
	watched := "none"
	if len(listed) > 0 {
		watched = strings.Join(listed, ", ")
	}
	return Kind{}, fmt.Errorf("this install does not watch %s objects (%s), so it cannot tell when one finishes; it watches: %s "+
		"(the manager's --workload-kinds, the chart's workloads values)", kind, apiVersion, watched)
}

// RefKey names a workload object of a group and kind, in any version, by name, within one
// namespace: the key by which the lock engine indexes claims by their holder object and keeps
// the objects a pass read. The version is left out: a claim may name any version of a listed
// kind.
func RefKey(gk schema.GroupKind, name string) string {
	return gk.String() + "/" + name
}

// RefKeyOf is the RefKey of a holder object's apiVersion, kind and name; empty when the
// apiVersion does not parse.
func RefKeyOf(apiVersion, kind, name string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return RefKey(gv.WithKind(kind).GroupKind(), name)
}
