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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

func TestNodeReadyChanged(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	node := func(rv string, conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", ResourceVersion: rv}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	ready := func(status corev1.ConditionStatus, since metav1.Time) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastTransitionTime: since}
	}
	pressure := corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, LastTransitionTime: t1}
	p := nodeReadyChanged()
	for _, tc := range []struct {
		name     string
		old, new *corev1.Node
		want     bool
	}{
		{"a status report that changes nothing of Ready", node("1", ready(corev1.ConditionTrue, t0)), node("2", ready(corev1.ConditionTrue, t0)), false},
		{"another condition changes", node("1", ready(corev1.ConditionTrue, t0)), node("2", ready(corev1.ConditionTrue, t0), pressure), false},
		{"Ready goes Unknown", node("1", ready(corev1.ConditionTrue, t0)), node("2", ready(corev1.ConditionUnknown, t1)), true},
		{"Ready comes back", node("1", ready(corev1.ConditionFalse, t0)), node("2", ready(corev1.ConditionTrue, t1)), true},
		{"False to Unknown", node("1", ready(corev1.ConditionFalse, t0)), node("2", ready(corev1.ConditionUnknown, t0)), true},
		{"a new transition time alone (a flap between two reports)", node("1", ready(corev1.ConditionFalse, t0)), node("2", ready(corev1.ConditionFalse, t1)), true},
		{"the first Ready condition", node("1"), node("2", ready(corev1.ConditionTrue, t0)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Fatalf("Update passes: %v, want %v", got, tc.want)
			}
		})
	}
	n := node("1", ready(corev1.ConditionTrue, t0))
	if p.Create(event.CreateEvent{Object: n}) || p.Generic(event.GenericEvent{Object: n}) {
		t.Fatal("Create or Generic passes, want neither: pods are bound only to Nodes that exist, and every lock has a pass at start")
	}
	if !p.Delete(event.DeleteEvent{Object: n}) {
		t.Fatal("Delete does not pass, want it to: a holder whose Node is gone is dead at once")
	}
}

func TestLockChangedForPass(t *testing.T) {
	lock := func(rv string, generation int64, mutate ...func(*locksv1alpha1.DistributedLock)) *locksv1alpha1.DistributedLock {
		l := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Name: "db", UID: "lock-uid", ResourceVersion: rv, Generation: generation}}
		for _, m := range mutate {
			m(l)
		}
		return l
	}
	deleting := func(l *locksv1alpha1.DistributedLock) { l.DeletionTimestamp = ptr.To(metav1.Now()) }
	finalized := func(l *locksv1alpha1.DistributedLock) { l.Finalizers = []string{locksv1alpha1.Finalizer} }
	for _, tc := range []struct {
		name     string
		written  string // the resourceVersion of this process's last write ("" none)
		awaited  bool   // a pass found the cache behind that write
		old, new *locksv1alpha1.DistributedLock
		want     bool
	}{
		{"our own status write", "11", false, lock("10", 1), lock("11", 1), false},
		{"someone else's status write", "9", false, lock("10", 1), lock("11", 1), true},
		{"a status write, nothing written by us yet", "", false, lock("10", 1), lock("11", 1), true},
		{"our own write, which a pass found missing", "11", true, lock("10", 1), lock("11", 1), true},
		{"a spec change", "11", false, lock("10", 1), lock("11", 2), true},
		{"deletion starts", "11", false, lock("10", 1), lock("11", 1, deleting), true},
		{"our finalizer added", "11", false, lock("10", 1), lock("11", 1, finalized), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOwnWrites()
			if tc.written != "" {
				w.note(lock(tc.written, 1))
			}
			if tc.awaited {
				w.behind(lock("10", 1))
			}
			if got := lockChangedForPass(w).Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Fatalf("Update passes: %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClaimChangedForLock(t *testing.T) {
	claim := func(rv string, phase locksv1alpha1.ClaimPhase, mutate ...func(*locksv1alpha1.LockClaim)) *locksv1alpha1.LockClaim {
		c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "claim-uid", ResourceVersion: rv, Generation: 1},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "db"}, Status: locksv1alpha1.LockClaimStatus{Phase: phase}}
		for _, m := range mutate {
			m(c)
		}
		return c
	}
	ofTwo := func(c *locksv1alpha1.LockClaim) { c.Spec.LockName, c.Spec.LockNames = "", []string{"db", "queue"} }
	moved := func(c *locksv1alpha1.LockClaim) { c.Status.QueuePosition = 3 }
	held, pending := locksv1alpha1.ClaimHeld, locksv1alpha1.ClaimPending
	for _, tc := range []struct {
		name     string
		written  string // the resourceVersion of this process's last write ("" none)
		awaited  bool   // a pass found the cache behind that write
		old, new *locksv1alpha1.LockClaim
		want     bool
	}{
		{"our own Held write of a grant", "11", false, claim("10", pending), claim("11", held), false},
		{"a Held write by another process (a deposed leader's, a new leader's)", "9", false, claim("10", pending), claim("11", held), true},
		{"a change of phase, nothing written by us", "", false, claim("10", pending), claim("11", held), true},
		{"our own Held write, which a pass found missing", "11", true, claim("10", pending), claim("11", held), true},
		{"our own Held write of a claim of several locks", "11", false, claim("10", pending, ofTwo), claim("11", held, ofTwo), true},
		{"a waiter's new position", "", false, claim("10", pending), claim("11", pending, moved), false},
		{"a spec change", "11", false, claim("10", pending), func() *locksv1alpha1.LockClaim {
			c := claim("11", pending)
			c.Generation = 2
			return c
		}(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOwnWrites()
			if tc.written != "" {
				w.note(claim(tc.written, held))
			}
			if tc.awaited {
				w.behind(claim("10", pending))
			}
			if got := claimChangedForLock(w).Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Fatalf("Update passes: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClaimDeletionForgetsOwnWrite: a claim's deletion passes, and drops this process's record of
// its last write, which nothing reads again.
func TestClaimDeletionForgetsOwnWrite(t *testing.T) {
	w := newOwnWrites()
	c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "claim-uid", ResourceVersion: "11"}}
	w.note(c)
	if !claimChangedForLock(w).Delete(event.DeleteEvent{Object: c}) {
		t.Fatal("a claim's deletion does not pass")
	}
	if n := len(w.rv); n != 0 {
		t.Fatalf("own writes remember %d claims after the only one was deleted, want 0", n)
	}
}
