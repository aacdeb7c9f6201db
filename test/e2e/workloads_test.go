//go:build e2e

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

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/workloadcrds"
)

// startManagerWith runs the manager binary as startManager does, with further flags.
func startManagerWith(flags ...string) {
	GinkgoHelper()
	ns := newNamespace()
	cmd := exec.Command(filepath.Join(binDir, "manager"), append([]string{"--kubeconfig", kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", freeAddr(),
		"--leader-elect", "--leader-election-namespace", ns, "--secret-namespace", ns}, flags...)...)
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// jobsOf lists the Jobs of a namespace.
func jobsOf(g Gomega, ns string) []batchv1.Job {
	list := &batchv1.JobList{}
	g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// jobCondition says whether a Job's condition of type t is True.
func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	return slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == t && c.Status == corev1.ConditionTrue
	})
}

// workloadClaim reads the claim the controller made for an object (a Job, a run).
func workloadClaim(g Gomega, ns, name string, uid string, lock string) *locksv1alpha1.LockClaim {
	claim := &locksv1alpha1.LockClaim{}
	g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns,
		Name: locksv1alpha1.WorkloadClaimName(name, k8stypes.UID(uid), lock)}, claim)).To(Succeed())
	return claim
}

// applyWorkloadSample creates the objects of a sample of config/samples/workloads in ns, as
// kubectl create does (objects that exist already stay), and returns the runs among them (the
// objects with the lock annotation).
func applyWorkloadSample(ns, file string) []*unstructured.Unstructured {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", "workloads", file))
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

var _ = Describe("Runs that ask for a lock: Jobs and CronJobs under the real Job and CronJob controllers", Ordered, func() {
	admission := filepath.Join(repoRoot, "config", "admission")

	BeforeAll(func() {
		By("installing the Tekton and Argo Workflows CRDs from their Go modules (no controller of theirs runs: the specs play it)")
		crds, err := workloadcrds.Load()
		Expect(err).NotTo(HaveOccurred())
		for _, crd := range crds {
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx(), crd))).To(Succeed())
			// kubectl wait fails, rather than waits, on a CRD whose status has no conditions yet.
			Eventually(func() error {
				_, err := tryKubectl("wait", "--for=condition=Established", "--timeout=10s", "crd/"+crd.Name)
				return err
			}).WithTimeout(time.Minute).Should(Succeed())
		}
		startManagerWith("--workload-kinds=batch/v1/Job,tekton.dev/v1/PipelineRun,tekton.dev/v1/TaskRun,argoproj.io/v1alpha1/Workflow")

		By("installing config/admission, as make deploy does: it suspends Jobs created with the lock annotation")
		kubectl("apply", "--server-side", "-k", admission)
		DeferCleanup(func() { _, _ = tryKubectl("delete", "--ignore-not-found", "-k", admission) })
		ns := newNamespace()
		Eventually(func() (string, error) {
			return kubectlStdin(`
apiVersion: batch/v1
kind: Job
metadata: {name: probe, annotations: {locks.lockwarden.io/lock: probe}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox:1.37}]
`, "create", "--dry-run=server", "-o", "jsonpath={.spec.suspend}", "-n", ns, "-f", "-")
		}).WithTimeout(time.Minute).Should(Equal("true"), "the API server has loaded the Job policy")
	})

	It("runs the sample's two CronJobs one Job at a time, each resumed with its own token", func() {
		ns := newNamespace()
		Expect(applyWorkloadSample(ns, "cronjobs-one-database.yaml")).To(BeEmpty())
		By("scheduling both CronJobs every minute, so that their Jobs are created in the same instant")
		for _, cj := range []string{"nightly-report", "nightly-vacuum"} {
			kubectl("patch", "cronjob", cj, "-n", ns, "--type=merge", "-p", `{"spec":{"schedule":"* * * * *"}}`)
		}
		var jobs []batchv1.Job
		Eventually(func(g Gomega) {
			jobs = jobsOf(g, ns)
			g.Expect(jobs).To(HaveLen(2))
			for i := range jobs {
				g.Expect(jobCondition(&jobs[i], batchv1.JobComplete)).To(BeTrue(), "job %s complete", jobs[i].Name)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		// Stop both CronJobs before the next minute makes more Jobs.
		for _, cj := range []string{"nightly-report", "nightly-vacuum"} {
			kubectl("patch", "cronjob", cj, "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":true}}`)
		}

		claims := make([]*locksv1alpha1.LockClaim, 2)
		for i := range jobs {
			claims[i] = workloadClaim(Default, ns, jobs[i].Name, string(jobs[i].UID), "reporting-db")
			Expect(claims[i].Status.Phase).To(Equal(locksv1alpha1.ClaimReleased), "a completed Job hands the lock on")
			token := strconv.FormatInt(claims[i].Status.FencingToken, 10)
			Expect(jobs[i].Annotations).To(HaveKeyWithValue(locksv1alpha1.PodFencingTokenAnnotation, token))
			pods := podsOf(Default, ns, client.MatchingLabels{"job-name": jobs[i].Name})
			Expect(pods).NotTo(BeEmpty())
			for _, p := range pods {
				Expect(p.Annotations).To(HaveKeyWithValue(locksv1alpha1.PodFencingTokenAnnotation, token),
					"job %s's pod reads its Job's token from its own annotations", jobs[i].Name)
			}
		}
		first, second := claims[0], claims[1]
		if second.Status.AcquireTime.Before(first.Status.AcquireTime) {
			first, second = second, first
		}
		Expect(second.Status.FencingToken).To(BeNumerically(">", first.Status.FencingToken))
		Expect(second.Status.AcquireTime.Time).NotTo(BeTemporally("<", first.Status.ReleaseTime.Time),
			"the two CronJobs' Jobs held the lock one after the other")
		Expect(second.Status.AcquireTime.Sub(first.Status.ReleaseTime.Time)).To(BeNumerically("<", 30*time.Second),
			"a Job that completed hands the lock on without the sample's lockDelaySeconds (30)")
	})

	It("hands the lock on after lockDelaySeconds when a Job fails, and when one is deleted", func() {
		ns := newNamespace()
		_, err := kubectlStdin(`
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
metadata: {name: db}
spec: {lockDelaySeconds: 6}
`, "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		// A Job whose pod no node can take fails at its activeDeadlineSeconds, counted from its
		// resume; the one after it completes as soon as kwok runs its pod.
		job := func(name, extra string) string {
			return `
apiVersion: batch/v1
kind: Job
metadata: {name: ` + name + `, annotations: {locks.lockwarden.io/lock: db}}
spec:
  backoffLimit: 0
` + extra + `
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox:1.37}]
`
		}
		_, err = kubectlStdin(job("doomed", "  activeDeadlineSeconds: 3")+"      nodeSelector: {e2e.lockwarden.io/no-such-node: \"true\"}\n",
			"create", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) bool {
			j := &batchv1.Job{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "doomed"}, j)).To(Succeed())
			return j.Spec.Suspend != nil && !*j.Spec.Suspend
		}).Should(BeTrue(), "the first Job is resumed")
		_, err = kubectlStdin(job("next", ""), "create", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())

		kubectl("wait", "-n", ns, "--for=condition=Failed", "--timeout=60s", "job/doomed")
		kubectl("wait", "-n", ns, "--for=condition=Complete", "--timeout=60s", "job/next")
		doomed, next := &batchv1.Job{}, &batchv1.Job{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "doomed"}, doomed)).To(Succeed())
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "next"}, next)).To(Succeed())
		failed := workloadClaim(Default, ns, "doomed", string(doomed.UID), "db")
		granted := workloadClaim(Default, ns, "next", string(next.UID), "db")
		cond := meta.FindStatusCondition(failed.Status.Conditions, locksv1alpha1.ConditionAcquired)
		Expect(cond.Message).To(HavePrefix("Released: Job doomed failed: its condition Failed is True"))
		Expect(granted.Status.AcquireTime.Sub(failed.Status.ReleaseTime.Time)).To(BeNumerically(">=", 5*time.Second),
			"a failed Job's lock waits out lockDelaySeconds (6 s; times are whole microseconds from one clock)")

		By("deleting a Job that holds the lock: its hold ends with it")
		_, err = kubectlStdin(job("stuck", "")+"      nodeSelector: {e2e.lockwarden.io/no-such-node: \"true\"}\n", "create", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) bool {
			j := &batchv1.Job{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "stuck"}, j)).To(Succeed())
			return j.Spec.Suspend != nil && !*j.Spec.Suspend
		}).Should(BeTrue(), "the Job is resumed")
		_, err = kubectlStdin(job("after", ""), "create", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		Consistently(func(g Gomega) bool {
			j := &batchv1.Job{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "after"}, j)).To(Succeed())
			return ptr.Deref(j.Spec.Suspend, false)
		}).WithTimeout(2*time.Second).Should(BeTrue(), "the next Job waits while the stuck one holds")
		kubectl("delete", "job", "stuck", "-n", ns, "--wait=false")
		kubectl("wait", "-n", ns, "--for=condition=Complete", "--timeout=60s", "job/after")
	})

	It("applies the Tekton and Argo samples: each run starts with its token once it holds, the next when it succeeds", func() {
		ns := newNamespace()
		for _, sample := range []struct {
			file   string
			gvk    schema.GroupVersionKind
			finish func(u *unstructured.Unstructured)
		}{
			{"tekton-deploy-pipelinerun.yaml", schema.GroupVersionKind{Group: "tekton.dev", Version: "v1", Kind: "PipelineRun"}, func(u *unstructured.Unstructured) {
				cond := map[string]any{"type": "Succeeded", "status": "True", "reason": "Succeeded", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
				Expect(unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions")).To(Succeed())
				Expect(k8sClient.Status().Update(ctx(), u)).To(Succeed())
			}},
			{"argo-workflow.yaml", schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"}, func(u *unstructured.Unstructured) {
				Expect(unstructured.SetNestedField(u.Object, "Succeeded", "status", "phase")).To(Succeed())
				Expect(k8sClient.Update(ctx(), u)).To(Succeed())
			}},
		} {
			By(sample.file)
			runs := append(applyWorkloadSample(ns, sample.file), applyWorkloadSample(ns, sample.file)...)
			Expect(runs).To(HaveLen(2))
			startedRun := func(g Gomega, name string) (*unstructured.Unstructured, bool) {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(sample.gvk)
				g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
				pending, _, _ := unstructured.NestedString(u.Object, "spec", "status")
				suspend, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
				_, token := u.GetAnnotations()[locksv1alpha1.PodFencingTokenAnnotation]
				return u, token && pending == "" && !suspend
			}
			var first, second string
			Eventually(func(g Gomega) {
				_, a := startedRun(g, runs[0].GetName())
				_, b := startedRun(g, runs[1].GetName())
				g.Expect(a != b).To(BeTrue(), "one run started, the other waits")
				first, second = runs[0].GetName(), runs[1].GetName()
				if b {
					first, second = second, first
				}
			}).Should(Succeed())
			Consistently(func(g Gomega) bool { _, s := startedRun(g, second); return s }).WithTimeout(time.Second).Should(BeFalse())
			u, _ := startedRun(Default, first)
			sample.finish(u)
			Eventually(func(g Gomega) bool { _, s := startedRun(g, second); return s }).Should(BeTrue())
		}
	})
})
