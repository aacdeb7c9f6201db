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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/fakepods"
)

// A pod that carries its token while the cache does not show its claim is told it lost the lock
// only when the API server confirms the claim is gone: the claim and pod caches are fed by
// separate watches, and a claim merely late in the cache must not cost its pod a warning, let
// alone an eviction, nor get it a second claim.
func TestClaimLostOnlyWhenTheAPIServerHasNoClaim(t *testing.T) {
	scheme := unitScheme(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-0", UID: "uid-1", Annotations: map[string]string{
		locksv1alpha1.PodLockAnnotation: "db", locksv1alpha1.PodFencingTokenAnnotation: "4000000000001024", locksv1alpha1.PodHolderAnnotation: "uid-1"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db"}}
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team",
		Name:            locksv1alpha1.PodClaimName(pod.Name, pod.UID, "db"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}},
		Spec: locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: pod.Name}}}
	for _, tc := range []struct {
		name         string
		onAPIServer  []client.Object
		wantWarnings int
	}{
		{"the cache is late: the API server still has the claim", []client.Object{pod.DeepCopy(), lock.DeepCopy(), claim.DeepCopy()}, 0},
		{"the claim is gone", []client.Object{pod.DeepCopy(), lock.DeepCopy()}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod.DeepCopy(), lock.DeepCopy()).Build()
			// The API server selects any kind by metadata.name; the fake client needs an index.
			live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.onAPIServer...).
				WithIndex(&locksv1alpha1.LockClaim{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).Build()
			recorder := events.NewFakeRecorder(10)
			r := &PodLockReconciler{Client: cached, Pods: fakepods.Reader{C: cached}, APIReader: live, Recorder: recorder}
			if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			var warnings []string
			for len(recorder.Events) > 0 {
				if e := <-recorder.Events; strings.HasPrefix(e, corev1.EventTypeWarning) {
					warnings = append(warnings, e)
				}
			}
			if len(warnings) != tc.wantWarnings {
				t.Fatalf("warnings %q, want %d", warnings, tc.wantWarnings)
			}
			if tc.wantWarnings > 0 && !strings.Contains(warnings[0], locksv1alpha1.ReasonClaimDeleted) {
				t.Fatalf("warning %q, want %s", warnings[0], locksv1alpha1.ReasonClaimDeleted)
			}
			claims := &locksv1alpha1.LockClaimList{}
			if err := cached.List(t.Context(), claims); err != nil {
				t.Fatal(err)
			}
			if len(claims.Items) != 0 {
				t.Fatalf("a pod that held its lock got a new claim: %s", claims.Items[0].Name)
			}
		})
	}
}
