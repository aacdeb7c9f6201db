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
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// newLockJob creates a Job annotated to ask for lock, suspended as the admission policy leaves it
// (envtest runs no admission policy, and no Job controller: nothing runs it).
func newLockJob(ns, name, lock string, suspended bool, annotations ...string) *batchv1.Job {
	GinkgoHelper()
	job := newJobObject(ns, name)
	job.Annotations = map[string]string{locksv1alpha1.PodLockAnnotation: lock}
	for i := 0; i+1 < len(annotations); i += 2 {
		job.Annotations[annotations[i]] = annotations[i+1]
	}
	job.Spec.Suspend = ptr.To(suspended)
	Expect(k8sClient.Create(ctx(), job)).To(Succeed())
	return job
}

// jobState is "suspended" or "running", then the token the Job and its pod template carry
// ("suspended/", "running/7/7").
func jobState(ns, name string) func(g Gomega) string {
	return func(g Gomega) string {
		job := &batchv1.Job{}
		g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, job)).To(Succeed())
		state := "running"
		if ptr.Deref(job.Spec.Suspend, false) {
			state = "suspended"
		}
		token := job.Annotations[locksv1alpha1.PodFencingTokenAnnotation]
		if token == "" {
			return state + "/"
		}
		return fmt.Sprintf("%s/%s/%s", state, token, job.Spec.Template.Annotations[locksv1alpha1.PodFencingTokenAnnotation])
	}
}

// jobEvents lists "reason: note" of the events about a Job.
func jobEvents(ns, name string) func(g Gomega) []string { return eventNotes(ns, "Job", name) }

