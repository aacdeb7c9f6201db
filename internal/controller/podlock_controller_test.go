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
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/controller"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// Pods that ask for a lock by annotation, with or without the scheduling gate. envtest has no
// scheduler or kubelet: the specs create pods by hand and watch the controller's writes; the e2e
// suite shows a real scheduler placing the pods once ungated.

// newLockPod creates a pod annotated with lock and, if gated, carrying the lockwarden gate.
func newLockPod(ns, name, lock string, gated bool) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	if lock != "" {
		p.Annotations = map[string]string{locksv1alpha1.PodLockAnnotation: lock}
	}
	if gated {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}
	}
	Expect(k8sClient.Create(ctx(), p)).To(Succeed())
	return p
}

// newModePod creates a gated pod annotated with lock and, unless mode is nil, with the lock-mode
// annotation *mode.
func newModePod(ns, name, lock string, mode *string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: lock}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}}}
	if mode != nil {
		p.Annotations[locksv1alpha1.PodLockModeAnnotation] = *mode
	}
	Expect(k8sClient.Create(ctx(), p)).To(Succeed())
	return p
}

// setPodAnnotation sets (or, with value nil, removes) one annotation of a pod.
func setPodAnnotation(p *corev1.Pod, name string, value *string) {
	GinkgoHelper()
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{name: value}}}
	b, err := json.Marshal(patch)
	Expect(err).NotTo(HaveOccurred())
	Expect(k8sClient.Patch(ctx(), p, client.RawPatch(types.MergePatchType, b))).To(Succeed())
}

// podState reports a pod's token annotation and whether it is still gated.
func podState(ns, name string) func(g Gomega) string {
	return func(g Gomega) string {
		p := &corev1.Pod{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		state := "ungated"
		if len(p.Spec.SchedulingGates) > 0 {
			state = "gated"
		}
		return state + "/" + p.Annotations[locksv1alpha1.PodFencingTokenAnnotation]
	}
}

// ungatedPods names those of pods that are ungated.
func ungatedPods(ns string, pods []*corev1.Pod) func(g Gomega) []string {
	return func(g Gomega) []string {
		var names []string
		for _, p := range pods {
			if strings.HasPrefix(podState(ns, p.Name)(g), "ungated/") {
				names = append(names, p.Name)
			}
		}
		return names
	}
}

// oneUngated waits until one of pods is ungated and returns its index; it fails if two are.
func oneUngated(ns string, pods []*corev1.Pod) int {
	GinkgoHelper()
	var names []string
	Eventually(func(g Gomega) []string {
		names = ungatedPods(ns, pods)(g)
		return names
	}).ShouldNot(BeEmpty())
	Expect(names).To(HaveLen(1), "two pods ungated at once")
	return slices.IndexFunc(pods, func(p *corev1.Pod) bool { return p.Name == names[0] })
}

// podDeletingNow says whether a pod is being deleted (or is gone).
func podDeletingNow(ns, name string) func(g Gomega) bool {
	return func(g Gomega) bool {
		p := &corev1.Pod{}
		err := k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, p)
		if apierrors.IsNotFound(err) {
			return true
		}
		g.Expect(err).NotTo(HaveOccurred())
		return !p.DeletionTimestamp.IsZero()
	}
}

// podEventReasons lists the reasons of the events about a pod.
func podEventReasons(ns, name string) func(g Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pod" && e.Regarding.Name == name {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}
}

