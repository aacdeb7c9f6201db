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

package workloads_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"

	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

var (
	pipelineRun = schema.GroupVersionKind{Group: "tekton.dev", Version: "v1", Kind: "PipelineRun"}
	taskRun     = schema.GroupVersionKind{Group: "tekton.dev", Version: "v1", Kind: "TaskRun"}
	workflow    = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"}
)

// newNamespace creates a namespace of its own for a spec.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "runs-"}}
	Expect(k8sClient.Create(ctx(), ns)).To(Succeed())
	Expect(rbacenv.AllowClaims(ctx(), k8sClient, ns.Name)).To(Succeed()) // annotated runs' accounts may claim
	return ns.Name
}

// newLock creates a lock on the built-in backend with the given lockDelaySeconds.
func newLock(ns, name string, delay int32) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx(), &locksv1alpha1.DistributedLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       locksv1alpha1.DistributedLockSpec{LockDelaySeconds: delay},
	})).To(Succeed())
}

// newRun creates an object of kind gvk from spec, annotated with lock when lock is set.
func newRun(gvk schema.GroupVersionKind, ns, name, lock string, spec map[string]any) *unstructured.Unstructured {
	GinkgoHelper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	if lock != "" {
		u.SetAnnotations(map[string]string{locksv1alpha1.PodLockAnnotation: lock})
	}
	Expect(k8sClient.Create(ctx(), u)).To(Succeed())
	return u
}

// pendingPipelineRun is the spec of a PipelineRun created pending, as a user queues one on a lock.
func pendingPipelineRun() map[string]any {
	return map[string]any{"status": "PipelineRunPending", "pipelineRef": map[string]any{"name": "deploy"}}
}

// get reads an object of kind gvk.
func get(gvk schema.GroupVersionKind, ns, name string) func(g Gomega) *unstructured.Unstructured {
	return func(g Gomega) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
		return u
	}
}

// started says whether a PipelineRun or Workflow may run (no pending spec.status, no
// spec.suspend), and with which token: "waiting/", "started/7".
func started(gvk schema.GroupVersionKind, ns, name string) func(g Gomega) string {
	return func(g Gomega) string {
		u := get(gvk, ns, name)(g)
		status, _, _ := unstructured.NestedString(u.Object, "spec", "status")
		suspend, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
		state := "started/"
		if status == "PipelineRunPending" || suspend {
			state = "waiting/"
		}
		return state + u.GetAnnotations()[locksv1alpha1.PodFencingTokenAnnotation]
	}
}

// finishTekton writes a Tekton run's Succeeded condition through the status subresource, as
// Tekton's controller does.
func finishTekton(gvk schema.GroupVersionKind, ns, name, status, reason string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		u := get(gvk, ns, name)(g)
		cond := map[string]any{"type": "Succeeded", "status": status, "reason": reason,
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		g.Expect(unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions")).To(Succeed())
		if gvk.Kind == "TaskRun" {
			// The TaskRun schema requires the name of the pod that ran it.
			g.Expect(unstructured.SetNestedField(u.Object, name+"-pod", "status", "podName")).To(Succeed())
		}
		g.Expect(k8sClient.Status().Update(ctx(), u)).To(Succeed())
	}).Should(Succeed())
}

// setWorkflowPhase writes an Argo Workflow's status.phase (its CRD has no status subresource).
func setWorkflowPhase(ns, name, phase string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		u := get(workflow, ns, name)(g)
		g.Expect(unstructured.SetNestedField(u.Object, phase, "status", "phase")).To(Succeed())
		g.Expect(k8sClient.Update(ctx(), u)).To(Succeed())
	}).Should(Succeed())
}

// claimOf reads a claim.
func claimOf(ns, name string) func(g Gomega) *locksv1alpha1.LockClaim {
	return func(g Gomega) *locksv1alpha1.LockClaim {
		c := &locksv1alpha1.LockClaim{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		return c
	}
}

// acquired is a claim's phase and Acquired condition, "Held/True/Acquired".
func acquired(ns, name string) func(g Gomega) string {
	return func(g Gomega) string {
		c := claimOf(ns, name)(g)
		cond := meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionAcquired)
		g.Expect(cond).NotTo(BeNil())
		return string(c.Status.Phase) + "/" + string(cond.Status) + "/" + cond.Reason
	}
}

