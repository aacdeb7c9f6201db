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
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

func TestEvictionFor(t *testing.T) {
	lost := &locksv1alpha1.LockClaim{
		Spec:   locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: "web-0"}},
		Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimLost, PodUID: "uid-1"},
	}
	with := func(f func(c *locksv1alpha1.LockClaim)) *locksv1alpha1.LockClaim {
		c := lost.DeepCopy()
		f(c)
		return c
	}
	evict := &locksv1alpha1.DistributedLock{Spec: locksv1alpha1.DistributedLockSpec{LossPolicy: locksv1alpha1.LossPolicyEvict}}
	notify := &locksv1alpha1.DistributedLock{Spec: locksv1alpha1.DistributedLockSpec{LossPolicy: locksv1alpha1.LossPolicyNotify}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", UID: "uid-1"}}
	replaced := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", UID: "uid-2"}}
	going := pod.DeepCopy()
	going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	failed := pod.DeepCopy()
	failed.Status.Phase = corev1.PodFailed
	nodeLost := with(func(c *locksv1alpha1.LockClaim) {
		c.Status.Phase = locksv1alpha1.ClaimReleased
		c.Status.Conditions = []metav1.Condition{{Type: locksv1alpha1.ConditionAcquired, Status: metav1.ConditionFalse,
			Reason: locksv1alpha1.ReasonHolderTerminated, Message: "Released: node node-1 of pod web-0 has been not Ready for 30s"}}
	})
	evictNodeLoss := evict.DeepCopy()
	evictNodeLoss.Spec.HolderNodeLossSeconds = ptr.To[int32](30)
	notifyNodeLoss := notify.DeepCopy()
	notifyNodeLoss.Spec.HolderNodeLossSeconds = ptr.To[int32](30)

	several := func(c *locksv1alpha1.LockClaim) *locksv1alpha1.LockClaim {
		c = c.DeepCopy()
		c.Spec.LockName, c.Spec.LockNames = "", []string{"db", "cache"}
		return c
	}
	one := func(l *locksv1alpha1.DistributedLock) []*locksv1alpha1.DistributedLock {
		if l == nil {
			return nil
		}
		return []*locksv1alpha1.DistributedLock{l}
	}
	type evictionCase struct {
		name  string
		claim *locksv1alpha1.LockClaim
		lock  *locksv1alpha1.DistributedLock
		pod   *corev1.Pod
		want  evictionAction
	}
	cases := []evictionCase{
		{"lost under Evict", lost, evict, pod, evictPod},
		{"lost under Notify", lost, notify, pod, evictNothing},
		{"lock gone", lost, nil, pod, evictNothing},
		{"still held", with(func(c *locksv1alpha1.LockClaim) { c.Status.Phase = locksv1alpha1.ClaimHeld }), evict, pod, evictNothing},
		{"released, not lost", with(func(c *locksv1alpha1.LockClaim) { c.Status.Phase = locksv1alpha1.ClaimReleased }), evict, pod, evictNothing},
		{"detached claim", with(func(c *locksv1alpha1.LockClaim) { c.Spec.Holder = nil }), evict, nil, evictNothing},
		{"already evicted", with(func(c *locksv1alpha1.LockClaim) {
			c.Status.Conditions = []metav1.Condition{{Type: locksv1alpha1.ConditionEvicted, Status: metav1.ConditionTrue}}
		}), evict, pod, evictNothing},
		{"eviction blocked before: tried again", with(func(c *locksv1alpha1.LockClaim) {
			c.Status.Conditions = []metav1.Condition{{Type: locksv1alpha1.ConditionEvicted, Status: metav1.ConditionFalse}}
		}), evict, pod, evictPod},
		{"pod gone", lost, evict, nil, evictGone},
		{"pod replaced: the new one never pays", lost, evict, replaced, evictGone},
		{"pod already terminating", lost, evict, going, evictGone},

		// A hold ended by its pod's node (holderNodeLossSeconds): Released, HolderTerminated, the
		// pod still there.
		{"node lost under Evict", nodeLost, evictNodeLoss, pod, evictPod},
		{"node lost under Notify", nodeLost, notifyNodeLoss, pod, evictNothing},
		{"node lost, already evicted", with(func(c *locksv1alpha1.LockClaim) {
			nodeLost.Status.DeepCopyInto(&c.Status)
			c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: locksv1alpha1.ConditionEvicted, Status: metav1.ConditionTrue})
		}), evictNodeLoss, pod, evictNothing},
		{"node lost, pod terminating (tainted and evicted by Kubernetes)", nodeLost, evictNodeLoss, going, evictNothing},
		{"pod died (gone): nothing to evict", nodeLost, evictNodeLoss, nil, evictNothing},
		{"pod died (failed): not deleted", nodeLost, evictNodeLoss, failed, evictNothing},
		{"pod replaced", nodeLost, evictNodeLoss, replaced, evictNothing},
		{"released HolderTerminated on a lock without holderNodeLossSeconds", nodeLost, evict, pod, evictNothing},
		{"released as the claim was deleted", with(func(c *locksv1alpha1.LockClaim) {
			nodeLost.Status.DeepCopyInto(&c.Status)
			c.Status.Conditions[0].Reason = locksv1alpha1.ReasonClaimDeleted
		}), evictNodeLoss, pod, evictNothing},
	}
	for _, c := range cases {
		if got := evictionFor(c.claim, one(c.lock), c.pod); got != c.want {
			t.Errorf("%s: evictionFor = %d, want %d", c.name, got, c.want)
		}
	}

	// A claim of several locks: evicted for when any of its locks asks for it (a pod holds them
	// all, and runs on with every one once the claim is lost).
	for _, c := range []struct {
		name  string
		claim *locksv1alpha1.LockClaim
		locks []*locksv1alpha1.DistributedLock
		pod   *corev1.Pod
		want  evictionAction
	}{
		{"several locks, lost, one under Evict", several(lost), []*locksv1alpha1.DistributedLock{notify, evict}, pod, evictPod},
		{"several locks, lost, the Evict one gone", several(lost), []*locksv1alpha1.DistributedLock{notify}, pod, evictNothing},
		{"several locks, lost, all under Notify", several(lost), []*locksv1alpha1.DistributedLock{notify, notify}, pod, evictNothing},
		{"several locks, node lost, Evict on a lock with holderNodeLossSeconds", several(nodeLost), []*locksv1alpha1.DistributedLock{notifyNodeLoss, evictNodeLoss}, pod, evictPod},
		{"several locks, node lost, Evict only where holderNodeLossSeconds is unset", several(nodeLost), []*locksv1alpha1.DistributedLock{notifyNodeLoss, evict}, pod, evictNothing},
		{"several locks, lost, pod replaced", several(lost), []*locksv1alpha1.DistributedLock{notify, evict}, replaced, evictGone},
	} {
		if got := evictionFor(c.claim, c.locks, c.pod); got != c.want {
			t.Errorf("%s: evictionFor = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestEvictionOutcome(t *testing.T) {
	pdb := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	cases := []struct {
		name       string
		err        error
		wantStatus metav1.ConditionStatus
		wantReason string
		wantResult string
		wantRetry  bool
		wantMsg    string
	}{
		{"evicted", nil, metav1.ConditionTrue, locksv1alpha1.ReasonHolderEvicted, "evicted", false,
			"Evicted pod web-0: it lost the lock and may still run with a stale fencing token"},
		{"a budget refuses", pdb, metav1.ConditionFalse, locksv1alpha1.ReasonEvictionBlocked, "blocked", true,
			"Eviction of pod web-0 refused: Cannot evict pod as it would violate the pod's disruption budget.; retried every 10s, never forced"},
		{"any other error: retried with backoff, no condition", apierrors.NewInternalError(errors.New("etcd timeout")), "", "", "error", true, ""},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "web-0", errors.New("no")), "", "", "error", true, ""},
	}
	for _, c := range cases {
		cond, result, retry := evictionOutcome("web-0", c.err)
		if cond.Status != c.wantStatus || cond.Reason != c.wantReason || result != c.wantResult || retry != c.wantRetry || cond.Message != c.wantMsg {
			t.Errorf("%s: got %+v %q %v, want %s/%s %q %v %q", c.name, cond, result, retry, c.wantStatus, c.wantReason, c.wantResult, c.wantRetry, c.wantMsg)
		}
	}
}

