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

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// TestCreateOwnedClaim: a pod and a Job get the same kind of claim from their annotations:
// controlled by them, labelled with their name, their holder exactly; an annotation that makes no
// claim gets a Warning instead, and a claim that exists already (the cache behind our own create)
// is neither an error nor a second event.
func TestCreateOwnedClaim(t *testing.T) {
	scheme := unitScheme(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-0", UID: "pod-uid",
		Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "db", locksv1alpha1.LockPriorityAnnotation: "3",
			locksv1alpha1.LockWaitTimeoutAnnotation: "10"}},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}}}
	ungated := pod.DeepCopy()
	ungated.Spec.SchedulingGates = nil
	standby := ungated.DeepCopy()
	standby.Annotations[locksv1alpha1.PodLockWaitAnnotation] = locksv1alpha1.PodLockWaitStandby
	job := func(suspend bool, annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(workloads.Job)
		u.SetNamespace("team")
		u.SetName("nightly")
		u.SetUID("job-uid")
		u.SetAnnotations(annotations)
		_ = unstructured.SetNestedField(u.Object, suspend, "spec", "suspend")
		return u
	}
	registry, err := workloads.Parse(workloads.DefaultKinds)
	if err != nil {
		t.Fatal(err)
	}
	jobs := &WorkloadLockReconciler{Kind: registry.Kinds()[0]}
	jobHolder := &locksv1alpha1.ClaimHolder{Object: &locksv1alpha1.HolderObject{APIVersion: "batch/v1", Kind: "Job", Name: "nightly"}}

	for name, tc := range map[string]struct {
		owner     claimOwner
		existing  bool
		wantSpec  *locksv1alpha1.LockClaimSpec // nil: no claim
		wantRef   metav1.OwnerReference
		wantLabel string
		wantEvent string // "" for none
	}{
		"a pod": {owner: podOwner(pod),
			wantSpec: &locksv1alpha1.LockClaimSpec{LockName: "db", Priority: 3, Holder: &locksv1alpha1.ClaimHolder{PodName: "web-0"}},
			wantRef:  metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "pod-uid", Controller: ptr.To(true)}, wantLabel: locksv1alpha1.PodClaimLabel,
			wantEvent: "Normal ClaimCreated Created LockClaim the-claim for lock db"},
		"a pod without its scheduling gate": {owner: podOwner(ungated),
			wantSpec: &locksv1alpha1.LockClaimSpec{LockName: "db", Priority: 3, Holder: &locksv1alpha1.ClaimHolder{PodName: "web-0"}},
			wantRef:  metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "pod-uid", Controller: ptr.To(true)}, wantLabel: locksv1alpha1.PodClaimLabel,
			wantEvent: "Warning NotGated Created LockClaim the-claim for lock db; the pod came without the scheduling gate locks.lockwarden.io/lock, so it runs without waiting for the lock: " +
				"give its template the gate, let the admission policy add it (docs/install.md), or annotate it locks.lockwarden.io/lock-wait: Standby if running beside the holder is meant"},
		"a Standby pod, ungated as it should be": {owner: podOwner(standby),
			wantSpec: &locksv1alpha1.LockClaimSpec{LockName: "db", Priority: 3, Holder: &locksv1alpha1.ClaimHolder{PodName: "web-0"}},
			wantRef:  metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "pod-uid", Controller: ptr.To(true)}, wantLabel: locksv1alpha1.PodClaimLabel,
			wantEvent: "Normal ClaimCreated Created LockClaim the-claim for lock db"},
		"a suspended Job of two locks": {owner: jobs.owner(job(true, map[string]string{locksv1alpha1.PodLockAnnotation: "b,a",
			locksv1alpha1.PodLockModeAnnotation: "Exclusive", locksv1alpha1.LockWaitTimeoutAnnotation: "10"})),
			wantSpec: &locksv1alpha1.LockClaimSpec{LockNames: []string{"a", "b"}, Mode: locksv1alpha1.LockModeExclusive, WaitTimeoutSeconds: ptr.To[int32](10), Holder: jobHolder},
			wantRef:  metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "nightly", UID: "job-uid", Controller: ptr.To(true)}, wantLabel: locksv1alpha1.WorkloadClaimLabel,
			wantEvent: "Normal ClaimCreated Created LockClaim the-claim for lock a,b"},
		"a Job created running": {owner: jobs.owner(job(false, map[string]string{locksv1alpha1.PodLockAnnotation: "db"})),
			wantSpec: &locksv1alpha1.LockClaimSpec{LockName: "db", Holder: jobHolder},
			wantRef:  metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "nightly", UID: "job-uid", Controller: ptr.To(true)}, wantLabel: locksv1alpha1.WorkloadClaimLabel,
			wantEvent: "Warning NotSuspended Created LockClaim the-claim for lock db; the Job was created running, so it does not wait for the lock (create it with spec.suspend: true, or let the admission policy do it)"},
		"a Job whose mode is not one": {owner: jobs.owner(job(true, map[string]string{locksv1alpha1.PodLockAnnotation: "db", locksv1alpha1.PodLockModeAnnotation: "Sometimes"})),
			wantEvent: `Warning InvalidLockModeAnnotation Annotation locks.lockwarden.io/lock-mode="Sometimes" is not a lock mode: use Shared or Exclusive (absent means Shared); no claim was made`},
		"the cache is behind our own create": {owner: podOwner(pod), existing: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			builder := fake.NewClientBuilder().WithScheme(scheme)
			if tc.existing {
				builder = builder.WithObjects(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "the-claim"}})
			}
			c := builder.Build()
			recorder := events.NewFakeRecorder(10)
			claim, err := createOwnedClaim(t.Context(), c, recorder, tc.owner, "the-claim")
			g.Expect(err).NotTo(HaveOccurred())
			var seen []string
			for len(recorder.Events) > 0 {
				seen = append(seen, <-recorder.Events)
			}
			if tc.wantEvent == "" {
				g.Expect(seen).To(BeEmpty())
			} else {
				g.Expect(seen).To(Equal([]string{tc.wantEvent}))
			}
			if tc.wantSpec == nil {
				g.Expect(claim).To(BeNil())
				return
			}
			stored := &locksv1alpha1.LockClaim{}
			g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: "team", Name: "the-claim"}, stored)).To(Succeed())
			g.Expect(stored.Spec).To(Equal(*tc.wantSpec))
			g.Expect(stored.OwnerReferences).To(Equal([]metav1.OwnerReference{tc.wantRef}))
			g.Expect(stored.Labels).To(Equal(map[string]string{tc.wantLabel: tc.owner.obj.GetName()}))
			g.Expect(claim.Name).To(Equal("the-claim"))
			g.Expect(madeFor(stored, strings.Join(stored.Spec.Locks(), ","), tc.owner.holder)).To(BeTrue(), "the controller follows the claim it made")
		})
	}
}

// TestHeldBefore: an owner held its lock once only if the token annotation is there beside a
// holder annotation naming the owner's own UID; an object copied from one that held carries both
// with another UID.
func TestHeldBefore(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{"never held", map[string]string{locksv1alpha1.PodLockAnnotation: "db"}, false},
		{"held: its token and its own UID", map[string]string{locksv1alpha1.PodFencingTokenAnnotation: "7", locksv1alpha1.PodHolderAnnotation: "uid-1"}, true},
		{"copied from an object that held", map[string]string{locksv1alpha1.PodFencingTokenAnnotation: "7", locksv1alpha1.PodHolderAnnotation: "uid-0"}, false},
		{"a token without a holder (written by hand)", map[string]string{locksv1alpha1.PodFencingTokenAnnotation: "7"}, false},
		{"a holder without a token", map[string]string{locksv1alpha1.PodHolderAnnotation: "uid-1"}, false},
	} {
		owner := &metav1.ObjectMeta{Name: "web-0", UID: "uid-1", Annotations: tc.annotations}
		if got := heldBefore(owner); got != tc.want {
			t.Errorf("%s: heldBefore = %v, want %v", tc.name, got, tc.want)
		}
	}
}
