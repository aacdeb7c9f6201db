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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Step tests of holderNodeLossSeconds: a holder pod whose node has not been Ready for the lock's
// limit is treated as dead; one whose node recovers in time, or whose lock does not set the limit,
// keeps the lock.

// withNodeLoss sets a lock's holderNodeLossSeconds.
func withNodeLoss(seconds int32) func(*locksv1alpha1.DistributedLock) {
	return func(l *locksv1alpha1.DistributedLock) { l.Spec.HolderNodeLossSeconds = ptr.To(seconds) }
}

// node creates a Node whose Ready condition is True since an hour ago, as a kubelet leaves it.
func (e *stepEnv) node(name string) *corev1.Node {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	e.stamp(n)
	if err := e.client.Create(e.ctx(), n); err != nil {
		e.t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastTransitionTime: metav1.NewTime(e.clock.Now().Add(-time.Hour))}}
	if err := e.client.Status().Update(e.ctx(), n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// setReady sets a Node's Ready condition to status from now on, as the node controller (Unknown)
// or a kubelet (True, False) would.
func (e *stepEnv) setReady(name string, status corev1.ConditionStatus, reason string) {
	e.t.Helper()
	n := &corev1.Node{}
	if err := e.client.Get(e.ctx(), clientKey(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}), n); err != nil {
		e.t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason,
		LastTransitionTime: metav1.NewTime(e.clock.Now())}}
	if err := e.client.Status().Update(e.ctx(), n); err != nil {
		e.t.Fatal(err)
	}
}

// acquiredCondition is a claim's Acquired condition as "Status/Reason: message".
func (e *stepEnv) acquiredCondition(claim string) string {
	e.t.Helper()
	cond := meta.FindStatusCondition(e.getClaim(claim).Status.Conditions, locksv1alpha1.ConditionAcquired)
	if cond == nil {
		return ""
	}
	return string(cond.Status) + "/" + cond.Reason + ": " + cond.Message
}

// TestStepHolderNodeLost: the holder's node goes Unknown; the hold lasts until the node has been
// not Ready for holderNodeLossSeconds, the pass wakes itself for that moment, and then the hold
// ends as a dead pod's does: Released, HolderTerminated, the lock delay, then the next claim.
func TestStepHolderNodeLost(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db", withNodeLoss(30), withLockDelay(10))
	e.node("node-1")
	pod := e.pod("web-0")
	e.claim("a", "db", ownedBy(pod))
	e.claim("b", "db")
	e.heldBy("db", "a")

	e.setReady("node-1", corev1.ConditionUnknown, "NodeStatusUnknown")
	lost := e.clock.Now()
	e.mustPass("db")
	e.clock.Step(28 * time.Second)
	res := e.mustPass("db")
	if got := e.getClaim("a").Status.Phase; got != locksv1alpha1.ClaimHeld {
		t.Fatalf("claim a %s after 28 s of a node not Ready, want Held until 30 s", got)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 2200*time.Millisecond {
		t.Fatalf("the pass 28 s into the node's loss asks to look again after %s, want the 2 s left (with up to 10%% jitter)", res.RequeueAfter)
	}

	e.clock.Step(2 * time.Second)
	e.mustPass("db")
	a := e.getClaim("a")
	if a.Status.Phase != locksv1alpha1.ClaimReleased {
		t.Fatalf("claim a %s once its node was not Ready for 30 s, want Released", a.Status.Phase)
	}
	want := "False/HolderTerminated: Released: node node-1 of pod web-0 has been not Ready for 30s, since " +
		lost.UTC().Format(time.RFC3339) + " (Ready=Unknown: NodeStatusUnknown; holderNodeLossSeconds=30)"
	if got := e.acquiredCondition("a"); got != want {
		t.Fatalf("claim a's Acquired condition:\n  %s\nwant\n  %s", got, want)
	}
	lock := e.getLock("db")
	if len(lock.Status.Holders) != 0 || lock.Status.LockDelayUntil == nil || !lock.Status.LockDelayUntil.Time.Equal(e.clock.Now().Add(10*time.Second)) {
		t.Fatalf("after the node loss: holders %+v, lockDelayUntil %v; want none, and now + 10 s", lock.Status.Holders, lock.Status.LockDelayUntil)
	}
	if holders := e.backendHolders(stepKey("db")); len(holders) != 0 {
		t.Fatalf("the backend still holds the key for %v", holders)
	}
	if b := e.getClaim("b"); b.Status.Phase == locksv1alpha1.ClaimHeld {
		t.Fatalf("claim b granted within the lock delay after a holder's node was lost")
	}
	e.clock.Step(10 * time.Second)
	e.heldBy("db", "b")
}

// TestStepHolderNodeRecovers: a node that is Ready again before the limit keeps its pod's hold,
// also past the moment the limit would have been reached; so does a node that is not Ready for an
// hour under a lock that does not set holderNodeLossSeconds.
func TestStepHolderNodeRecovers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lock    []func(*locksv1alpha1.DistributedLock)
		recover bool
	}{
		{"node Ready again before the limit", []func(*locksv1alpha1.DistributedLock){withNodeLoss(30)}, true},
		{"lock without holderNodeLossSeconds", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newStepEnv(t, interceptor.Funcs{})
			e.lock("db", tc.lock...)
			e.node("node-1")
			pod := e.pod("web-0")
			e.claim("a", "db", ownedBy(pod))
			e.claim("b", "db")
			e.heldBy("db", "a")

			e.setReady("node-1", corev1.ConditionFalse, "KubeletNotReady")
			e.clock.Step(20 * time.Second)
			e.mustPass("db")
			if tc.recover {
				e.setReady("node-1", corev1.ConditionTrue, "KubeletReady")
			}
			for range 3 {
				e.clock.Step(20 * time.Minute)
				e.mustPass("db")
			}
			if got := e.getClaim("a").Status.Phase; got != locksv1alpha1.ClaimHeld {
				t.Fatalf("claim a %s (%s), want still Held", got, e.acquiredCondition("a"))
			}
			if got := e.getClaim("b").Status.Phase; got == locksv1alpha1.ClaimHeld {
				t.Fatalf("claim b Held while a holds")
			}
		})
	}
}

