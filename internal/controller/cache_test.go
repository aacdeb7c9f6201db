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

package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"unsafe"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/intern"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

func TestManagerCacheRefusesPods(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	// Nothing here reaches the address: every call is refused before the cache would start an
	// informer.
	c, err := NewCache(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	partial := &metav1.PartialObjectMetadata{}
	partial.SetGroupVersionKind(podGVK)
	untyped := &unstructured.UnstructuredList{}
	untyped.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))

	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web-0"}, &corev1.Pod{})).To(MatchError(errPodsNotCached))
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web-0"}, partial)).To(MatchError(errPodsNotCached), "metadata only")
	g.Expect(c.List(ctx, &corev1.PodList{})).To(MatchError(errPodsNotCached))
	g.Expect(c.List(ctx, untyped)).To(MatchError(errPodsNotCached), "unstructured")
	_, err = c.GetInformer(ctx, &corev1.Pod{})
	g.Expect(err).To(MatchError(errPodsNotCached))
	_, err = c.GetInformerForKind(ctx, podGVK)
	g.Expect(err).To(MatchError(errPodsNotCached))
	g.Expect(isPod(&corev1.ConfigMap{})).To(BeFalse())
	g.Expect(isPod(&locksv1alpha1.LockClaim{})).To(BeFalse())
}

func TestTrimClaim(t *testing.T) {
	claimOf := func(pod string) *locksv1alpha1.LockClaim {
		// Every string is built at run time, as a decoder would, so that no two claims share
		// one by the compiler's doing.
		s := func(v string) string { return strings.Clone(v) }
		since := metav1.Unix(100, 0)
		return &locksv1alpha1.LockClaim{
			TypeMeta: metav1.TypeMeta{APIVersion: s("locks.lockwarden.io/v1alpha1"), Kind: s("LockClaim")},
			ObjectMeta: metav1.ObjectMeta{
				Name: s(pod + "-db"), Namespace: s("apps"), UID: types.UID(s(pod + "-uid")),
				Labels:          map[string]string{s(locksv1alpha1.PodClaimLabel): s(pod)},
				Annotations:     map[string]string{s("kubectl.kubernetes.io/last-applied-configuration"): s(`{"spec": "` + pod + `"}`)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: s("v1"), Kind: s("Pod"), Name: s(pod), UID: types.UID(s(pod))}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: s("lockwarden")}},
				Finalizers:      []string{s("example.com/keep")},
			},
			Spec: locksv1alpha1.LockClaimSpec{LockName: s("db"), Mode: locksv1alpha1.LockMode(s("Exclusive")),
				Holder: &locksv1alpha1.ClaimHolder{PodName: s(pod)}},
			Status: locksv1alpha1.LockClaimStatus{
				Phase: locksv1alpha1.ClaimPhase(s("Pending")), QueuePosition: 3,
				Conditions: []metav1.Condition{{Type: s("Acquired"), Status: metav1.ConditionStatus(s("False")), Reason: s("Queued"),
					Message: s("Waiting in the queue"), LastTransitionTime: since}},
			},
		}
	}
	g := NewWithT(t)
	strs := intern.New(100)
	first, second := claimOf("web-0"), claimOf("web-1")
	want := first.DeepCopy()
	want.ManagedFields = nil

	got, err := trimClaim(first, strs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "only the managedFields go; every value stays as it was")
	_, err = trimClaim(second, strs)
	g.Expect(err).NotTo(HaveOccurred())

	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for name, pair := range map[string][2]string{
		"apiVersion":        {first.APIVersion, second.APIVersion},
		"namespace":         {first.Namespace, second.Namespace},
		"owner kind":        {first.OwnerReferences[0].Kind, second.OwnerReferences[0].Kind},
		"finalizer":         {first.Finalizers[0], second.Finalizers[0]},
		"lock name":         {first.Spec.LockName, second.Spec.LockName},
		"mode":              {string(first.Spec.Mode), string(second.Spec.Mode)},
		"phase":             {string(first.Status.Phase), string(second.Status.Phase)},
		"condition reason":  {first.Status.Conditions[0].Reason, second.Status.Conditions[0].Reason},
		"condition message": {first.Status.Conditions[0].Message, second.Status.Conditions[0].Message},
	} {
		g.Expect(same(pair[0], pair[1])).To(BeTrue(), "the two claims' %s is one copy", name)
	}
	for k := range second.Labels {
		for k1 := range first.Labels {
			g.Expect(same(k, k1)).To(BeTrue(), "the label key is one copy")
		}
	}
	g.Expect(same(first.Spec.Holder.PodName, second.Spec.Holder.PodName)).To(BeFalse())

	other := &corev1.ConfigMap{}
	kept, err := trimClaim(other, strs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept).To(BeIdenticalTo(other), "another type passes through")
}