var _ = Describe("Workload objects that ask for a lock by annotation", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("resumes annotated Jobs one at a time, each with its token on the Job and its pod template", func() {
		newLock(ns, "db")
		first := newLockJob(ns, "migrate-1", "db", true)
		Eventually(jobState(ns, "migrate-1")).Should(MatchRegexp(`^running/(\d+)/(\d+)$`))
		claimName := locksv1alpha1.WorkloadClaimName("migrate-1", first.UID, "db")
		claim := claimOf(ns, claimName)(Default)
		Expect(metav1.IsControlledBy(claim, first)).To(BeTrue(), "the claim is owned by its Job, so it goes with it")
		Expect(claim.Spec.Holder.Object).To(Equal(&locksv1alpha1.HolderObject{APIVersion: "batch/v1", Kind: "Job", Name: "migrate-1"}))
		token := strconv.FormatInt(claim.Status.FencingToken, 10)
		Expect(jobState(ns, "migrate-1")(Default)).To(Equal("running/" + token + "/" + token))
		Eventually(jobEvents(ns, "migrate-1")).Should(ContainElement("LockAcquired: Lock db held with fencing token " + token + "; resumed"))

		newLockJob(ns, "migrate-2", "db", true)
		Consistently(jobState(ns, "migrate-2")).WithTimeout(time.Second).Should(Equal("suspended/"))

		finishJob(first, batchv1.JobComplete)
		Eventually(jobState(ns, "migrate-2")).Should(MatchRegexp(`^running/\d+/\d+$`))
		var second int64
		_, err := fmt.Sscanf(jobState(ns, "migrate-2")(Default), "running/%d/", &second)
		Expect(err).NotTo(HaveOccurred())
		Expect(second).To(BeNumerically(">", claim.Status.FencingToken))
	})

	It("queues a Job created from one that held, with its token and holder annotations copied, as a new Job", func() {
		newLock(ns, "db")
		first := newLockJob(ns, "migrate-1", "db", true)
		Eventually(jobState(ns, "migrate-1")).Should(MatchRegexp(`^running/\d+/\d+$`))
		orig := &batchv1.Job{}
		Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(first), orig)).To(Succeed())

		// kubectl get job -o yaml, a new name, kubectl create: the annotations come along.
		copied := newLockJob(ns, "migrate-1-again", "db", true,
			locksv1alpha1.PodFencingTokenAnnotation, orig.Annotations[locksv1alpha1.PodFencingTokenAnnotation],
			locksv1alpha1.PodHolderAnnotation, orig.Annotations[locksv1alpha1.PodHolderAnnotation])
		claimName := locksv1alpha1.WorkloadClaimName(copied.Name, copied.UID, "db")
		Eventually(phaseOf(ns, claimName)).Should(Equal(locksv1alpha1.ClaimPending), "the copy never held: it queues behind migrate-1")
		Expect(jobState(ns, copied.Name)(Default)).To(HavePrefix("suspended/"))

		finishJob(first, batchv1.JobComplete)
		Eventually(phaseOf(ns, claimName)).Should(Equal(held))
		token := strconv.FormatInt(claimOf(ns, claimName)(Default).Status.FencingToken, 10)
		Eventually(jobState(ns, copied.Name)).Should(Equal("running/" + token + "/" + token))
	})

	It("tells a running Job whose claim is deleted that it no longer holds the lock, and never queues it again", func() {
		newLock(ns, "db")
		first := newLockJob(ns, "migrate-1", "db", true)
		Eventually(jobState(ns, "migrate-1")).Should(MatchRegexp(`^running/\d+/\d+$`))
		second := newLockJob(ns, "migrate-2", "db", true)
		claimName := locksv1alpha1.WorkloadClaimName(first.Name, first.UID, "db")
		token := strconv.FormatInt(claimOf(ns, claimName)(Default).Status.FencingToken, 10)

		// A clean-up (kubectl delete lclaim --all) or anyone with the lockctl Role.
		Expect(k8sClient.Delete(ctx(), claimOf(ns, claimName)(Default))).To(Succeed())
		Eventually(jobState(ns, second.Name)).Should(MatchRegexp(`^running/\d+/\d+$`), "the lock was released")
		Eventually(jobEvents(ns, first.Name)).Should(ContainElement("ClaimDeleted: LockClaim " + claimName +
			" was deleted while this Job held lock db with fencing token " + token +
			": the lock was released and may be granted to another while the Job runs on; it is not queued again (create a new Job to queue)"))
		Consistently(func() error {
			return k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: claimName}, &locksv1alpha1.LockClaim{})
		}).WithTimeout(time.Second).Should(Satisfy(apierrors.IsNotFound), "the Job got a new claim")
	})

	It("says on the Job when its resume is refused (a policy against template edits), and resumes it once allowed", func() {
		newLock(ns, "db")
		// A cluster policy, in this namespace only, that refuses every change of a Job's pod template.
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-template-edits-" + ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.template == oldObject.spec.template",
					Message: "pod templates may not change here"}}}}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
		Expect(k8sClient.Create(ctx(), policy)).To(Succeed())
		Expect(k8sClient.Create(ctx(), binding)).To(Succeed())
		DeferCleanup(func() {
			_ = k8sClient.Delete(ctx(), binding)
			_ = k8sClient.Delete(ctx(), policy)
		})
		probe := newJobObject(ns, "probe")
		probe.Spec.Suspend = ptr.To(true)
		Expect(k8sClient.Create(ctx(), probe)).To(Succeed())
		Eventually(func(g Gomega) {
			j := &batchv1.Job{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(probe), j)).To(Succeed())
			j.Spec.Template.Annotations = map[string]string{"probe": time.Now().String()}
			g.Expect(k8sClient.Update(ctx(), j)).To(MatchError(ContainSubstring("pod templates may not change here")))
		}).Should(Succeed(), "the policy is in force")

		job := newLockJob(ns, "migrate", "db", true)
		claimName := locksv1alpha1.WorkloadClaimName(job.Name, job.UID, "db")
		Eventually(phaseOf(ns, claimName)).Should(Equal(held))
		Eventually(jobEvents(ns, job.Name)).Should(ContainElement(And(
			HavePrefix("ResumeFailed: Could not resume the Job with its fencing token "),
			ContainSubstring("pod templates may not change here"),
			HaveSuffix("; its LockClaim "+claimName+" holds lock db meanwhile and every claim queued behind it waits; retried"))))
		Expect(jobState(ns, job.Name)(Default)).To(Equal("suspended/"))

		Expect(k8sClient.Delete(ctx(), binding)).To(Succeed())
		Eventually(jobState(ns, job.Name)).WithTimeout(time.Minute).Should(MatchRegexp(`^running/\d+/\d+$`))
	})

	It("resumes a held Job once: a Job its owner suspends while it holds stays suspended", func() {
		newLock(ns, "db")
		job := newLockJob(ns, "migrate", "db", true)
		Eventually(jobState(ns, job.Name)).Should(MatchRegexp(`^running/\d+/\d+$`))
		// kubectl patch job migrate -p '{"spec":{"suspend":true}}'
		Expect(k8sClient.Patch(ctx(), job, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
		Consistently(func(g Gomega) string { return jobState(ns, job.Name)(g) }).WithTimeout(2*time.Second).Should(HavePrefix("suspended/"),
			"a later suspension is the owner's business")
		Expect(phaseOf(ns, locksv1alpha1.WorkloadClaimName(job.Name, job.UID, "db"))()).To(Equal(held), "the hold lasts until the Job finishes or is deleted")
	})

	It("makes no claim for a Job that Kueue or another controller suspends and resumes, and says so", func() {
		newLock(ns, "db")
		queued := newJobObject(ns, "in-kueue")
		queued.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team-queue"}
		queued.Annotations = map[string]string{locksv1alpha1.PodLockAnnotation: "db"}
		queued.Spec.Suspend = ptr.To(true)
		Expect(k8sClient.Create(ctx(), queued)).To(Succeed())
		managed := newJobObject(ns, "multikueue")
		managed.Annotations = map[string]string{locksv1alpha1.PodLockAnnotation: "db"}
		managed.Spec.Suspend = ptr.To(true)
		managed.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
		Expect(k8sClient.Create(ctx(), managed)).To(Succeed())

		Eventually(jobEvents(ns, "in-kueue")).Should(ContainElement(And(HavePrefix("ManagedElsewhere: The Job is suspended and resumed by Kueue (label kueue.x-k8s.io/queue-name: team-queue), not by lockwarden"),
			ContainSubstring("lockctl acquire in an init container"))))
		Eventually(jobEvents(ns, "multikueue")).Should(ContainElement(HavePrefix("ManagedElsewhere: The Job is suspended and resumed by kueue.x-k8s.io/multikueue (spec.managedBy), not by lockwarden")))
		for _, j := range []*batchv1.Job{queued, managed} {
			name := locksv1alpha1.WorkloadClaimName(j.Name, j.UID, "db")
			Consistently(func() error {
				return k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &locksv1alpha1.LockClaim{})
			}).WithTimeout(time.Second).Should(Satisfy(apierrors.IsNotFound), "Job %s got a claim", j.Name)
			Expect(jobState(ns, j.Name)(Default)).To(Equal("suspended/"), "never patched")
		}
	})

	It("takes the claim's mode and wait timeout from the Job's annotations, and leaves a Job whose wait ended suspended", func() {
		newLock(ns, "db")
		newClaim(ns, "holder", "db", "")
		Eventually(phaseOf(ns, "holder")).Should(Equal(held))
		job := newLockJob(ns, "nightly", "db", true,
			locksv1alpha1.PodLockModeAnnotation, "Exclusive", locksv1alpha1.LockWaitTimeoutAnnotation, "0",
			locksv1alpha1.LockPriorityAnnotation, "-5")
		name := locksv1alpha1.WorkloadClaimName("nightly", job.UID, "db")
		Eventually(phaseOf(ns, name)).Should(Equal(locksv1alpha1.ClaimTimedOut))
		claim := claimOf(ns, name)(Default)
		Expect(claim.Spec.Mode).To(Equal(locksv1alpha1.LockModeExclusive))
		Expect(claim.Spec.WaitTimeoutSeconds).To(Equal(ptr.To[int32](0)))
		Expect(claim.Spec.Priority).To(Equal(int32(-5)))
		Eventually(jobEvents(ns, "nightly")).Should(ContainElement("LockNotAcquired: LockClaim " + name +
			" for lock db ended with phase TimedOut (WaitTimedOut): the Job stays suspended and is not queued again; delete it, or create a new one to queue again"))
		Consistently(jobState(ns, "nightly")).WithTimeout(time.Second).Should(Equal("suspended/"))
	})

	It("makes no claim for annotations it cannot read, and says why on the Job", func() {
		newLock(ns, "db")
		newLockJob(ns, "bad-mode", "db", true, locksv1alpha1.PodLockModeAnnotation, "Sometimes")
		newLockJob(ns, "bad-timeout", "db", true, locksv1alpha1.LockWaitTimeoutAnnotation, "-1")
		newLockJob(ns, "bad-lock", "Not_A_Lock", true)
		newLockJob(ns, "bad-priority", "db", true, locksv1alpha1.LockPriorityAnnotation, "high")
		Eventually(jobEvents(ns, "bad-mode")).Should(ContainElement(
			`InvalidLockModeAnnotation: Annotation locks.lockwarden.io/lock-mode="Sometimes" is not a lock mode: use Shared or Exclusive (absent means Shared); no claim was made`))
		Eventually(jobEvents(ns, "bad-timeout")).Should(ContainElement(
			`InvalidLockWaitTimeoutAnnotation: Annotation locks.lockwarden.io/lock-wait-timeout-seconds="-1" is not a whole number of seconds from 0 up (0: take the lock only if it is free); no claim was made`))
		Eventually(jobEvents(ns, "bad-priority")).Should(ContainElement(
			`InvalidLockPriorityAnnotation: Annotation locks.lockwarden.io/lock-priority="high" is not a priority: use a whole number from -2147483648 to 2147483647 (absent means 0; higher is granted first); no claim was made`))
		Eventually(jobEvents(ns, "bad-lock")).Should(ContainElement(HavePrefix(
			`InvalidLockAnnotation: Annotation locks.lockwarden.io/lock="Not_A_Lock" is not a DistributedLock name: `)))
		claims := &locksv1alpha1.LockClaimList{}
		Expect(k8sClient.List(ctx(), claims, client.InNamespace(ns))).To(Succeed())
		Expect(claims.Items).To(BeEmpty())
		for _, name := range []string{"bad-mode", "bad-timeout", "bad-lock", "bad-priority"} {
			Expect(jobState(ns, name)(Default)).To(Equal("suspended/"))
		}
	})

	It("gives a Job created running its token once it holds, and warns that it did not wait", func() {
		newLock(ns, "db")
		newClaim(ns, "holder", "db", "")
		Eventually(phaseOf(ns, "holder")).Should(Equal(held))
		newLockJob(ns, "eager", "db", false)
		Eventually(jobEvents(ns, "eager")).Should(ContainElement(MatchRegexp(
			`^NotSuspended: Created LockClaim eager-db-\w+ for lock db; the Job was created running, so it does not wait for the lock ` +
				`\(create it with spec\.suspend: true, or let the admission policy do it\)$`)))
		Expect(k8sClient.Delete(ctx(), &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"}})).To(Succeed())
		Eventually(jobState(ns, "eager")).Should(MatchRegexp(`^running/\d+/$`), "the token on the Job only: a running Job's template cannot change")
	})
})
