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

package podliveness

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestCheck(t *testing.T) {
	pod := func(uid types.UID, phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", UID: uid}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return p
	}
	cases := []struct {
		name     string
		pod      *corev1.Pod
		recorded types.UID
		alive    bool
		reason   string
		complete bool
	}{
		{"running pod", pod("u1", corev1.PodRunning, false), "u1", true, "", false},
		{"pending pod (scheduling gate, init containers)", pod("u1", corev1.PodPending, false), "u1", true, "", false},
		{"terminating pod still holds", pod("u1", corev1.PodRunning, true), "u1", true, "", false},
		{"nothing recorded yet", pod("u1", corev1.PodRunning, false), "", true, "", false},
		{"pod gone", nil, "u1", false, "pod web-0 no longer exists", false},
		{"pod replaced", pod("u2", corev1.PodRunning, false), "u1", false, "pod web-0 was replaced (UID u2, held for u1)", false},
		{"pod succeeded", pod("u1", corev1.PodSucceeded, false), "u1", false, "pod web-0 succeeded", true},
		{"pod failed", pod("u1", corev1.PodFailed, false), "u1", false, "pod web-0 failed", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Check(c.pod, "web-0", c.recorded)
			if got.Alive != c.alive || got.Reason != c.reason || got.Completed != c.complete {
				t.Fatalf("Check = %+v, want alive=%v reason=%q completed=%v", got, c.alive, c.reason, c.complete)
			}
		})
	}
}

func TestCheckNode(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	ready := func(status corev1.ConditionStatus, reason string, ago time.Duration) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason,
			LastTransitionTime: metav1.NewTime(now.Add(-ago))}
	}
	pressure := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
	cases := []struct {
		name      string
		node      *corev1.Node
		nodeName  string
		lossAfter time.Duration
		alive     bool
		reason    string
		wake      time.Duration
	}{
		{"ready node", node(ready(corev1.ConditionTrue, "KubeletReady", time.Hour)), "node-1", 30 * time.Second, true, "", 0},
		{"unscheduled pod", nil, "", 30 * time.Second, true, "", 0},
		{"node without a Ready condition yet", node(pressure), "node-1", 30 * time.Second, true, "", 0},
		{"unknown for less than the limit: alive, look again when it would pass", node(ready(corev1.ConditionUnknown, "NodeStatusUnknown", 10*time.Second)),
			"node-1", 30 * time.Second, true, "", 20 * time.Second},
		{"unknown for exactly the limit", node(ready(corev1.ConditionUnknown, "NodeStatusUnknown", 30*time.Second)), "node-1", 30 * time.Second, false,
			"node node-1 of pod web-0 has been not Ready for 30s, since 2026-12-04T08:59:30Z (Ready=Unknown: NodeStatusUnknown; holderNodeLossSeconds=30)", 0},
		{"unknown for longer", node(ready(corev1.ConditionUnknown, "NodeStatusUnknown", 2*time.Minute+3500*time.Millisecond)), "node-1", 30 * time.Second, false,
			"node node-1 of pod web-0 has been not Ready for 2m3s, since 2026-12-04T08:57:56Z (Ready=Unknown: NodeStatusUnknown; holderNodeLossSeconds=30)", 0},
		{"kubelet reports not ready (False) for longer", node(pressure, ready(corev1.ConditionFalse, "KubeletNotReady", time.Minute)), "node-1", 30 * time.Second, false,
			"node node-1 of pod web-0 has been not Ready for 1m0s, since 2026-12-04T08:59:00Z (Ready=False: KubeletNotReady; holderNodeLossSeconds=30)", 0},
		{"false for less than the limit", node(ready(corev1.ConditionFalse, "KubeletNotReady", time.Second)), "node-1", 30 * time.Second, true, "", 29 * time.Second},
		{"limit 0: dead as soon as it is not Ready", node(ready(corev1.ConditionUnknown, "", 0)), "node-1", 0, false,
			"node node-1 of pod web-0 has been not Ready for 0s, since 2026-12-04T09:00:00Z (Ready=Unknown; holderNodeLossSeconds=0)", 0},
		{"transition in the future (clock skew): alive for the skew and the limit", node(ready(corev1.ConditionUnknown, "", -5*time.Second)),
			"node-1", 30 * time.Second, true, "", 35 * time.Second},
		{"node object gone: dead at once", nil, "node-1", time.Hour, false, "node node-1 of pod web-0 no longer exists", 0},
		{"not Ready without a transition time: dead at once", node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse}),
			"node-1", time.Hour, false, "node node-1 of pod web-0 has been not Ready since an unknown time (Ready=False)", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, wake := CheckNode(c.node, "web-0", c.nodeName, c.lossAfter, now)
			if got.Alive != c.alive || got.Reason != c.reason || got.Completed || wake != c.wake {
				t.Fatalf("CheckNode = %+v, wake %s; want alive=%v reason=%q wake %s (never completed)", got, wake, c.alive, c.reason, c.wake)
			}
		})
	}
}