func TestTrimNode(t *testing.T) {
	since := metav1.Unix(100, 0)
	full := &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "node-1", UID: "n1", ResourceVersion: "42",
			Labels:        map[string]string{"kubernetes.io/hostname": "node-1"},
			Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastTransitionTime: since},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.",
					LastHeartbeatTime: metav1.Unix(90, 0), LastTransitionTime: since},
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.1"}},
			Images:    []corev1.ContainerImage{{Names: []string{"web:1"}, SizeBytes: 1 << 30}},
		},
	}
	want := &corev1.Node{
		TypeMeta:   full.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", ResourceVersion: "42"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", LastTransitionTime: since},
		}},
	}
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "node-1", Obj: full}
	for _, tc := range []struct {
		name    string
		in, out any
	}{
		{"a node keeps its name and the status, reason and transition time of its Ready condition", full, want},
		{"a node that has not reported Ready yet keeps no condition", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse}}}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"}}},
		{"a tombstone passes through", tombstone, tombstone},
		{"another type passes through", &corev1.ConfigMap{}, &corev1.ConfigMap{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := trimNode(tc.in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.out))
		})
	}
	g := NewWithT(t)
	g.Expect(full.Status.Conditions).To(HaveLen(2), "the informer's object is not modified in place")
}

func TestTrimWorkload(t *testing.T) {
	g := NewWithT(t)
	job := watchedKinds(t, workloads.DefaultKinds)[0]
	full := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1",
		"kind":       "Job",
		"metadata": map[string]any{
			"name": "migrate", "namespace": "apps", "uid": "u1", "resourceVersion": "42", "generation": int64(3),
			"creationTimestamp": "2026-12-04T10:00:00Z",
			"labels":            map[string]any{"app": "db"},
			"annotations": map[string]any{
				locksv1alpha1.PodLockAnnotation: "db", "kubectl.kubernetes.io/last-applied-configuration": "{...}",
			},
			"ownerReferences": []any{map[string]any{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "c1"}},
			"finalizers":      []any{"example.com/cleanup", metav1.FinalizerDeleteDependents},
			"managedFields":   []any{map[string]any{"manager": "kubectl"}},
		},
		"spec": map[string]any{
			"suspend": true, "parallelism": int64(2),
			"template": map[string]any{"spec": map[string]any{"serviceAccountName": "migrator",
				"containers": []any{map[string]any{"name": "main", "image": "migrate"}}}},
		},
		"status": map[string]any{
			"startTime": "2026-12-04T10:00:01Z", "active": int64(2),
			"conditions": []any{map[string]any{"type": "Complete", "status": "True", "reason": "CompletionsReached",
				"message": "Reached expected number of succeeded pods", "lastProbeTime": "2026-12-04T10:05:00Z"}},
		},
	}}
	out, err := trimWorkload(job, full)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*unstructured.Unstructured).Object).To(Equal(map[string]any{
		"apiVersion": "batch/v1",
		"kind":       "Job",
		"metadata": map[string]any{
			"name": "migrate", "namespace": "apps", "uid": "u1", "resourceVersion": "42", "generation": int64(3),
			"creationTimestamp": "2026-12-04T10:00:00Z",
			"annotations":       map[string]any{locksv1alpha1.PodLockAnnotation: "db"},
			"ownerReferences":   []any{map[string]any{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "c1"}},
			"finalizers":        []any{metav1.FinalizerDeleteDependents},
		},
		"spec": map[string]any{"suspend": true, "template": map[string]any{"spec": map[string]any{"serviceAccountName": "migrator"}}},
		"status": map[string]any{
			"conditions": []any{map[string]any{"type": "Complete", "status": "True", "reason": "CompletionsReached"}},
		},
	}))

	tombstone := toolscache.DeletedFinalStateUnknown{Key: "apps/migrate", Obj: full}
	kept, err := trimWorkload(job, tombstone)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept).To(Equal(tombstone), "a tombstone is left as it is")
}

// watchedKinds are the workload kinds of a --workload-kinds list.
func watchedKinds(t *testing.T, list string) []workloads.Kind {
	t.Helper()
	r, err := workloads.Parse(list)
	if err != nil {
		t.Fatal(err)
	}
	return r.Kinds()
}

// ruleAnswers is what every rule of internal/workloads answers about one object: the lock engine
// and the workload controller ask them of the cached (trimmed) object.
type ruleAnswers struct {
	Outcome          workloads.Outcome
	Why              string
	Check, Replaced  string
	Alive, Completed bool
	Suspended        bool
	ServiceAccount   string
}