var _ = Describe("Tekton runs", func() {
	It("start pending PipelineRuns one at a time, each with its token, as the one before finishes or is cancelled", func() {
		ns := newNamespace()
		newLock(ns, "staging", 2)
		first := newRun(pipelineRun, ns, "deploy-1", "staging", pendingPipelineRun())
		Eventually(started(pipelineRun, ns, "deploy-1")).Should(MatchRegexp(`^started/\d+$`))
		firstClaim := locksv1alpha1.WorkloadClaimName("deploy-1", first.GetUID(), "staging")
		claim := claimOf(ns, firstClaim)(Default)
		Expect(metav1.IsControlledBy(claim, first)).To(BeTrue())
		Expect(started(pipelineRun, ns, "deploy-1")(Default)).To(Equal("started/" + strconv.FormatInt(claim.Status.FencingToken, 10)))
		pipelineRef, _, _ := unstructured.NestedString(get(pipelineRun, ns, "deploy-1")(Default).Object, "spec", "pipelineRef", "name")
		Expect(pipelineRef).To(Equal("deploy"), "the resume leaves the rest of the spec alone")

		second := newRun(pipelineRun, ns, "deploy-2", "staging", pendingPipelineRun())
		// Queued before the third is created: the queue follows the claims' creation.
		Eventually(acquired(ns, locksv1alpha1.WorkloadClaimName("deploy-2", second.GetUID(), "staging"))).Should(Equal("Pending/False/Queued"))
		third := newRun(pipelineRun, ns, "deploy-3", "staging", pendingPipelineRun())
		Consistently(started(pipelineRun, ns, "deploy-2")).WithTimeout(time.Second).Should(Equal("waiting/"))

		finishTekton(pipelineRun, ns, "deploy-1", "True", "Succeeded")
		Eventually(acquired(ns, firstClaim)).Should(Equal("Released/False/HolderTerminated"))
		Eventually(started(pipelineRun, ns, "deploy-2")).Should(MatchRegexp(`^started/\d+$`))
		Expect(started(pipelineRun, ns, "deploy-3")(Default)).To(Equal("waiting/"))

		// A cancelled run ends its hold without a release: the next waits out lockDelaySeconds.
		finishTekton(pipelineRun, ns, "deploy-2", "False", "Cancelled")
		thirdClaim := locksv1alpha1.WorkloadClaimName("deploy-3", third.GetUID(), "staging")
		Eventually(acquired(ns, thirdClaim)).Should(Equal("Pending/False/LockDelay"))
		Eventually(started(pipelineRun, ns, "deploy-3")).Should(MatchRegexp(`^started/\d+$`))
	})

	It("hold for a TaskRun that a claim names, until it fails", func() {
		ns := newNamespace()
		newLock(ns, "db", 0)
		newRun(taskRun, ns, "migrate", "", map[string]any{"taskRef": map[string]any{"name": "migrate"}})
		Expect(k8sClient.Create(ctx(), &locksv1alpha1.LockClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate"},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{
				Object: &locksv1alpha1.HolderObject{APIVersion: "tekton.dev/v1", Kind: "TaskRun", Name: "migrate"}}},
		})).To(Succeed())
		Eventually(acquired(ns, "migrate")).Should(Equal("Held/True/Acquired"))
		finishTekton(taskRun, ns, "migrate", "False", "Failed")
		Eventually(acquired(ns, "migrate")).Should(Equal("Released/False/HolderTerminated"))
		Expect(meta.FindStatusCondition(claimOf(ns, "migrate")(Default).Status.Conditions, locksv1alpha1.ConditionAcquired).Message).To(
			Equal("Released: TaskRun migrate failed: its condition Succeeded is False (Failed)"))
	})
})

var _ = Describe("Argo Workflows", func() {
	It("resume a suspended Workflow once it holds, and hand over when it succeeds or errs", func() {
		ns := newNamespace()
		newLock(ns, "cluster", 2)
		spec := func() map[string]any {
			return map[string]any{"suspend": true, "entrypoint": "main", "templates": []any{map[string]any{"name": "main"}}}
		}
		newRun(workflow, ns, "upgrade-1", "cluster", spec())
		Eventually(started(workflow, ns, "upgrade-1")).Should(MatchRegexp(`^started/\d+$`))
		second := newRun(workflow, ns, "upgrade-2", "cluster", spec())
		Eventually(acquired(ns, locksv1alpha1.WorkloadClaimName("upgrade-2", second.GetUID(), "cluster"))).Should(Equal("Pending/False/Queued"))
		third := newRun(workflow, ns, "upgrade-3", "cluster", spec())
		Consistently(started(workflow, ns, "upgrade-2")).WithTimeout(time.Second).Should(Equal("waiting/"))

		setWorkflowPhase(ns, "upgrade-1", "Running")
		Consistently(started(workflow, ns, "upgrade-2")).WithTimeout(time.Second).Should(Equal("waiting/"))
		setWorkflowPhase(ns, "upgrade-1", "Succeeded")
		Eventually(started(workflow, ns, "upgrade-2")).Should(MatchRegexp(`^started/\d+$`))
		Expect(acquired(ns, locksv1alpha1.WorkloadClaimName("upgrade-2", second.GetUID(), "cluster"))(Default)).To(Equal("Held/True/Acquired"))

		setWorkflowPhase(ns, "upgrade-2", "Error")
		Eventually(acquired(ns, locksv1alpha1.WorkloadClaimName("upgrade-3", third.GetUID(), "cluster"))).Should(Equal("Pending/False/LockDelay"))
		Eventually(started(workflow, ns, "upgrade-3")).Should(MatchRegexp(`^started/\d+$`))
	})
})

