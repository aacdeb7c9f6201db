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
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// newJob creates a Job that nothing runs (envtest has no Job controller): the spec drives its
// status as the Job controller would.
func newJob(ns, name string) *batchv1.Job {
	GinkgoHelper()
	job := newJobObject(ns, name)
	Expect(k8sClient.Create(ctx(), job)).To(Succeed())
	return job
}

// newJobObject is a suspended Job of one container, not created yet.
func newJobObject(ns, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
}

// finishJob gives a Job the conditions the Job controller writes when it ends: cond (Complete or
// Failed) with, since Kubernetes 1.31, its forerunner (SuccessCriteriaMet or FailureTarget).
func finishJob(job *batchv1.Job, cond batchv1.JobConditionType) {
	GinkgoHelper()
	fore := batchv1.JobSuccessCriteriaMet
	if cond == batchv1.JobFailed {
		fore = batchv1.JobFailureTarget
	}
	now := metav1.Now()
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(job), job)).To(Succeed())
		job.Status.StartTime = &now
		job.Status.CompletionTime = nil
		if cond == batchv1.JobComplete {
			job.Status.CompletionTime = &now
		}
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: fore, Status: corev1.ConditionTrue, Reason: "Test", LastProbeTime: now, LastTransitionTime: now},
			{Type: cond, Status: corev1.ConditionTrue, Reason: "Test", LastProbeTime: now, LastTransitionTime: now},
		}
		g.Expect(k8sClient.Status().Update(ctx(), job)).To(Succeed())
	}).Should(Succeed())
}

// heldByJob makes a claim's holder the Job name.
func heldByJob(name string) func(*locksv1alpha1.LockClaim) {
	return func(c *locksv1alpha1.LockClaim) {
		c.Spec.Holder = &locksv1alpha1.ClaimHolder{Object: &locksv1alpha1.HolderObject{APIVersion: "batch/v1", Kind: "Job", Name: name}}
	}
}