func answersOf(k workloads.Kind, obj *unstructured.Unstructured) ruleAnswers {
	var a ruleAnswers
	a.Outcome, a.Why = workloads.Finished(k, obj)
	v := workloads.Check(k, obj, obj.GetName(), obj.GetUID())
	a.Check, a.Alive, a.Completed = v.Reason, v.Alive, v.Completed
	a.Replaced = workloads.Check(k, obj, obj.GetName(), "an-earlier-uid").Reason
	a.Suspended = workloads.Suspended(k, obj)
	a.ServiceAccount = k.ServiceAccount(obj)
	return a
}

// TestTrimmedWorkloadsGiveTheRulesTheSameAnswers ties the cache's trim to the rules: for every
// kind, an object trimmed as the manager's cache keeps it gets the same answer from every rule of
// internal/workloads as the whole object does, across suspended and running objects, finished
// and not, with and without a service account; and the trim keeps nothing of spec and status but
// the kind's Fields.
func TestTrimmedWorkloadsGiveTheRulesTheSameAnswers(t *testing.T) {
	specs := []map[string]any{
		{},
		{"suspend": true},
		{"suspend": false},
		{"status": "PipelineRunPending"},
		{"status": "Cancelled"},
		{"serviceAccountName": "wf", "taskRunTemplate": map[string]any{"serviceAccountName": "tekton", "podTemplate": map[string]any{"x": "y"}},
			"template": map[string]any{"spec": map[string]any{"serviceAccountName": "job", "containers": []any{map[string]any{"name": "main"}}}}},
	}
	condition := func(typ, status, reason string) map[string]any {
		return map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "True"},
			map[string]any{"type": typ, "status": status, "reason": reason, "message": "what happened", "lastTransitionTime": "2026-12-04T10:00:00Z"},
		}}
	}
	statuses := []map[string]any{
		{},
		condition("Complete", "True", "CompletionsReached"),
		condition("Failed", "True", "BackoffLimitExceeded"),
		condition("SuccessCriteriaMet", "True", ""),
		condition("Succeeded", "True", "Succeeded"),
		condition("Succeeded", "False", "Cancelled"),
		condition("Succeeded", "Unknown", "Running"),
		{"phase": "Running"}, {"phase": "Succeeded"}, {"phase": "Failed"}, {"phase": "Error"},
	}
	for _, k := range watchedKinds(t, "batch/v1/Job,tekton.dev/v1/PipelineRun,tekton.dev/v1/TaskRun,argoproj.io/v1alpha1/Workflow,v1/ConfigMap") {
		t.Run(k.String(), func(t *testing.T) {
			g := NewWithT(t)
			seen := map[ruleAnswers]bool{}
			for _, spec := range specs {
				for _, status := range statuses {
					full := &unstructured.Unstructured{Object: map[string]any{
						"spec":   runtime.DeepCopyJSONValue(spec),
						"status": runtime.DeepCopyJSONValue(status),
					}}
					full.SetGroupVersionKind(k.GVK)
					full.SetNamespace("apps")
					full.SetName("run")
					full.SetUID("u1")
					_ = unstructured.SetNestedField(full.Object, "2026-12-04T10:00:01Z", "status", "startTime")
					_ = unstructured.SetNestedField(full.Object, int64(2), "spec", "parallelism")
					want := answersOf(k, full)
					out, err := trimWorkload(k, full.DeepCopy())
					g.Expect(err).NotTo(HaveOccurred())
					trimmed := out.(*unstructured.Unstructured)
					g.Expect(answersOf(k, trimmed)).To(Equal(want), "spec %v, status %v", spec, status)
					g.Expect(leavesOutside(trimmed.Object, k.Fields())).To(BeEmpty(), "the trim keeps only what the rules read")
					seen[want] = true
				}
			}
			// The objects must tell the answers apart, or the test could not fail.
			var outcomes, suspended, accounts []any
			for a := range seen {
				outcomes, suspended, accounts = append(outcomes, a.Outcome), append(suspended, a.Suspended), append(accounts, a.ServiceAccount)
			}
			if k.GVK.Kind != "ConfigMap" {
				g.Expect(outcomes).To(ContainElements(workloads.Running, workloads.Succeeded, workloads.Failed))
			}
			if k.Suspendable() {
				g.Expect(suspended).To(ContainElements(true, false))
				g.Expect(accounts).To(ContainElement(Not(BeEmpty())))
			}
		})
	}
}

// leavesOutside lists the values of obj outside apiVersion, kind and metadata that lie under none
// of fields' paths.
func leavesOutside(obj map[string]any, fields []workloads.Field) []string {
	var outside []string
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		for _, f := range fields {
			if len(path) >= len(f.Path) && slices.Equal(path[:len(f.Path)], f.Path) {
				return
			}
		}
		m, ok := v.(map[string]any)
		if !ok {
			outside = append(outside, strings.Join(path, "."))
			return
		}
		for k, v := range m {
			walk(v, append(slices.Clone(path), k))
		}
	}
	for k, v := range obj {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			walk(v, []string{k})
		}
	}
	return outside
}
