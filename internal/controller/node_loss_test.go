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

package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Specs of holderNodeLossSeconds. There is no node controller here: the specs create Node
// objects and set their Ready condition through the status subresource, as the node controller
// (Unknown) and a kubelet (True) would.

// newNode creates a Node whose Ready condition has been True for an hour; it is deleted after
// the spec.
func newNode(name string) *corev1.Node {
	GinkgoHelper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(k8sClient.Create(ctx(), n)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx(), n) })
	setNodeReady(n, corev1.ConditionTrue, "KubeletReady", time.Now().Add(-time.Hour))
	return n
}

// setNodeReady sets a Node's Ready condition to status, since since.
func setNodeReady(n *corev1.Node, status corev1.ConditionStatus, reason string, since time.Time) {
	GinkgoHelper()
	Expect(k8sClient.Get(ctx(), key(n), n)).To(Succeed())
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason,
		LastHeartbeatTime: metav1.NewTime(time.Now()), LastTransitionTime: metav1.NewTime(since)}}
	Expect(k8sClient.Status().Update(ctx(), n)).To(Succeed())
}

// podDeleting says whether a pod is marked for deletion (evicted: there is no kubelet to finish it).
func podDeleting(ns, name string) func(g Gomega) bool {
	return func(g Gomega) bool {
		p := &corev1.Pod{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		return !p.DeletionTimestamp.IsZero()
	}
}

// newPodOn creates a Running pod bound to node.
func newPodOn(ns, name, node string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	Expect(k8sClient.Create(ctx(), p)).To(Succeed())
	setPodPhase(p, corev1.PodRunning)
	return p
}

var _ = Describe("holderNodeLossSeconds", func() {
	var ns, nodeName string
	var node *corev1.Node
	BeforeEach(func() {
		ns = newNamespace()
		nodeName = "node-" + ns
		node = newNode(nodeName)
	})
	withNodeLoss := func(seconds int32) func(*locksv1alpha1.DistributedLock) {
		return func(l *locksv1alpha1.DistributedLock) { l.Spec.HolderNodeLossSeconds = ptr.To(seconds) }
	}
	// holdOnNode makes claim a, for pod p1 on the spec's node, hold lock db, and claim b wait.
	holdOnNode := func() {
		GinkgoHelper()
		newPodOn(ns, "p1", nodeName)
		newClaim(ns, "a", "db", "p1")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
	}

	It("releases a holder whose node has not been Ready for the limit, and grants the next claim only then", func() {
		newLock(ns, "db", withNodeLoss(3))
		holdOnNode()

		lost := time.Now()
		setNodeReady(node, corev1.ConditionUnknown, "NodeStatusUnknown", lost)
		since := node.Status.Conditions[0].LastTransitionTime.Time // whole seconds, as the API keeps it
		Consistently(phaseOf(ns, "a")).WithTimeout(time.Second).Should(Equal(held))
		Eventually(phaseOf(ns, "a")).Should(Equal(locksv1alpha1.ClaimReleased))
		Expect(time.Since(since)).To(BeNumerically(">=", 3*time.Second), "released before the node was not Ready for 3 s")
		Expect(acquiredMessage(ns, "a")(Default)).To(MatchRegexp(
			`^False/HolderTerminated: Released: node %s of pod p1 has been not Ready for [34]s, since %s \(Ready=Unknown: NodeStatusUnknown; holderNodeLossSeconds=3\)$`,
			nodeName, since.UTC().Format(time.RFC3339)))
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
		Expect(claimOf(ns, "b")(Default).Status.AcquireTime.Time).NotTo(BeTemporally("<", since.Add(3*time.Second)))
		Expect(time.Since(lost)).To(BeNumerically("<", 10*time.Second), "the pass did not wake itself when the limit was reached")
		Consistently(podDeleting(ns, "p1")).WithTimeout(time.Second).Should(BeFalse(), "lossPolicy Notify, the default, evicts nothing")
	})

	It("evicts the holder pod under lossPolicy Evict, and starts the lock delay", func() {
		newLock(ns, "db", withNodeLoss(1), func(l *locksv1alpha1.DistributedLock) {
			l.Spec.LossPolicy = locksv1alpha1.LossPolicyEvict
			l.Spec.LockDelaySeconds = 30
		})
		holdOnNode()

		setNodeReady(node, corev1.ConditionUnknown, "NodeStatusUnknown", time.Now())
		Eventually(phaseOf(ns, "a")).Should(Equal(locksv1alpha1.ClaimReleased))
		Eventually(lockDelayUntil(ns, "db")).ShouldNot(BeZero(), "a hold ended by node loss ended without a release (the ended hold is written before the lock record)")
		Eventually(podDeleting(ns, "p1")).Should(BeTrue(), "the holder pod is evicted")
		Eventually(func(g Gomega) string {
			cond := meta.FindStatusCondition(claimOf(ns, "a")(g).Status.Conditions, locksv1alpha1.ConditionEvicted)
			g.Expect(cond).NotTo(BeNil())
			return string(cond.Status) + "/" + cond.Reason
		}).Should(Equal("True/HolderEvicted"))
		Expect(acquired(ns, "b")()).To(Equal("False/LockDelay"))
	})

	It("keeps the hold of a holder whose node is Ready again before the limit", func() {
		newLock(ns, "db", withNodeLoss(3))
		holdOnNode()

		setNodeReady(node, corev1.ConditionFalse, "KubeletNotReady", time.Now())
		time.Sleep(time.Second)
		setNodeReady(node, corev1.ConditionTrue, "KubeletReady", time.Now())
		Consistently(phaseOf(ns, "a")).WithTimeout(5 * time.Second).Should(Equal(held))
		Expect(acquired(ns, "b")()).To(Equal("False/Queued"))
	})

	It("keeps the hold on a lost node when the lock does not set it", func() {
		newLock(ns, "db")
		holdOnNode()

		setNodeReady(node, corev1.ConditionUnknown, "NodeStatusUnknown", time.Now().Add(-time.Hour))
		Consistently(phaseOf(ns, "a")).WithTimeout(3 * time.Second).Should(Equal(held))
		Expect(acquired(ns, "b")()).To(Equal("False/Queued"))
	})

	It("releases a holder whose Node object is deleted at once, whatever the limit", func() {
		newLock(ns, "db", withNodeLoss(3600))
		holdOnNode()

		Expect(k8sClient.Delete(ctx(), node)).To(Succeed())
		Eventually(phaseOf(ns, "a")).WithTimeout(5 * time.Second).Should(Equal(locksv1alpha1.ClaimReleased))
		Expect(acquiredMessage(ns, "a")(Default)).To(Equal(
			"False/HolderTerminated: Released: node " + nodeName + " of pod p1 no longer exists"))
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
	})

	It("judges only holders: a claim waiting for a pod on a lost node goes on waiting", func() {
		newLock(ns, "db", withNodeLoss(0))
		newClaim(ns, "holder", "db", "")
		Eventually(phaseOf(ns, "holder")).Should(Equal(held))
		newPodOn(ns, "p1", nodeName)
		newClaim(ns, "w", "db", "p1")
		Eventually(acquired(ns, "w")).Should(Equal("False/Queued"))

		setNodeReady(node, corev1.ConditionUnknown, "NodeStatusUnknown", time.Now().Add(-time.Hour))
		Consistently(acquired(ns, "w")).WithTimeout(2 * time.Second).Should(Equal("False/Queued"))
	})
})