var _ = Describe("Workload objects as holders (spec.holder.object)", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("holds while the Job runs and hands over at once when it completes", func() {
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LockDelaySeconds = 60 })
		job := newJob(ns, "migrate")
		newClaim(ns, "a", "db", "", heldByJob("migrate"))
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		Expect(claimOf(ns, "a")(Default).Status.ObjectUID).To(Equal(job.UID))
		Expect(claimOf(ns, "a")(Default).Status.HolderIdentity).To(Equal(string(job.UID)), "a Job's claim holds as the Job")
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))
		Consistently(phaseOf(ns, "a")).WithTimeout(time.Second).Should(Equal(held))

		finishJob(job, batchv1.JobComplete)
		Eventually(phaseOf(ns, "a")).Should(Equal(locksv1alpha1.ClaimReleased))
		Expect(acquiredMessage(ns, "a")(Default)).To(Equal(
			"False/HolderTerminated: Released: Job migrate succeeded: its condition Complete is True"))
		// A run that completed lets go as a release does: no lock delay.
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
	})

	It("holds the next grant back for lockDelaySeconds when the Job fails", func() {
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LockDelaySeconds = 3 })
		job := newJob(ns, "migrate")
		newClaim(ns, "a", "db", "", heldByJob("migrate"))
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		finishJob(job, batchv1.JobFailed)
		Eventually(phaseOf(ns, "a")).Should(Equal(locksv1alpha1.ClaimReleased))
		Expect(acquiredMessage(ns, "a")(Default)).To(Equal(
			"False/HolderTerminated: Released: Job migrate failed: its condition Failed is True (Test)"))
		Eventually(acquired(ns, "b")).Should(Equal("False/LockDelay"))
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
	})

	It("releases when the Job is deleted, and does not hold for a new Job of the same name", func() {
		newLock(ns, "db")
		job := newJob(ns, "migrate")
		newClaim(ns, "a", "db", "", heldByJob("migrate"))
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		Expect(k8sClient.Delete(ctx(), job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(phaseOf(ns, "a")).Should(Equal(locksv1alpha1.ClaimReleased))
		Expect(acquiredMessage(ns, "a")(Default)).To(Equal("False/HolderTerminated: Released: Job migrate no longer exists"))
		Eventually(phaseOf(ns, "b")).Should(Equal(held))

		// A waiting claim whose Job is replaced by another of the same name never gets the lock.
		second := newJob(ns, "second")
		newClaim(ns, "c", "db", "", heldByJob("second"))
		Eventually(func(g Gomega) { g.Expect(claimOf(ns, "c")(g).Status.ObjectUID).To(Equal(second.UID)) }).Should(Succeed())
		Expect(k8sClient.Delete(ctx(), second, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		newJob(ns, "second")
		Eventually(phaseOf(ns, "c")).Should(Equal(locksv1alpha1.ClaimFailed))
		Expect(acquiredMessage(ns, "c")(Default)).To(HavePrefix("False/HolderTerminated: The holder will never get the lock: Job second "))
	})

	It("holds until a Job deleted in the foreground is gone, though its claim is deleted first", func() {
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.LockDelaySeconds = 2 })
		job := newJob(ns, "migrate")
		newClaim(ns, "a", "db", "", heldByJob("migrate"), func(c *locksv1alpha1.LockClaim) {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
		})
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
		newClaim(ns, "b", "db", "")
		Eventually(acquired(ns, "b")).Should(Equal("False/Queued"))

		// What kubectl delete --cascade=foreground does, with the garbage collector played here:
		// the Job stays, terminating, until its dependents (its claim, its pods) are gone.
		Expect(k8sClient.Delete(ctx(), job, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		Eventually(func(g Gomega) []string {
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(job), job)).To(Succeed())
			return job.Finalizers
		}).Should(ContainElement(metav1.FinalizerDeleteDependents))
		Expect(k8sClient.Delete(ctx(), &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}})).To(Succeed())
		// The claim is gone at once (claims carry no finalizer); the lock record keeps the hold.
		Consistently(func(g Gomega) string {
			l := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "db"}, l)).To(Succeed())
			g.Expect(l.Status.Holders).To(HaveLen(1))
			return l.Status.Holders[0].Claim
		}).WithTimeout(2*time.Second).Should(Equal("a"), "the Job's pods may still run")
		Expect(phaseOf(ns, "b")()).To(Equal(locksv1alpha1.ClaimPending))

		Eventually(func() error {
			if err := k8sClient.Get(ctx(), client.ObjectKeyFromObject(job), job); err != nil {
				return err
			}
			job.Finalizers = nil
			return k8sClient.Update(ctx(), job)
		}).Should(Succeed())
		Eventually(acquired(ns, "b")).Should(Equal("False/LockDelay"), "a Job deleted before it finished ends its hold without a release")
		Eventually(phaseOf(ns, "b")).Should(Equal(held))
	})

	It("keeps a claim whose Job does not exist yet aside, and grants it once the Job appears", func() {
		newLock(ns, "db")
		newClaim(ns, "a", "db", "", heldByJob("later"))
		want := "False/WorkloadNotFound: Job later does not exist in namespace " + ns +
			"; the claim waits aside for it, behind no one and blocking no one, and fails at "
		Eventually(acquiredMessage(ns, "a")).Should(HavePrefix(want))
		newJob(ns, "later")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
	})

	It("fails a claim whose object's kind the install does not watch, and says which kinds it does", func() {
		newLock(ns, "db")
		newClaim(ns, "a", "db", "", func(c *locksv1alpha1.LockClaim) {
			c.Spec.Holder = &locksv1alpha1.ClaimHolder{Object: &locksv1alpha1.HolderObject{
				APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: "nightly"}}
		})
		Eventually(phaseOf(ns, "a")).Should(Equal(locksv1alpha1.ClaimFailed))
		Expect(acquiredMessage(ns, "a")(Default)).To(Equal("False/WorkloadKindNotWatched: This install does not watch Workflow objects " +
			"(argoproj.io/v1alpha1), so it cannot tell when one finishes; it watches: batch/v1/Job " +
			"(the manager's --workload-kinds, the chart's workloads values)"))
	})
})
