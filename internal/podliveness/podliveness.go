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

// Package podliveness decides whether the pod a lock is held for is still alive, by the rules of
// docs/design.md §3: a holder is dead when its pod object is gone, when a pod of the same name has
// another UID (the original was replaced), or when its phase is Succeeded or Failed. A terminating
// pod still holds: its containers may still run. For a lock that sets holderNodeLossSeconds, a
// holder is also dead once its node has been not Ready that long (CheckNode).
package podliveness

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Verdict is the outcome of a liveness check.
type Verdict struct {
	// Alive is true while the lock may be held for the pod.
	Alive bool
	// Reason says, for a dead holder, why, in words fit for a condition message.
	Reason string
	// Completed is true for a dead holder that ran to completion (phase Succeeded): none of its
	// processes remain, and it ended as its program meant to, so a lock delay serves nothing.
	Completed bool
}

// Check judges pod (nil when the object does not exist) against the UID recorded when the lock
// was granted (empty when none was recorded yet).
func Check(pod *corev1.Pod, name string, recordedUID types.UID) Verdict {
	switch {
	case pod == nil:
		return Verdict{Reason: fmt.Sprintf("pod %s no longer exists", name)}
	case recordedUID != "" && pod.UID != recordedUID:
		return Verdict{Reason: fmt.Sprintf("pod %s was replaced (UID %s, held for %s)", name, pod.UID, recordedUID)}
	case pod.Status.Phase == corev1.PodSucceeded:
		return Verdict{Reason: fmt.Sprintf("pod %s succeeded", name), Completed: true}
	case pod.Status.Phase == corev1.PodFailed:
		return Verdict{Reason: fmt.Sprintf("pod %s failed", name)}
	default:
		return Verdict{Alive: true}
	}
}

// CheckNode judges the node of a holder pod, for a lock that ends holds on lost nodes
// (holderNodeLossSeconds: lossAfter). node is the pod's Node (nil when the object does not
// exist), podName and nodeName (the pod's spec.nodeName) name them for messages, and now is the
// time of the pass. A node whose Ready condition has been Unknown or False for lossAfter or more
// (counted from the condition's lastTransitionTime) makes its pod dead; one not Ready for less
// leaves it Alive, and wake is how long until it would not be, so that the caller looks again
// then (0: nothing to wait for). An unscheduled pod (no nodeName) runs nowhere yet and is Alive,
// and so is a node whose kubelet has not reported a Ready condition yet: the node controller
// marks it Unknown after its grace period, which counts from then.
//
// A Node object that does not exist makes its pod dead at once, whatever lossAfter: the
// scheduler binds pods only to Nodes that exist, and Kubernetes deletes a Node object when its
// machine is gone (the cloud node lifecycle controller) or when an admin removes the node, after
// which pod garbage collection deletes the node's pods anyway (within a minute); and there is no
// lastTransitionTime to count lossAfter from. A Ready condition without a lastTransitionTime
// counts the same way: not Ready for longer than anyone can tell.
//
// The transition time is the node controller's (or kubelet's) clock and now is the caller's: a
// skew between them moves the cut-off by as much, which matters little next to the node
// controller's own grace period (about 50 s) before a silent node becomes Unknown.
func CheckNode(node *corev1.Node, podName, nodeName string, lossAfter time.Duration, now time.Time) (v Verdict, wake time.Duration) {
	if nodeName == "" {
		return Verdict{Alive: true}, 0
	}
	if node == nil {
		return Verdict{Reason: fmt.Sprintf("node %s of pod %s no longer exists", nodeName, podName)}, 0
	}
	var ready *corev1.NodeCondition
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &node.Status.Conditions[i]
		}
	}
	if ready == nil || ready.Status == corev1.ConditionTrue {
		return Verdict{Alive: true}, 0
	}
	since := ready.LastTransitionTime.Time
	if since.IsZero() {
		return Verdict{Reason: fmt.Sprintf("node %s of pod %s has been not Ready since an unknown time (Ready=%s%s)",
			nodeName, podName, ready.Status, reasonSuffix(ready.Reason))}, 0
	}
	notReady := now.Sub(since)
	if notReady < lossAfter {
		return Verdict{Alive: true}, lossAfter - notReady
	}
	return Verdict{Reason: fmt.Sprintf("node %s of pod %s has been not Ready for %s, since %s (Ready=%s%s; holderNodeLossSeconds=%d)",
		nodeName, podName, notReady.Truncate(time.Second), since.UTC().Format(time.RFC3339),
		ready.Status, reasonSuffix(ready.Reason), int64(lossAfter/time.Second))}, 0
}

// reasonSuffix is a condition's reason as it follows its status in a message: ": reason".
func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}