// TestStepHolderNodeGone: a holder pod bound to a Node that no longer exists is dead at once under
// holderNodeLossSeconds, whatever the limit.
func TestStepHolderNodeGone(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db", withNodeLoss(3600))
	node := e.node("node-1")
	pod := e.pod("web-0")
	e.claim("a", "db", ownedBy(pod))
	e.claim("b", "db")
	e.heldBy("db", "a")

	e.remove(node)
	e.mustPass("db")
	if got, want := e.acquiredCondition("a"), "False/HolderTerminated: Released: node node-1 of pod web-0 no longer exists"; got != want {
		t.Fatalf("claim a's Acquired condition %q, want %q", got, want)
	}
	e.heldBy("db", "b")
}

// TestStepWaiterOnLostNode: only holders are judged by their node. A claim that waits for a pod
// on a node not Ready far beyond the limit goes on waiting; the unscheduled pod of another waits
// too.
func TestStepWaiterOnLostNode(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db", withNodeLoss(0))
	e.node("node-1")
	e.node("node-2")
	holder := e.pod("web-0", func(p *corev1.Pod) { p.Spec.NodeName = "node-2" })
	waiter := e.pod("web-1")
	unscheduled := e.pod("web-2", func(p *corev1.Pod) { p.Spec.NodeName = "" })
	e.claim("a", "db", ownedBy(holder))
	e.claim("w", "db", ownedBy(waiter))
	e.claim("u", "db", ownedBy(unscheduled))
	e.heldBy("db", "a")

	e.setReady("node-1", corev1.ConditionUnknown, "NodeStatusUnknown")
	e.clock.Step(time.Hour)
	e.mustPass("db")
	for _, name := range []string{"w", "u"} {
		c := e.getClaim(name)
		if c.Status.Phase != locksv1alpha1.ClaimPending || !strings.Contains(e.acquiredCondition(name), "/Queued") {
			t.Fatalf("claim %s %s (%s), want Pending and Queued", name, c.Status.Phase, e.acquiredCondition(name))
		}
	}
	if got := e.getClaim("a").Status.Phase; got != locksv1alpha1.ClaimHeld {
		t.Fatalf("claim a %s, want Held: its node is Ready", got)
	}
}
