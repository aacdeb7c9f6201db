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
	"strings"
	"testing"
	"unsafe"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/intern"
)

// fullPod is a pod with much that the cache drops and everything it keeps.
func fullPod() *corev1.Pod {
	deleted := metav1.Unix(200, 0)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "apps", UID: "u1", ResourceVersion: "42",
			CreationTimestamp: metav1.Unix(100, 0), DeletionTimestamp: &deleted,
			Labels: map[string]string{"app": "web", locksv1alpha1.PodRoleLabel: locksv1alpha1.PodRoleHolder},
			Annotations: map[string]string{
				locksv1alpha1.PodLockAnnotation:                    "db-migration",
				locksv1alpha1.PodLockModeAnnotation:                "Exclusive",
				locksv1alpha1.PodFencingTokenAnnotation:            "7",
				"controller.kubernetes.io/pod-deletion-cost":       "2147483647",
				"kubectl.kubernetes.io/last-applied-configuration": `{"a very": "long document"}`,
			},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			Finalizers:      []string{"example.com/cleanup", metav1.FinalizerDeleteDependents},
		},
		Spec: corev1.PodSpec{
			SchedulingGates:    []corev1.PodSchedulingGate{{Name: "other.example/gate"}, {Name: locksv1alpha1.PodSchedulingGate}},
			Containers:         []corev1.Container{{Name: "web", Image: "web:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			NodeName:           "node-1",
			ServiceAccountName: "web",
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func TestRecordKeepsWhatTheControllersRead(t *testing.T) {
	deleted := metav1.Unix(200, 0)
	full := fullPod()
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "apps", UID: "u1", ResourceVersion: "42",
			CreationTimestamp: metav1.Unix(100, 0), DeletionTimestamp: &deleted,
			Finalizers: []string{metav1.FinalizerDeleteDependents},
			Labels:     map[string]string{locksv1alpha1.PodRoleLabel: locksv1alpha1.PodRoleHolder},
			Annotations: map[string]string{
				locksv1alpha1.PodLockAnnotation:              "db-migration",
				locksv1alpha1.PodLockModeAnnotation:          "Exclusive",
				locksv1alpha1.PodFencingTokenAnnotation:      "7",
				"controller.kubernetes.io/pod-deletion-cost": "2147483647",
			},
		},
		Spec:   corev1.PodSpec{SchedulingGates: full.Spec.SchedulingGates, NodeName: "node-1", ServiceAccountName: "web"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "apps",
		Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "b"}, Finalizers: []string{"example.com/x"}}}

	for _, tc := range []struct {
		name string
		in   *corev1.Pod
		want *corev1.Pod
	}{
		{"a pod keeps only what the controllers read (of its labels, only the role; of its finalizers, only foregroundDeletion)", full, want},
		{"a pod without lockwarden annotations, role or gates keeps none, as nil maps and slices",
			plain, &corev1.Pod{TypeMeta: want.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "apps"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(compact(tc.in, intern.New(100)).pod()).To(Equal(tc.want))
		})
	}

	g := NewWithT(t)
	g.Expect(full.Spec.Containers).To(HaveLen(1), "the decoded pod is not modified")
	g.Expect(compact(fullPod(), intern.New(100))).To(Equal(compact(fullPod(), intern.New(100))),
		"two records of one pod are equal whatever the order of its annotations' map")
}

func TestExpandedPodSharesNothingChangeable(t *testing.T) {
	g := NewWithT(t)
	r := compact(fullPod(), intern.New(100))
	before := r.DeepCopyObject()

	p := r.pod()
	p.Annotations[locksv1alpha1.PodLockAnnotation] = "changed"
	p.Labels[locksv1alpha1.PodRoleLabel] = "changed"
	p.Spec.SchedulingGates[0].Name = "changed"
	p.Finalizers[0] = "changed"
	p.DeletionTimestamp.Time = p.DeletionTimestamp.Add(1)

	g.Expect(r).To(Equal(before), "a reader may change the pod it got; the record stays as it was")
	g.Expect(r.pod()).NotTo(Equal(p))
}

func TestRecordSharesRepeatedStrings(t *testing.T) {
	g := NewWithT(t)
	strs := intern.New(100)
	podOf := func(name string) *corev1.Pod {
		p := fullPod()
		// As a decoder would: every string a copy of its own.
		p.Name, p.Namespace, p.Spec.NodeName = name, strings.Clone("apps"), strings.Clone("node-1")
		p.Annotations = map[string]string{strings.Clone(locksv1alpha1.PodLockAnnotation): strings.Clone("db-migration")}
		return p
	}
	a, b := compact(podOf("web-0"), strs), compact(podOf("web-1"), strs)
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	g.Expect(same(a.Namespace, b.Namespace)).To(BeTrue(), "namespace")
	g.Expect(same(a.node, b.node)).To(BeTrue(), "node")
	g.Expect(same(a.annotations[0].key, b.annotations[0].key)).To(BeTrue(), "annotation key")
	g.Expect(same(a.annotations[0].value, b.annotations[0].value)).To(BeTrue(), "lock name")
}

func TestRecordIsSmall(t *testing.T) {
	// The reason for this package: a corev1.Pod struct alone is over three times a record.
	g := NewWithT(t)
	recordSize, podSize := int(unsafe.Sizeof(record{})), int(unsafe.Sizeof(corev1.Pod{}))
	g.Expect(recordSize).To(BeNumerically("<=", 360))
	g.Expect(podSize).To(BeNumerically(">", 3*recordSize))
}

func TestTombstonesAndOtherTypes(t *testing.T) {
	g := NewWithT(t)
	strs := intern.New(100)

	tomb := compactAny(toolscache.DeletedFinalStateUnknown{Key: "apps/web-0", Obj: fullPod()}, strs)
	g.Expect(tomb).To(Equal(toolscache.DeletedFinalStateUnknown{Key: "apps/web-0", Obj: compact(fullPod(), strs)}),
		"a tombstone's pod is compacted")
	g.Expect(expandAny(tomb)).To(Equal(toolscache.DeletedFinalStateUnknown{Key: "apps/web-0", Obj: compact(fullPod(), strs).pod()}),
		"and expanded for the handlers")

	r := compact(fullPod(), strs)
	g.Expect(compactAny(r, strs)).To(BeIdenticalTo(r), "a record that comes through again (a tombstone's, on a relist) passes")
	cm := &corev1.ConfigMap{}
	g.Expect(compactAny(cm, strs)).To(BeIdenticalTo(cm))
	g.Expect(expandAny(cm)).To(BeIdenticalTo(cm))
}