var _ = Describe("A Workflow run again after its hold ended (argo retry)", func() {
	It("is suspended, queues again with a new claim and resumes with a new token once that holds", func() {
		ns := newNamespace()
		newLock(ns, "cluster", 0)
		spec := map[string]any{"suspend": true, "entrypoint": "main", "templates": []any{map[string]any{"name": "main"}}}
		w := newRun(workflow, ns, "upgrade", "cluster", spec)
		claimName := locksv1alpha1.WorkloadClaimName("upgrade", w.GetUID(), "cluster")
		Eventually(started(workflow, ns, "upgrade")).Should(MatchRegexp(`^started/\d+$`))
		first := claimOf(ns, claimName)(Default)
		setWorkflowPhase(ns, "upgrade", "Failed")
		Eventually(acquired(ns, claimName)).Should(Equal("Released/False/HolderTerminated"))

		// argo retry: the same object goes back to Running; its spec.suspend is long gone.
		setWorkflowPhase(ns, "upgrade", "Running")
		Eventually(func(g Gomega) {
			c := claimOf(ns, claimName)(g)
			g.Expect(c.UID).NotTo(Equal(first.UID), "a new claim")
			g.Expect(c.Status.Phase).To(Equal(locksv1alpha1.ClaimHeld))
			g.Expect(c.Status.FencingToken).To(BeNumerically(">", first.Status.FencingToken))
		}).Should(Succeed())
		Eventually(started(workflow, ns, "upgrade")).Should(MatchRegexp(`^started/\d+$`))
		Expect(started(workflow, ns, "upgrade")(Default)).NotTo(Equal("started/"+strconv.FormatInt(first.Status.FencingToken, 10)), "resumed with the new claim's token")
		Eventually(func(g Gomega) []string {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.Name == "upgrade" {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).Should(ContainElement("RunningWithoutLock"))
	})
})

// applySample creates the objects of a sample file in ns, as kubectl create would (objects that
// exist already are left as they are), and returns the workload objects it created.
func applySample(ns, file string) []*unstructured.Unstructured {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "workloads", file))
	Expect(err).NotTo(HaveOccurred())
	var runs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---\n") {
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		u.SetNamespace(ns)
		err := k8sClient.Create(ctx(), u)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		Expect(err).NotTo(HaveOccurred(), "%s: %s %s", file, u.GetKind(), u.GetName())
		if _, asks := u.GetAnnotations()[locksv1alpha1.PodLockAnnotation]; asks {
			runs = append(runs, u)
		}
	}
	return runs
}

// oneAtATime checks that of two runs of kind gvk one starts and the other waits, then finishes the
// started one with finish and checks that the other starts. Which starts first is the lock's queue
// order: the order in which the controller made their claims, which two runs created a moment
// apart do not fix.
func oneAtATime(gvk schema.GroupVersionKind, ns string, runs []*unstructured.Unstructured, finish func(name string)) {
	GinkgoHelper()
	Expect(runs).To(HaveLen(2))
	a, b := runs[0].GetName(), runs[1].GetName()
	Eventually(func(g Gomega) []string {
		return []string{started(gvk, ns, a)(g), started(gvk, ns, b)(g)}
	}).Should(Or(ConsistOf(MatchRegexp(`^started/\d+$`), Equal("waiting/"))))
	first, second := a, b
	if started(gvk, ns, a)(Default) == "waiting/" {
		first, second = b, a
	}
	Consistently(started(gvk, ns, second)).WithTimeout(time.Second).Should(Equal("waiting/"))
	finish(first)
	Eventually(started(gvk, ns, second)).Should(MatchRegexp(`^started/\d+$`))
}

var _ = Describe("The workload samples", func() {
	It("run the Tekton sample twice, one run at a time", func() {
		ns := newNamespace()
		runs := append(applySample(ns, "tekton-deploy-pipelinerun.yaml"), applySample(ns, "tekton-deploy-pipelinerun.yaml")...)
		oneAtATime(pipelineRun, ns, runs, func(name string) { finishTekton(pipelineRun, ns, name, "True", "Succeeded") })
	})

	It("run the Argo sample twice, one Workflow at a time", func() {
		ns := newNamespace()
		runs := append(applySample(ns, "argo-workflow.yaml"), applySample(ns, "argo-workflow.yaml")...)
		oneAtATime(workflow, ns, runs, func(name string) { setWorkflowPhase(ns, name, "Succeeded") })
	})

	It("accept the CronJob sample (the e2e suite runs it under the real CronJob and Job controllers)", func() {
		ns := newNamespace()
		Expect(applySample(ns, "cronjobs-one-database.yaml")).To(BeEmpty(), "the annotation is on the jobTemplates, not on the CronJobs")
	})
})
