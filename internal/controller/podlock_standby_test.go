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
	"sort"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Standby pods (docs/design.md §3): every replica runs, and the role label follows the hold. The
// suite runs no admission policy, so the pods start without a role and the controller labels
// them; the chart's policy labels them standby at creation (charts/admission_test.go).

// newStandbyPod creates a running pod, bound to a node, that asks for lock as a hot standby.
func newStandbyPod(ns, name, lock string, wait string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
		locksv1alpha1.PodLockAnnotation: lock, locksv1alpha1.PodLockWaitAnnotation: wait}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	Expect(k8sClient.Create(ctx(), p)).To(Succeed())
	// A patch without a resourceVersion: the controller labels the pod meanwhile.
	before := p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	Expect(k8sClient.Status().Patch(ctx(), p, client.MergeFrom(before))).To(Succeed())
	return p
}

// roles maps each pod of the namespace that has a role label to its role.
func roles(ns string) func(g Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		list := &corev1.PodList{}
		g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
		out := map[string]string{}
		for _, p := range list.Items {
			if role, ok := p.Labels[locksv1alpha1.PodRoleLabel]; ok {
				out[p.Name] = role
			}
		}
		return out
	}
}

// tokenOf is a pod's fencing token annotation, 0 when it has none.
func tokenOf(ns, name string) int64 {
	GinkgoHelper()
	p := &corev1.Pod{}
	Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	token, _ := strconv.ParseInt(p.Annotations[locksv1alpha1.PodFencingTokenAnnotation], 10, 64)
	return token
}

// holdersOf lists the pods labelled holder, sorted.
func holdersOf(ns string) func(g Gomega) []string {
	return func(g Gomega) []string {
		var out []string
		for pod, role := range roles(ns)(g) {
			if role == locksv1alpha1.PodRoleHolder {
				out = append(out, pod)
			}
		}
		sort.Strings(out)
		return out
	}
}

const deletionCost = "controller.kubernetes.io/pod-deletion-cost"

// annotationOf is one annotation of a pod, "" when absent.
func annotationOf(ns, name, annotation string) string {
	GinkgoHelper()
	p := &corev1.Pod{}
	Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p.Annotations[annotation]
}

func failoversObserved() uint64 {
	GinkgoHelper()
	m := &dto.Metric{}
	Expect(mgrMetric.StandbyFailoverSeconds.Write(m)).To(Succeed())
	return m.GetHistogram().GetSampleCount()
}