var _ = Describe("Pods that ask for a lock by annotation", func() {
	It("are ungated one at a time, each with a higher token, when the holder pod goes", func() {
		ns := newNamespace()
		newLock(ns, "migrate")
		var pods []*corev1.Pod
		for _, name := range []string{"web-0", "web-1", "web-2"} {
			pods = append(pods, newLockPod(ns, name, "migrate", true))
		}
		// The claims are granted in the order they arrived, which is the order the controller
		// made them: pods made within a moment of each other are reconciled side by side, so
		// web-1's claim may come before web-0's. Whichever is first, one pod at a time.
		first := oneUngated(ns, pods)
		Consistently(ungatedPods(ns, pods)).WithTimeout(time.Second).Should(Equal([]string{pods[first].Name}))

		claim := claimOf(ns, lockclient.ClaimName(pods[first].Name, pods[first].UID, "migrate"))(Default)
		Expect(metav1.IsControlledBy(claim, pods[first])).To(BeTrue(), "the claim is owned by its pod")
		Expect(claim.Spec.Holder.PodName).To(Equal(pods[first].Name))
		p0 := &corev1.Pod{}
		Expect(k8sClient.Get(ctx(), key(pods[first]), p0)).To(Succeed())
		Expect(p0.Annotations[locksv1alpha1.PodFencingTokenAnnotation]).To(Equal(strconv.FormatInt(claim.Status.FencingToken, 10)))
		Expect(p0.Annotations[locksv1alpha1.PodHolderAnnotation]).To(Equal(string(pods[first].UID)))
		Eventually(podEventReasons(ns, pods[first].Name)).Should(ContainElements("ClaimCreated", "LockAcquired"))

		last, holder := claim.Status.FencingToken, pods[first]
		waiting := append(pods[:first:first], pods[first+1:]...)
		for len(waiting) > 0 {
			deleteNow(holder)
			next := oneUngated(ns, waiting)
			state := podState(ns, waiting[next].Name)(Default)
			Expect(state).To(MatchRegexp(`^ungated/\d+$`))
			token, err := strconv.ParseInt(state[len("ungated/"):], 10, 64)
			Expect(err).NotTo(HaveOccurred())
			Expect(token).To(BeNumerically(">", last))
			last, holder = token, waiting[next]
			waiting = append(waiting[:next:next], waiting[next+1:]...)
		}
	})

	It("that lose their claim while they run are told, never get a new claim, and are evicted under Evict", func() {
		ns := newNamespace()
		newLock(ns, "notify")
		newLock(ns, "evict", func(l *locksv1alpha1.DistributedLock) { l.Spec.LossPolicy = locksv1alpha1.LossPolicyEvict })
		for _, lock := range []string{"notify", "evict"} {
			pod := newLockPod(ns, lock+"-pod", lock, true)
			Eventually(podState(ns, pod.Name)).Should(MatchRegexp(`^ungated/\d+$`))
			claim := &locksv1alpha1.LockClaim{}
			Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: lockclient.ClaimName(pod.Name, pod.UID, lock)}, claim)).To(Succeed())

			// Someone deletes the running holder's claim: the lock is released (the pod lives),
			// and the pod must not quietly queue again for a new token.
			Expect(k8sClient.Delete(ctx(), claim)).To(Succeed())
			Eventually(podEventReasons(ns, pod.Name)).Should(ContainElement(locksv1alpha1.ReasonClaimDeleted))
			Consistently(func() error {
				return k8sClient.Get(ctx(), client.ObjectKeyFromObject(claim), &locksv1alpha1.LockClaim{})
			}).WithTimeout(time.Second).Should(Satisfy(apierrors.IsNotFound), "the pod got a new claim")
		}
		Expect(podDeletingNow(ns, "notify-pod")(Default)).To(BeFalse(), "lossPolicy Notify leaves the pod running")
		Eventually(podDeletingNow(ns, "evict-pod")).Should(BeTrue(), "lossPolicy Evict evicts the pod")
		Expect(podEventReasons(ns, "evict-pod")(Default)).To(ContainElement(locksv1alpha1.ReasonHolderEvicted))
	})

	It("copied from a pod that held (kubectl debug --copy-to), with its token and holder annotations, queue as new pods", func() {
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LossPolicy = locksv1alpha1.LossPolicyEvict })
		newLockPod(ns, "web-0", "db", true)
		Eventually(podState(ns, "web-0")).Should(MatchRegexp(`^ungated/\d+$`))
		orig := &corev1.Pod{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "web-0"}, orig)).To(Succeed())

		copied := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0-debug", Annotations: map[string]string{
			locksv1alpha1.PodLockAnnotation:         "db",
			locksv1alpha1.PodFencingTokenAnnotation: orig.Annotations[locksv1alpha1.PodFencingTokenAnnotation],
			locksv1alpha1.PodHolderAnnotation:       orig.Annotations[locksv1alpha1.PodHolderAnnotation]}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}},
				SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}}}
		Expect(k8sClient.Create(ctx(), copied)).To(Succeed())
		claimName := lockclient.ClaimName(copied.Name, copied.UID, "db")
		Eventually(phaseOf(ns, claimName)).Should(Equal(locksv1alpha1.ClaimPending), "the copy never held: it queues behind web-0")
		Expect(podEventReasons(ns, copied.Name)(Default)).NotTo(ContainElement(locksv1alpha1.ReasonClaimDeleted))
		Expect(podDeletingNow(ns, copied.Name)(Default)).To(BeFalse(), "a copy is never evicted for a loss it did not have")
	})

	It("still gated when their lock is deleted, queue again once it is created again; a pod that ran on its token does not", func() {
		ns := newNamespace()
		newLock(ns, "db")
		newLockPod(ns, "first", "db", true)
		Eventually(podState(ns, "first")).Should(MatchRegexp(`^ungated/\d+$`))
		waiter := newLockPod(ns, "waiter", "db", true)
		claimName := lockclient.ClaimName("waiter", waiter.UID, "db")
		Eventually(phaseOf(ns, claimName)).Should(Equal(locksv1alpha1.ClaimPending))

		deleteNow(lockOf(ns, "db")(Default))
		Eventually(phaseOf(ns, claimName)).Should(Equal(locksv1alpha1.ClaimFailed))
		Eventually(func() error {
			return k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "db"}, &locksv1alpha1.DistributedLock{})
		}).Should(Satisfy(apierrors.IsNotFound))
		newLock(ns, "db")
		Eventually(podState(ns, "waiter")).WithTimeout(40*time.Second).Should(MatchRegexp(`^ungated/\d+$`),
			"the waiter never ran: it queues again, and the first pod, which did, does not")
		Expect(podEventReasons(ns, "waiter")(Default)).To(ContainElement("QueuedAgain"))
		Eventually(podEventReasons(ns, "first")).Should(ContainElement("LockNotHeld"))
		Expect(podEventReasons(ns, "first")(Default)).NotTo(ContainElement("QueuedAgain"))
	})

	It("get a claim and the token annotation without a gate too", func() {
		ns := newNamespace()
		newLock(ns, "db")
		p := newLockPod(ns, "worker", "db", false)
		Eventually(podState(ns, "worker")).Should(MatchRegexp(`^ungated/\d+$`))
		Expect(phaseOf(ns, lockclient.ClaimName("worker", p.UID, "db"))()).To(Equal(held))
		Eventually(podEventReasons(ns, "worker")).Should(ContainElement("NotGated"),
			"a pod that waits gated but came without the gate (no admission policy) is told it did not wait")
	})

	It("wait, with an event saying why, while the lock does not exist", func() {
		ns := newNamespace()
		newLockPod(ns, "job-x", "nightly", true)
		Eventually(podEventReasons(ns, "job-x")).Should(ContainElement(locksv1alpha1.ReasonLockNotFound))
		Expect(podState(ns, "job-x")(Default)).To(Equal("gated/"))
		newLock(ns, "nightly")
		Eventually(podState(ns, "job-x")).Should(MatchRegexp(`^ungated/\d+$`))
	})

	It("never follow a claim of the pod's name that lockwarden would not have made (a forged claim)", func() {
		ns := newNamespace()
		newLock(ns, "db")
		x := newLockPod(ns, "x", "db", false)
		Eventually(podState(ns, "x")).Should(MatchRegexp(`^ungated/\d+$`))
		y := newLockPod(ns, "y", "", true)

		// Someone who may create claims makes the claim the controller would make for y,
		// controlled by y, with x's identity (its pod's UID, shown in the lock's status), then
		// annotates y.
		forged := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lockclient.ClaimName("y", y.UID, "db"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "y", UID: y.UID, Controller: ptr.To(true)}}},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: "y", Identity: string(x.UID)}}}
		Expect(k8sClient.Create(ctx(), forged)).To(Succeed())
		Expect(k8sClient.Patch(ctx(), y, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+locksv1alpha1.PodLockAnnotation+`":"db"}}}`)))).To(Succeed())

		Eventually(podEventReasons(ns, "y")).Should(ContainElement("ForeignLockClaim"))
		Consistently(podState(ns, "y")).WithTimeout(2*time.Second).Should(Equal("gated/"), "y was let in with x's hold")
		Expect(phaseOf(ns, forged.Name)()).To(Equal(pending), "the forged claim joined x's hold")
	})

	It("stay gated with a warning when the gate comes without the annotation or with a bad one", func() {
		ns := newNamespace()
		newLockPod(ns, "forgot", "", true)
		newLockPod(ns, "typo", "Not_A_Name", true)
		Eventually(podEventReasons(ns, "forgot")).Should(ContainElement("LockAnnotationMissing"))
		Eventually(podEventReasons(ns, "typo")).Should(ContainElement("InvalidLockAnnotation"))
		Expect(podState(ns, "forgot")(Default)).To(Equal("gated/"))
		Expect(podState(ns, "typo")(Default)).To(Equal("gated/"))
		list := &locksv1alpha1.LockClaimList{}
		Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	})

	It("keep their other gates and annotations, and a new pod of the same name is never marked", func() {
		ns := newNamespace()
		newLock(ns, "shared")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mixed",
			Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "shared", "team": "storage"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}},
				SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/quota"}, {Name: locksv1alpha1.PodSchedulingGate}}}}
		Expect(k8sClient.Create(ctx(), p)).To(Succeed())
		Eventually(func(g Gomega) []corev1.PodSchedulingGate {
			got := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx(), key(p), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKeyWithValue("team", "storage"))
			g.Expect(got.Annotations).To(HaveKey(locksv1alpha1.PodFencingTokenAnnotation))
			return got.Spec.SchedulingGates
		}).Should(Equal([]corev1.PodSchedulingGate{{Name: "example.com/quota"}}), "only the lockwarden gate is lifted")

		// The patch carries the UID of the pod it was computed for: sent to a pod that replaced
		// it under the same name, the API server refuses it and the new pod stays as it was.
		stale, err := controller.HolderPatch(p.UID, "7", "someone", true, false)
		Expect(err).NotTo(HaveOccurred())
		deleteNow(p)
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx(), key(p), &corev1.Pod{}))
		}).Should(BeTrue())
		replaced := newLockPod(ns, "mixed", "", true) // gated, not annotated: the controller only warns
		err = k8sClient.Patch(ctx(), replaced, client.RawPatch(types.StrategicMergePatchType, stale))
		Expect(err).To(HaveOccurred(), "a patch computed for an earlier pod of the same name must be refused")
		Expect(podState(ns, "mixed")(Default)).To(Equal("gated/"))

		fresh, err := controller.HolderPatch(replaced.UID, "7", "someone", true, false)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Patch(ctx(), replaced, client.RawPatch(types.StrategicMergePatchType, fresh))).To(Succeed())
		Expect(podState(ns, "mixed")(Default)).To(Equal("ungated/7"))
	})
})