// An eviction that happened must be recorded even when the claim's status write loses a race
// with another writer: the next reconcile would find the pod going and record nothing (the e2e
// suite once saw HolderEvicted missing so). setEvicted reads the claim again and retries.
func TestSetEvictedRetriesAConflict(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := locksv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-0-db"},
		Spec:   locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: "web-0"}},
		Status: locksv1alpha1.LockClaimStatus{Phase: locksv1alpha1.ClaimLost}}
	refusals := 1
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim).WithStatusSubresource(claim).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if refusals > 0 {
				refusals--
				return apierrors.NewConflict(schema.GroupResource{Resource: "lockclaims"}, obj.GetName(), errors.New("the object has been modified"))
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	recorder := events.NewFakeRecorder(10)
	r := &HolderEvictionReconciler{Client: c, Recorder: recorder}
	current := &locksv1alpha1.LockClaim{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(claim), current); err != nil {
		t.Fatal(err)
	}
	cond, _, _ := evictionOutcome("web-0", nil)
	if err := r.setEvicted(t.Context(), current, cond); err != nil {
		t.Fatalf("setEvicted: %v", err)
	}
	after := &locksv1alpha1.LockClaim{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(claim), after); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(after.Status.Conditions, locksv1alpha1.ConditionEvicted) {
		t.Fatalf("conditions %+v after a conflict and a retry, want Evicted=True", after.Status.Conditions)
	}
	if len(recorder.Events) != 1 {
		t.Fatalf("%d events, want one HolderEvicted", len(recorder.Events))
	}
}
