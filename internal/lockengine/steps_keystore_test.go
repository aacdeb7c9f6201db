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

package lockengine

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// kubernetesBackend creates a ready LockBackend of type Kubernetes called name: like the
// built-in backend, it keeps its holds in the Kubernetes API (in the step tests, the env's store).
func (e *stepEnv) kubernetesBackend(name string) {
	e.t.Helper()
	lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendKubernetes}}
	if err := e.client.Create(e.ctx(), lb); err != nil {
		e.t.Fatal(err)
	}
	meta.SetStatusCondition(&lb.Status.Conditions, metav1.Condition{Type: locksv1alpha1.ConditionReady,
		Status: metav1.ConditionTrue, Reason: "Probed", Message: "ready", ObservedGeneration: lb.Generation})
	if err := e.client.Status().Update(e.ctx(), lb); err != nil {
		e.t.Fatal(err)
	}
}

// onBackend puts a lock on the LockBackend called name, with spec.key key.
func onBackend(name, key string) func(*locksv1alpha1.DistributedLock) {
	return func(l *locksv1alpha1.DistributedLock) {
		l.Spec.BackendRef = locksv1alpha1.BackendReference{Name: name}
		l.Spec.Key = key
	}
}

// TestStepKeyConflictAcrossBackendsOfOneStore: two DistributedLocks of one namespace with one
// spec.key, each on its own LockBackend of type Kubernetes. Both LockBackends reach one store (the
// Kubernetes API), so the two locks resolve to one key in one store (docs/design.md §2): the first keeps
// it and grants, the second shows Ready=False KeyConflict and grants nothing. Before the key
// ledger was keyed by store, it was keyed by LockBackend name, and the second lock took the key
// too: on the built-in backend, whose hold is each lock's own record, both granted, with tokens
// not ordered across the two locks (issue 37, bug 4).
func TestStepKeyConflictAcrossBackendsOfOneStore(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.kubernetesBackend("k8s-one")
	e.kubernetesBackend("k8s-two")
	e.lock("first", onBackend("k8s-one", "db"))
	e.lock("second", onBackend("k8s-two", "db"))
	e.claim("a", "first")
	e.claim("b", "second")
	for range 2 { // the first pass takes the key, the next grants
		e.mustPass("first")
		e.mustPass("second")
	}

	if a := e.getClaim("a"); a.Status.Phase != locksv1alpha1.ClaimHeld {
		t.Fatalf("claim a of the first lock: phase %q, want Held", a.Status.Phase)
	}
	ready := meta.FindStatusCondition(e.getLock("second").Status.Conditions, locksv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != locksv1alpha1.ReasonKeyConflict {
		t.Fatalf("second lock's Ready = %+v, want False/KeyConflict: two LockBackends of one store share the key", ready)
	}
	if b := e.getClaim("b"); b.Status.Phase == locksv1alpha1.ClaimHeld || b.Status.FencingToken != 0 {
		t.Fatalf("claim b of the second lock: phase %q token %d, want nothing granted", b.Status.Phase, b.Status.FencingToken)
	}
	if second := e.getLock("second"); len(second.Status.Holders) != 0 {
		t.Fatalf("second lock's record holders %+v, want none", second.Status.Holders)
	}
}