var _ = Describe("Pods with a lock-mode annotation", func() {
	It("hold a lock of several places Shared beside each other, or Exclusive alone, in queue order", func() {
		ns := newNamespace()
		newLock(ns, "db", withPlaces(3))
		// Two readers fit beside each other, whichever claim arrives first.
		r1 := newModePod(ns, "p1-reader", "db", nil) // no annotation: Shared, the default
		r2 := newModePod(ns, "p2-reader", "db", ptr.To("Shared"))
		Eventually(podState(ns, "p1-reader")).Should(MatchRegexp(`^ungated/\d+$`))
		Eventually(podState(ns, "p2-reader")).Should(MatchRegexp(`^ungated/\d+$`))
		Expect(claimOf(ns, lockclient.ClaimName(r1.Name, r1.UID, "db"))(Default).Spec.Mode).To(Equal(locksv1alpha1.LockModeShared))
		Expect(claimOf(ns, lockclient.ClaimName(r2.Name, r2.UID, "db"))(Default).Spec.Mode).To(Equal(locksv1alpha1.LockModeShared))

		w := newModePod(ns, "p3-writer", "db", ptr.To("Exclusive"))
		writerClaim := lockclient.ClaimName(w.Name, w.UID, "db")
		Eventually(acquired(ns, writerClaim)).Should(Equal("False/Queued"))
		Expect(claimOf(ns, writerClaim)(Default).Spec.Mode).To(Equal(locksv1alpha1.LockModeExclusive))
		// A reader behind the waiting writer waits too, although a place is free.
		r4 := newModePod(ns, "p4-reader", "db", ptr.To("Shared"))
		Eventually(acquired(ns, lockclient.ClaimName(r4.Name, r4.UID, "db"))).Should(Equal("False/Queued"))
		Expect(podState(ns, "p3-writer")(Default)).To(Equal("gated/"))
		Expect(podState(ns, "p4-reader")(Default)).To(Equal("gated/"))

		deleteNow(r1)
		Consistently(podState(ns, "p3-writer"), "1s").Should(Equal("gated/"), "the writer waits for every reader")
		deleteNow(r2)
		Eventually(podState(ns, "p3-writer")).Should(MatchRegexp(`^ungated/\d+$`))
		Consistently(podState(ns, "p4-reader"), "1s").Should(Equal("gated/"), "nothing beside the writer")
		Eventually(func(g Gomega) []locksv1alpha1.LockHolder {
			return lockOf(ns, "db")(g).Status.Holders
		}).Should(ConsistOf(And(HaveField("Claim", writerClaim), HaveField("Mode", locksv1alpha1.LockModeExclusive))))

		deleteNow(w)
		Eventually(podState(ns, "p4-reader")).Should(MatchRegexp(`^ungated/\d+$`))
	})

	It("get no claim, and a warning, for a mode that is not Shared or Exclusive, until it is fixed", func() {
		ns := newNamespace()
		newLock(ns, "db", withPlaces(2))
		p := newModePod(ns, "typo", "db", ptr.To("exclusive"))
		Eventually(podEventReasons(ns, "typo")).Should(ContainElement("InvalidLockModeAnnotation"))
		Consistently(claimsIn(ns), "1s").Should(BeEmpty())
		Expect(podState(ns, "typo")(Default)).To(Equal("gated/"))

		setPodAnnotation(p, locksv1alpha1.PodLockModeAnnotation, ptr.To("Exclusive"))
		Eventually(podState(ns, "typo")).Should(MatchRegexp(`^ungated/\d+$`))
		Expect(claimOf(ns, lockclient.ClaimName(p.Name, p.UID, "db"))(Default).Spec.Mode).To(Equal(locksv1alpha1.LockModeExclusive))
	})

	It("get no claim, and a warning, for a priority that is not a whole number, and their claim's priority once it is", func() {
		ns := newNamespace()
		newLock(ns, "db")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "urgent",
			Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: "db", locksv1alpha1.LockPriorityAnnotation: "high"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}},
				SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}}}
		Expect(k8sClient.Create(ctx(), p)).To(Succeed())
		Eventually(podEventReasons(ns, "urgent")).Should(ContainElement("InvalidLockPriorityAnnotation"))
		Consistently(claimsIn(ns), "1s").Should(BeEmpty())

		setPodAnnotation(p, locksv1alpha1.LockPriorityAnnotation, ptr.To("50"))
		Eventually(podState(ns, "urgent")).Should(MatchRegexp(`^ungated/\d+$`))
		Expect(claimOf(ns, lockclient.ClaimName(p.Name, p.UID, "db"))(Default).Spec.Priority).To(Equal(int32(50)))

		// Once the claim exists its priority stays, and a changed annotation is said to change nothing.
		setPodAnnotation(p, locksv1alpha1.LockPriorityAnnotation, ptr.To("7"))
		Eventually(podEventReasons(ns, "urgent")).Should(ContainElement("LockPriorityChanged"))
		Expect(claimOf(ns, lockclient.ClaimName(p.Name, p.UID, "db"))(Default).Spec.Priority).To(Equal(int32(50)))
	})

	It("keep their claim's mode, with a warning, when the annotation changes after the claim exists", func() {
		ns := newNamespace()
		newLock(ns, "db", withPlaces(2))
		w := newModePod(ns, "p1-writer", "db", ptr.To("Exclusive"))
		Eventually(podState(ns, "p1-writer")).Should(MatchRegexp(`^ungated/\d+$`))
		claimName := lockclient.ClaimName(w.Name, w.UID, "db")
		token := claimOf(ns, claimName)(Default).Status.FencingToken

		setPodAnnotation(w, locksv1alpha1.PodLockModeAnnotation, ptr.To("Shared"))
		Eventually(podEventReasons(ns, "p1-writer")).Should(ContainElement("LockModeChanged"))
		r := newModePod(ns, "p2-reader", "db", nil)
		readerClaim := lockclient.ClaimName(r.Name, r.UID, "db")
		Eventually(acquired(ns, readerClaim)).Should(Equal("False/Queued"))
		Consistently(podState(ns, "p2-reader"), "1s").Should(Equal("gated/"), "the writer still holds the lock alone")
		c := claimOf(ns, claimName)(Default)
		Expect(c.Spec.Mode).To(Equal(locksv1alpha1.LockModeExclusive))
		Expect(c.Status.Phase).To(Equal(held))
		Expect(c.Status.FencingToken).To(Equal(token))

		// Removing the annotation (the default, Shared) is a change too.
		setPodAnnotation(w, locksv1alpha1.PodLockModeAnnotation, nil)
		Eventually(func(g Gomega) []string {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Name == "p1-writer" && e.Reason == "LockModeChanged" {
					notes = append(notes, e.Note)
				}
			}
			return notes
		}).Should(ContainElement(HavePrefix("Annotation locks.lockwarden.io/lock-mode is absent (Shared), but LockClaim " +
			claimName + " was made with mode Exclusive, which cannot change")))
		Expect(claimOf(ns, claimName)(Default).Spec.Mode).To(Equal(locksv1alpha1.LockModeExclusive))

		deleteNow(w)
		Eventually(podState(ns, "p2-reader")).Should(MatchRegexp(`^ungated/\d+$`))
	})
})
