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
	"sigs.k8s.io/controller-runtime/pkg/event"
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
