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

package podcache

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/intern"
)

// record is what the cache keeps of a Pod: what the controllers read (docs/design.md §3 liveness,
// the pod lock controller) and nothing else. Its identity and resourceVersion; its deletion, and
// whether that is a foreground one (the foregroundDeletion finalizer: Kubernetes then deletes the
// pod's claims while the pod still terminates, and its hold must last until the pod is gone); its
// lockwarden annotations and its pod-deletion-cost (a Standby holder gets the highest unless it
// has one); its role label (the pod lock controller moves it with the hold); its scheduling gates,
// its node (a holder whose node is lost may be treated as dead: holderNodeLossSeconds) and its
// phase.
//
// A corev1.Pod is a 1,240-byte struct even with everything but these fields empty, and its
// labels and annotations are maps of a few hundred bytes each; a record is about 330 bytes and
// keeps its few annotations in a slice. The embedded ObjectMeta carries only the identity and
// the two timestamps: it is there because an informer's store files objects by
// metav1.Object's namespace and name.
type record struct {
	metav1.ObjectMeta
	annotations []annotation
	role        string
	foreground  bool
	gates       []string
	node        string
	phase       corev1.PodPhase
	// serviceAccount is the pod's spec.serviceAccountName: an annotated pod gets its claim only
	// when that account may create claims (claimrights).
	serviceAccount string
}

// annotation is one kept annotation of a pod.
type annotation struct{ key, value string }

// lockAnnotationPrefix is the prefix of every annotation lockwarden reads or writes on a Pod.
const lockAnnotationPrefix = "locks.lockwarden.io/"

// podDeletionCostAnnotation is read to leave a Standby holder's own deletion cost alone.
const podDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// podType is every expanded pod's TypeMeta.
var podType = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}

// compact makes the record of pod. The strings many pods repeat (namespace, node, lockwarden
// annotation keys and lock names, role, gates, phase) are shared through strs: each decoded pod
// comes with copies of its own. pod is not modified.
func compact(pod *corev1.Pod, strs *intern.Table) *record {
	r := &record{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         strs.String(pod.Namespace),
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		role:       strs.String(pod.Labels[locksv1alpha1.PodRoleLabel]),
		foreground: slices.Contains(pod.Finalizers, metav1.FinalizerDeleteDependents),
		node:       strs.String(pod.Spec.NodeName),
		phase:      corev1.PodPhase(strs.String(string(pod.Status.Phase))),

		serviceAccount: strs.String(pod.Spec.ServiceAccountName),
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, lockAnnotationPrefix) || k == podDeletionCostAnnotation {
			r.annotations = append(r.annotations, annotation{strs.String(k), strs.String(v)})
		}
	}
	// Sorted, so that two records of the same pod compare equal (the map's order is random).
	slices.SortFunc(r.annotations, func(a, b annotation) int { return strings.Compare(a.key, b.key) })
	r.annotations = slices.Clip(r.annotations)
	if len(pod.Spec.SchedulingGates) > 0 {
		r.gates = make([]string, len(pod.Spec.SchedulingGates))
		for i, g := range pod.Spec.SchedulingGates {
			r.gates[i] = strs.String(g.Name)
		}
	}
	return r
}

// expand writes into pod what the record keeps, as a Pod: the rest of pod is cleared. Nothing of
// pod is shared with the record but strings, so the caller may change it.
func (r *record) expand(pod *corev1.Pod) {
	*pod = corev1.Pod{
		TypeMeta: podType,
		ObjectMeta: metav1.ObjectMeta{
			Name:              r.Name,
			Namespace:         r.Namespace,
			UID:               r.UID,
			ResourceVersion:   r.ResourceVersion,
			CreationTimestamp: r.CreationTimestamp,
			DeletionTimestamp: r.DeletionTimestamp.DeepCopy(),
		},
		Spec:   corev1.PodSpec{NodeName: r.node, ServiceAccountName: r.serviceAccount},
		Status: corev1.PodStatus{Phase: r.phase},
	}
	if len(r.annotations) > 0 {
		pod.Annotations = make(map[string]string, len(r.annotations))
		for _, a := range r.annotations {
			pod.Annotations[a.key] = a.value
		}
	}
	if r.role != "" {
		pod.Labels = map[string]string{locksv1alpha1.PodRoleLabel: r.role}
	}
	if r.foreground {
		pod.Finalizers = []string{metav1.FinalizerDeleteDependents}
	}
	if len(r.gates) > 0 {
		pod.Spec.SchedulingGates = make([]corev1.PodSchedulingGate, len(r.gates))
		for i, g := range r.gates {
			pod.Spec.SchedulingGates[i] = corev1.PodSchedulingGate{Name: g}
		}
	}
}

// pod is the record expanded into a new Pod.
func (r *record) pod() *corev1.Pod {
	p := &corev1.Pod{}
	r.expand(p)
	return p
}

// GetObjectKind and DeepCopyObject make a record a runtime.Object, which client-go's optional
// cache mutation detector (KUBE_CACHE_MUTATION_DETECTOR) needs of what a store keeps.
func (r *record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the record; its slices are never changed in place, but a copy shares none.
func (r *record) DeepCopyObject() runtime.Object {
	c := *r
	r.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.annotations = slices.Clone(r.annotations)
	c.gates = slices.Clone(r.gates)
	return &c
}

// AsRead returns what a read of pod from the cache gives: for tests that stand in for the cache
// with another store of pods, so that the code they test sees no field the cache would drop.
func AsRead(pod *corev1.Pod) *corev1.Pod {
	return compact(pod, intern.New(0)).pod()
}