var _ = Describe("Standby pods", func() {
	It("runs every replica, labels the holder, moves the label off a terminating holder at once and onto the next pod once it is gone", func() {
		ns := newNamespace()
		newLock(ns, "leader")
		a := newStandbyPod(ns, "a", "leader", locksv1alpha1.PodLockWaitStandby)
		Eventually(holdersOf(ns)).Should(Equal([]string{"a"}))
		newStandbyPod(ns, "b", "leader", locksv1alpha1.PodLockWaitStandby)
		newStandbyPod(ns, "c", "leader", locksv1alpha1.PodLockWaitStandby)
		Eventually(roles(ns)).Should(Equal(map[string]string{"a": "holder", "b": "standby", "c": "standby"}))
		Consistently(holdersOf(ns)).WithTimeout(time.Second).Should(Equal([]string{"a"}))
		first := tokenOf(ns, "a")
		Expect(first).To(BeNumerically(">", 0), "the holder label comes with the token")
		Expect(annotationOf(ns, "a", deletionCost)).To(Equal("2147483647"), "a ReplicaSet removes the holder last")
		Expect(annotationOf(ns, "b", deletionCost)).To(BeEmpty())
		before := failoversObserved()

		// A bound pod's deletion is graceful: with no kubelet here, it stays terminating.
		Expect(k8sClient.Delete(ctx(), a)).To(Succeed())
		Eventually(roles(ns)).Should(HaveKeyWithValue("a", "standby"), "a terminating holder takes no new traffic")
		lock := &locksv1alpha1.DistributedLock{}
		Consistently(func(g Gomega) []string {
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "leader"}, lock)).To(Succeed())
			var pods []string
			for _, h := range lock.Status.Holders {
				pods = append(pods, h.Claim)
			}
			g.Expect(holdersOf(ns)(g)).To(BeEmpty(), "nobody else is labelled holder while the terminating pod holds")
			return pods
		}).WithTimeout(time.Second).Should(ConsistOf(locksv1alpha1.PodClaimName("a", a.UID, "leader")),
			"the terminating pod keeps the lock until it is gone")

		deleteNow(a)
		Eventually(holdersOf(ns)).Should(HaveLen(1))
		next := holdersOf(ns)(Default)[0]
		Expect(next).To(BeElementOf("b", "c"))
		Expect(tokenOf(ns, next)).To(BeNumerically(">", first), "the token annotation comes in the same write as the label")
		Eventually(failoversObserved).Should(Equal(before+1), "one failover timed")
	})

	It("leaves a pod-deletion-cost the pod has of its own", func() {
		ns := newNamespace()
		newLock(ns, "leader")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Annotations: map[string]string{
			locksv1alpha1.PodLockAnnotation: "leader", locksv1alpha1.PodLockWaitAnnotation: locksv1alpha1.PodLockWaitStandby,
			deletionCost: "5"}},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		Expect(k8sClient.Create(ctx(), p)).To(Succeed())
		Eventually(holdersOf(ns)).Should(Equal([]string{"a"}))
		Expect(annotationOf(ns, "a", deletionCost)).To(Equal("5"))
	})

	It("holds as many active replicas as the lock has places", func() {
		ns := newNamespace()
		newLock(ns, "pool", func(l *locksv1alpha1.DistributedLock) { l.Spec.MaxHolders = 2 })
		for _, name := range []string{"a", "b", "c"} {
			newStandbyPod(ns, name, "pool", locksv1alpha1.PodLockWaitStandby)
		}
		Eventually(holdersOf(ns)).Should(HaveLen(2))
		Consistently(holdersOf(ns)).WithTimeout(time.Second).Should(HaveLen(2))
		Expect(roles(ns)(Default)).To(HaveLen(3))
	})

	It("labels a pod whose claim was lost standby", func() {
		ns := newNamespace()
		newLock(ns, "leader")
		a := newStandbyPod(ns, "a", "leader", locksv1alpha1.PodLockWaitStandby)
		Eventually(holdersOf(ns)).Should(Equal([]string{"a"}))
		claim := locksv1alpha1.PodClaimName("a", a.UID, "leader")
		// Its claim is deleted while it runs: it no longer holds, and a second pod takes over.
		newStandbyPod(ns, "b", "leader", locksv1alpha1.PodLockWaitStandby)
		Eventually(roles(ns)).Should(HaveKeyWithValue("b", "standby"))
		Expect(k8sClient.Delete(ctx(), claimOf(ns, claim)(Default))).To(Succeed())
		Eventually(roles(ns)).Should(HaveKeyWithValue("a", "standby"), "a pod whose claim was deleted no longer holds")
		Eventually(holdersOf(ns)).Should(Equal([]string{"b"}))
		Eventually(podEventReasons(ns, "a")).Should(ContainElement(locksv1alpha1.ReasonClaimDeleted))
	})

	It("queues Standby pods again when their lock is deleted and created again (a GitOps replace), and one holds again", func() {
		ns := newNamespace()
		newLock(ns, "leader")
		a := newStandbyPod(ns, "a", "leader", locksv1alpha1.PodLockWaitStandby)
		Eventually(holdersOf(ns)).Should(Equal([]string{"a"}))
		Eventually(func() string { return annotationOf(ns, "a", deletionCost) }).Should(Equal("2147483647"))
		newStandbyPod(ns, "b", "leader", locksv1alpha1.PodLockWaitStandby)
		Eventually(roles(ns)).Should(HaveKeyWithValue("b", "standby"))
		first := tokenOf(ns, "a")

		// kubectl delete dlock leader; kubectl apply -f leader.yaml: every claim fails LockNotFound.
		deleteNow(lockOf(ns, "leader")(Default))
		claimA := locksv1alpha1.PodClaimName("a", a.UID, "leader")
		Eventually(phaseOf(ns, claimA)).Should(Equal(locksv1alpha1.ClaimFailed))
		Eventually(roles(ns)).Should(Equal(map[string]string{"a": "standby", "b": "standby"}))
		Eventually(func() string { return annotationOf(ns, "a", deletionCost) }).Should(BeEmpty(), "the pod-deletion-cost is the holder's alone")
		Eventually(func() error {
			return k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "leader"}, &locksv1alpha1.DistributedLock{})
		}).Should(Satisfy(apierrors.IsNotFound), "the old lock lets go once no claim waits for it")
		newLock(ns, "leader")

		// Queued again with new claims, ten seconds after the old ones ended: one of them holds,
		// with a token above the first hold's.
		Eventually(holdersOf(ns)).WithTimeout(40 * time.Second).Should(HaveLen(1))
		holder := holdersOf(ns)(Default)[0]
		Expect(tokenOf(ns, holder)).To(BeNumerically(">", first))
		for _, pod := range []string{"a", "b"} {
			Eventually(podEventReasons(ns, pod)).WithTimeout(30*time.Second).Should(ContainElement("QueuedAgain"), "pod %s", pod)
			Expect(podEventReasons(ns, pod)(Default)).NotTo(ContainElement(locksv1alpha1.ReasonClaimDeleted))
		}
	})

	It("queues a Standby pod that lost its hold again, under Notify, behind the one that took over", func() {
		ns := newNamespace()
		backendName := newFaultyBackend()
		newLock(ns, "leader", func(l *locksv1alpha1.DistributedLock) {
			l.Spec.BackendRef.Name = backendName
			l.Spec.LeaseDurationSeconds = 5 // the intruder's hold below runs out after as long
		})
		a := newStandbyPod(ns, "a", "leader", locksv1alpha1.PodLockWaitStandby)
		Eventually(holdersOf(ns)).Should(Equal([]string{"a"}))
		b := newStandbyPod(ns, "b", "leader", locksv1alpha1.PodLockWaitStandby)
		Eventually(roles(ns)).Should(HaveKeyWithValue("b", "standby"))

		faultyStore.Steal("lockwarden/"+ns+"/leader", "intruder")
		claimA := locksv1alpha1.PodClaimName("a", a.UID, "leader")
		Eventually(phaseOf(ns, claimA)).WithTimeout(15 * time.Second).Should(Equal(locksv1alpha1.ClaimLost))
		Eventually(roles(ns)).Should(HaveKeyWithValue("a", "standby"), "the label moves at once: that is a Standby pod's notice")
		Eventually(holdersOf(ns)).WithTimeout(30 * time.Second).Should(Equal([]string{"b"}))

		// a's new claim waits behind b's hold: a is a candidate again.
		Eventually(func(g Gomega) locksv1alpha1.ClaimPhase {
			c := claimOf(ns, claimA)(g)
			g.Expect(c.UID).NotTo(BeEmpty())
			return c.Status.Phase
		}).WithTimeout(30 * time.Second).Should(Equal(locksv1alpha1.ClaimPending))
		Eventually(podEventReasons(ns, "a")).Should(ContainElement("QueuedAgain"))
		deleteNow(b)
		Eventually(holdersOf(ns)).WithTimeout(30 * time.Second).Should(Equal([]string{"a"}))
	})

	It("takes the label from a pod whose hold ended before the next pod gets it, whatever order their reconciles run in", func() {
		ns := newNamespace()
		newLock(ns, "leader")
		// A pod still labelled holder whose reconcile will never move its label: a Failed pod is
		// left as it is, so only the next holder's reconcile can order the two writes.
		stale := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old",
			Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "leader",
				locksv1alpha1.PodLockWaitAnnotation: locksv1alpha1.PodLockWaitStandby},
			Labels: map[string]string{locksv1alpha1.PodRoleLabel: locksv1alpha1.PodRoleHolder}},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		Expect(k8sClient.Create(ctx(), stale)).To(Succeed())
		before := stale.DeepCopy()
		stale.Status.Phase = corev1.PodFailed
		Expect(k8sClient.Status().Patch(ctx(), stale, client.MergeFrom(before))).To(Succeed())

		watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		w, err := watcher.Watch(ctx(), &corev1.PodList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		newStandbyPod(ns, "new", "leader", locksv1alpha1.PodLockWaitStandby)

		roles := map[string]string{}
		most := 0
		Eventually(func() map[string]string {
			for {
				select {
				case e := <-w.ResultChan():
					if p, ok := e.Object.(*corev1.Pod); ok {
						roles[p.Name] = p.Labels[locksv1alpha1.PodRoleLabel]
						n := 0
						for _, r := range roles {
							if r == locksv1alpha1.PodRoleHolder {
								n++
							}
						}
						most = max(most, n)
					}
				default:
					return roles
				}
			}
		}).Should(Equal(map[string]string{"old": locksv1alpha1.PodRoleStandby, "new": locksv1alpha1.PodRoleHolder}))
		Expect(most).To(Equal(1), "the old label went before the new one came")
	})

	It("says so when lock-wait is neither Gated nor Standby, and waits as Gated", func() {
		ns := newNamespace()
		newLock(ns, "leader")
		newStandbyPod(ns, "a", "leader", "Hot")
		Eventually(podEventReasons(ns, "a")).Should(ContainElement("InvalidLockWaitAnnotation"))
		Eventually(holdersOf(ns)).Should(Equal([]string{"a"}), "the pod still gets its claim")
	})
})
