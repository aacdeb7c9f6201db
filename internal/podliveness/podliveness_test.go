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
