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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// The chart is installed as this release into a namespace of its own that enforces the Pod
// Security "restricted" profile. The release name contains the chart name, so objects are named
// "lockwarden" and "lockwarden-<suffix>".
const (
	chartRelease   = "lockwarden"
	chartNamespace = "lockwarden-chart-e2e"
	chartSA        = "lockwarden"
)

var _ = Describe("The Helm chart, installed for real", Ordered, func() {
	var (
		helm    *helmCLI
		manager *managerProcess
	)

	BeforeAll(func() {
		helm = newHelm()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartNamespace, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		}}}
		Expect(k8sClient.Create(ctx(), ns)).To(Succeed())
		DeferCleanup(func() {
			_, _ = helm.run("uninstall", chartRelease, "--namespace", chartNamespace, "--wait", "--timeout", "60s")
			_ = k8sClient.Delete(ctx(), ns)
		})
	})

	// The manager started by the second spec serves every later one; it stops, before the
	// namespace goes, once they are done.
	AfterAll(func() {
		if manager == nil {
			return
		}
		manager.stop()
		Expect(manager.output.String()).NotTo(ContainSubstring(`is forbidden: User "system:serviceaccount:`),
			"the manager ran into a permission the chart does not give it")
	})

	It("installs into a restricted namespace: every object is accepted and the Deployment is scheduled", func() {
		args := []string{"install", chartRelease, filepath.Join(repoRoot, "charts", "lockwarden"),
			"--namespace", chartNamespace, "--wait", "--timeout", "2m",
			// The suite installed the CRDs before this spec; the release adopts them.
			"--take-ownership", "--set", "crds.keep=true"}
		if img := os.Getenv("E2E_IMAGE"); img != "" { // kind: the image built and loaded by test-e2e.sh
			i := strings.LastIndex(img, ":")
			repo, tag := img[:i], img[i+1:]
			args = append(args, "--set", "image.repository="+repo, "--set", "image.tag="+tag, "--set", "image.pullPolicy=IfNotPresent")
		}
		helm.mustRun(args...)

		By("finding every object of the release in the cluster")
		manifest := helm.mustRun("get", "manifest", chartRelease, "--namespace", chartNamespace)
		names, err := kubectlStdin(manifest, "get", "-f", "-", "-o", "name")
		Expect(err).NotTo(HaveOccurred())
		for _, want := range []string{
			"customresourcedefinition.apiextensions.k8s.io/lockclaims.locks.lockwarden.io",
			"serviceaccount/" + chartSA,
			"clusterrole.rbac.authorization.k8s.io/lockwarden-manager",
			"clusterrolebinding.rbac.authorization.k8s.io/lockwarden-manager",
			"role.rbac.authorization.k8s.io/lockwarden-leader-election",
			"role.rbac.authorization.k8s.io/lockwarden-namespace",
			"clusterrole.rbac.authorization.k8s.io/lockwarden-lock-editor",
			"clusterrole.rbac.authorization.k8s.io/lockwarden-metrics-auth",
			"clusterrolebinding.rbac.authorization.k8s.io/lockwarden-metrics-auth",
			"clusterrole.rbac.authorization.k8s.io/lockwarden-metrics-reader",
			"deployment.apps/lockwarden",
			"service/lockwarden-metrics",
			"poddisruptionbudget.policy/lockwarden",
			// The cluster serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (1.36+).
			"mutatingadmissionpolicy.admissionregistration.k8s.io/lockwarden-pod-scheduling-gate",
			"mutatingadmissionpolicybinding.admissionregistration.k8s.io/lockwarden-pod-scheduling-gate",
		} {
			Expect(names).To(ContainSubstring(want + "\n"))
		}

		By("checking that the CRDs now belong to the release and are kept on uninstall")
		crd := crdMeta("lockclaims.locks.lockwarden.io")
		Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		Expect(crd.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
		Expect(crd.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", chartRelease))

		By("checking that the restricted profile admitted the controller pods, two replicas on two nodes")
		deploy := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: chartNamespace, Name: "lockwarden"}, deploy)).To(Succeed())
		Expect(deploy.Status.AvailableReplicas).To(BeEquivalentTo(2))
		pods := podsOf(Default, chartNamespace, client.MatchingLabels{"app.kubernetes.io/instance": chartRelease})
		Expect(pods).To(HaveLen(2))
		Expect(pods[0].Spec.NodeName).NotTo(Equal(pods[1].Spec.NodeName), "the replicas spread over nodes")
		for _, p := range pods {
			Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			Expect(p.Spec.ServiceAccountName).To(Equal(chartSA))
		}
		// The label is enforced: a pod that breaks the profile is refused, so the admission above
		// was a real check.
		_, err = kubectlStdin(`
apiVersion: v1
kind: Pod
metadata: {name: privileged}
spec:
  containers: [{name: c, image: busybox:1.37, securityContext: {privileged: true}}]
`, "apply", "-n", chartNamespace, "-f", "-")
		Expect(err).To(MatchError(ContainSubstring(`violates PodSecurity "restricted:latest"`)))

		if os.Getenv("KIND_CLUSTER") != "" {
			// On kind the replicas really run the image; they have proven that. The specs below run
			// the manager as a local process with the same identity, so stop them: the process's
			// metrics and logs are then those of the only manager.
			kubectl("scale", "-n", chartNamespace, "deployment/lockwarden", "--replicas=0")
			kubectl("wait", "-n", chartNamespace, "--for=delete", "pod", "-l", "app.kubernetes.io/instance="+chartRelease, "--timeout=60s")
		}
	})

	It("runs the manager as the chart's ServiceAccount: it leads, serves metrics and grants the samples' claim", func() {
		// The chart's pods are fakes on the local cluster (kwok runs no process), so this process is
		// the only manager. Every request it makes is authorized as the chart's ServiceAccount, so
		// a permission the chart lacks shows up as a failure here.
		manager = startManagerAs(impersonatingKubeconfig(chartNamespace, chartSA), chartNamespace)

		lease := &coordinationv1.Lease{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: chartNamespace, Name: "lockwarden.locks.lockwarden.io"}, lease)).To(Succeed())
			g.Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).NotTo(BeEmpty())
		}).WithTimeout(30 * time.Second).Should(Succeed())

		By("applying the samples")
		apps := newNamespace()
		samples := filepath.Join(repoRoot, "config", "samples")
		kubectl("apply", "-n", apps, "-f", samples)
		DeferCleanup(func() { _, _ = tryKubectl("delete", "-n", apps, "--ignore-not-found", "--wait=false", "-f", samples) })
		kubectl("wait", "-n", apps, "--for=condition=Acquired", "--timeout=60s", "lclaim/migration-by-hand")
		Expect(kubectl("get", "-n", apps, "dlock/nightly-migration", "-o", "jsonpath={.status.holders[0].claim}")).To(Equal("migration-by-hand"))
		// The Redis sample points at a server that does not exist here: the controller says so in
		// status, which takes the LockBackend status permission.
		Eventually(func(g Gomega) {
			lb := &locksv1alpha1.LockBackend{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Name: "redis-main"}, lb)).To(Succeed())
			g.Expect(lb.Status.Conditions).To(ContainElement(And(
				HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionFalse), HaveField("ObservedGeneration", lb.Generation))))
		}).WithTimeout(60 * time.Second).Should(Succeed())

		By("scraping the metrics endpoint over HTTPS with the token of a ServiceAccount bound to the chart's metrics-reader")
		const scraper = "e2e-metrics-scraper"
		kubectl("create", "serviceaccount", "-n", chartNamespace, scraper)
		kubectl("create", "clusterrolebinding", scraper, "--clusterrole=lockwarden-metrics-reader",
			"--serviceaccount="+chartNamespace+":"+scraper)
		DeferCleanup(func() { _, _ = tryKubectl("delete", "clusterrolebinding", scraper, "--ignore-not-found") })
		token := strings.TrimSpace(kubectl("create", "token", "-n", chartNamespace, scraper))
		metricsURL := "https://" + manager.metricsAddr + "/metrics"
		Eventually(httpGetWithToken).WithArguments(metricsURL, token).Should(And(
			ContainSubstring(`leader_election_master_status{name="lockwarden.locks.lockwarden.io"} 1`),
			ContainSubstring("lockwarden_acquisitions_total"),
			MatchRegexp(`lockwarden_claims\{phase="Held"\} [1-9]`),
		))

		By("refusing a scrape without a token, and one whose ServiceAccount is not bound to metrics-reader")
		_, err := httpGetWithToken(metricsURL, "")
		Expect(err).To(MatchError(ContainSubstring("401 Unauthorized")))
		// The TLS server answers plain HTTP with 400 and closes the connection, which the client
		// may see as a reset before it reads the answer: either way, no metrics.
		_, err = httpGetWithToken("http://"+manager.metricsAddr+"/metrics", token)
		Expect(err).To(HaveOccurred(), "plain HTTP gets no metrics")
		kubectl("create", "serviceaccount", "-n", chartNamespace, "e2e-not-a-scraper")
		other := strings.TrimSpace(kubectl("create", "token", "-n", chartNamespace, "e2e-not-a-scraper"))
		_, err = httpGetWithToken(metricsURL, other)
		Expect(err).To(MatchError(ContainSubstring("403 Forbidden")))
	})

	It("prints install notes whose commands work when pasted into a shell", func() {
		// The notes' shell snippets are their indented paragraphs (charts/notes_test.go checks
		// them without a cluster); here they run for real, against this cluster and manager.
		notes := helm.mustRun("get", "notes", chartRelease, "--namespace", chartNamespace)
		var script strings.Builder
		for _, p := range regexp.MustCompile(`\n[ \t]*\n`).Split(strings.Trim(notes, "\n"), -1) {
			if strings.HasPrefix(p, "  ") {
				script.WriteString(p + "\n")
			}
		}
		Expect(script.String()).To(ContainSubstring("apply -f -"), "the notes:\n%s", notes)
		DeferCleanup(func() {
			_, _ = tryKubectl("delete", "namespace", "lock-demo", "--ignore-not-found", "--wait=false")
			_, _ = tryKubectl("delete", "clusterrolebinding", "lockwarden-metrics-prometheus", "--ignore-not-found")
		})
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script.String())
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "the notes' commands:\n%s\nprinted:\n%s", script.String(), out)
		Expect(string(out)).To(ContainSubstring("lockclaim.locks.lockwarden.io/by-hand condition met"))
		claim := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: "lock-demo", Name: "by-hand"}, claim)).To(Succeed())
		Expect(claim.Status.Phase).To(Equal(locksv1alpha1.ClaimHeld))
		Expect(kubectl("get", "clusterrolebinding", "lockwarden-metrics-prometheus", "-o", "jsonpath={.roleRef.name}")).
			To(Equal("lockwarden-metrics-reader"))
	})

	It("hands a Deployment's lock from pod to pod on contention, pod deletion and rollout", func() {
		ns := newNamespace()
		createGatedDeployment(ns, "writer", 3)
		selector := client.MatchingLabels{"app": "writer"}

		By("one holder while the other two wait in the queue")
		first := lockHolder(ns, selector)
		Eventually(func(g Gomega) {
			dlock := &locksv1alpha1.DistributedLock{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "writer"}, dlock)).To(Succeed())
			g.Expect(dlock.Status.Waiting).To(BeEquivalentTo(2))
			g.Expect(dlock.Status.Holders).To(HaveLen(1))
			g.Expect(dlock.Status.Holders[0].FencingToken).To(Equal(tokenOf(first)))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		By("deleting the holder: the next pod in line is scheduled with a higher token")
		kubectl("delete", "pod", "-n", ns, first.Name, "--wait=false")
		second := lockHolder(ns, selector, first.Name)
		Expect(tokenOf(second)).To(BeNumerically(">", tokenOf(first)))

		By("rolling the Deployment out: the old holder goes, a new pod takes the lock")
		oldHash := second.Labels["pod-template-hash"]
		kubectl("rollout", "restart", "-n", ns, "deployment/writer")
		var third corev1.Pod
		Eventually(func(g Gomega) {
			third = lockHolder(ns, selector, second.Name)
			g.Expect(third.Labels["pod-template-hash"]).NotTo(Equal(oldHash))
			for _, p := range podsOf(g, ns, selector) {
				g.Expect(p.Labels["pod-template-hash"]).NotTo(Equal(oldHash), "pod %s of the old ReplicaSet is gone", p.Name)
			}
		}).WithTimeout(90 * time.Second).Should(Succeed())
		Expect(tokenOf(third)).To(BeNumerically(">", tokenOf(second)))

		By("the chart's pod-edits policy: every write above passed it; the controller's account may change nothing else on a pod")
		// Patches sent as they are, by a client that the API server takes for the chart's account
		// (which may patch pods but not get them, so kubectl, which reads the pod first, cannot).
		cfg, err := clientcmd.BuildConfigFromFlags("", impersonatingKubeconfig(chartNamespace, chartSA))
		Expect(err).NotTo(HaveOccurred())
		asController, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		patchAsController := func(patch string) error {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: third.Name}}
			return asController.Patch(ctx(), p, client.RawPatch(types.MergePatchType, []byte(patch)))
		}
		Expect(patchAsController(`{"metadata":{"labels":{"app":"elsewhere"}}}`)).
			To(MatchError(ContainSubstring("may change no label of a pod but locks.lockwarden.io/role")))
		Expect(patchAsController(`{"metadata":{"annotations":{"example.com/note":"x"}}}`)).
			To(MatchError(ContainSubstring("may change no annotation of a pod but")))
		Expect(patchAsController(`{"metadata":{"labels":{"`+locksv1alpha1.PodRoleLabel+`":"holder"}}}`)).
			To(Succeed(), "the role label is the controller's to write")
	})

	It("runs a Job's pods one at a time to completion, each with its own token", func() {
		ns := newNamespace()
		_, err := kubectlStdin(`
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
metadata: {name: batch}
spec: {leaseDurationSeconds: 30}
---
apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  completions: 3
  parallelism: 3
  backoffLimit: 0
  template:
    metadata:
      annotations: {locks.lockwarden.io/lock: batch}
    spec:
      restartPolicy: Never
      schedulingGates: [{name: locks.lockwarden.io/lock}]
      containers: [{name: work, image: busybox:1.37, command: ["true"]}]
`, "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		selector := client.MatchingLabels{"job-name": "batch"}
		Eventually(func(g Gomega) {
			running := 0
			for _, p := range podsOf(g, ns, selector) {
				if !gated(&p) && p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			// Not g.Expect: seeing two at once fails the spec at once instead of being retried.
			Expect(running).To(BeNumerically("<=", 1), "two of the Job's pods ran at once")
			g.Expect(kubectl("get", "-n", ns, "job/batch", "-o", "jsonpath={.status.succeeded}")).To(Equal("3"))
		}).WithTimeout(120 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		tokens := map[int64]bool{}
		for _, p := range podsOf(Default, ns, selector) {
			Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
			tokens[tokenOf(p)] = true
			claim := &locksv1alpha1.LockClaim{}
			Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: lockclient.ClaimName(p.Name, p.UID, "batch")}, claim)).To(Succeed())
			Expect(claim.Status.Phase).To(Equal(locksv1alpha1.ClaimReleased))
		}
		Expect(tokens).To(HaveLen(3), "every pod got a token of its own")
		// The last release and the lock's empty holder are writes to two objects.
		Eventually(tryKubectl).WithArguments("get", "-n", ns, "dlock/batch", "-o", "jsonpath={.status.holders}").
			WithTimeout(30 * time.Second).Should(BeEmpty())
	})

	It("keeps a lock while its holder on a failed node is terminating, and moves it once the pod is gone", func() {
		ns := newNamespace()
		createGatedDeployment(ns, "nodefail", 2)
		selector := client.MatchingLabels{"app": "nodefail"}
		holder := lockHolder(ns, selector)
		node := holder.Spec.NodeName
		claimName := lockclient.ClaimName(holder.Name, holder.UID, "nodefail")

		// A failed node's kubelet never confirms that its pods stopped, so their deletion never
		// completes. kwok stands in for that kubelet and would confirm at once; this finalizer
		// holds the pod in Terminating as a dead kubelet would.
		const finalizer = "e2e.lockwarden.io/node-down"
		kubectl("patch", "pod", "-n", ns, holder.Name, "--type=json",
			"-p", `[{"op":"add","path":"/metadata/finalizers","value":["`+finalizer+`"]}]`)
		DeferCleanup(func() {
			_, _ = tryKubectl("patch", "pod", "-n", ns, holder.Name, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		})

		By("failing node " + node + ": cordon it and evict its pods, as the node lifecycle controller does")
		// On a real cluster kube-controller-manager taints a node that stopped reporting
		// node.kubernetes.io/unreachable:NoExecute, and its taint manager evicts each pod after
		// its tolerationSeconds (docs/install.md). On kwok the node keeps reporting Ready, and the
		// lifecycle controller removes that taint again on its next pass, so whether the eviction
		// wins that race is down to timing; the test evicts through the Eviction API instead,
		// which is the taint manager's last step.
		kubectl("cordon", node)
		DeferCleanup(func() { _, _ = tryKubectl("uncordon", node) })
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: holder.Name}}
		Expect(k8sClient.SubResource("eviction").Create(ctx(), &holder, eviction)).To(Succeed())
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(&holder), p)).To(Succeed())
			g.Expect(p.DeletionTimestamp).NotTo(BeNil())
		}).Should(Succeed())

		By("the terminating holder keeps the lock: its containers may still be running on the lost node")
		Consistently(func(g Gomega) {
			claim := &locksv1alpha1.LockClaim{}
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: claimName}, claim)).To(Succeed())
			g.Expect(claim.Status.Phase).To(Equal(locksv1alpha1.ClaimHeld))
			for _, p := range podsOf(g, ns, selector) {
				if p.Name != holder.Name {
					g.Expect(gated(&p)).To(BeTrue(), "pod %s was let in while the holder may still run", p.Name)
				}
			}
		}).WithTimeout(5 * time.Second).Should(Succeed())

		By("the pod is gone (the node came back, or was deleted or marked out-of-service): the lock moves")
		kubectl("patch", "pod", "-n", ns, holder.Name, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		gone := time.Now()
		next := lockHolder(ns, selector, holder.Name)
		GinkgoWriter.Printf("lock handed to %s %s after the holder was gone\n", next.Name, time.Since(gone).Round(100*time.Millisecond))
		Expect(next.Spec.NodeName).NotTo(Equal(node), "the cordoned node gets no new pod")
		Expect(tokenOf(next)).To(BeNumerically(">", tokenOf(holder)))
	})

	It("adds LockBackends from values on upgrade", func() {
		helm.mustRun("upgrade", chartRelease, filepath.Join(repoRoot, "charts", "lockwarden"),
			"--namespace", chartNamespace, "--reuse-values", "--wait", "--timeout", "2m",
			"--set", "lockBackends[0].name=e2e-chart-redis",
			"--set", "lockBackends[0].spec.type=Redis",
			"--set", "lockBackends[0].spec.redis.address=127.0.0.1:1")
		lb := &locksv1alpha1.LockBackend{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Name: "e2e-chart-redis"}, lb)).To(Succeed())
		Expect(lb.Labels).To(HaveKeyWithValue("app.kubernetes.io/instance", chartRelease))
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(lb), lb)).To(Succeed())
			g.Expect(lb.Status.Conditions).To(ContainElement(HaveField("Type", "Ready")))
		}).WithTimeout(60 * time.Second).Should(Succeed())
	})

	It("uninstalls everything but the CRDs, which crds.keep leaves", func() {
		helm.mustRun("uninstall", chartRelease, "--namespace", chartNamespace, "--wait", "--timeout", "2m")
		for _, key := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: chartNamespace, Name: "lockwarden"}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: chartNamespace, Name: chartSA}},
			&locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: "e2e-chart-redis"}},
			&admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "lockwarden-pod-scheduling-gate"}},
			&admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "lockwarden-pod-scheduling-gate"}},
		} {
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx(), client.ObjectKeyFromObject(key), key))
			}).WithTimeout(60*time.Second).Should(BeTrue(), "%T %s is left", key, key.GetName())
		}
		for _, name := range []string{"lockbackends", "distributedlocks", "lockclaims"} {
			crd := crdMeta(name + ".locks.lockwarden.io")
			Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(crd), crd)).To(Succeed())
			Expect(crd.DeletionTimestamp).To(BeNil())
		}
	})
})

// createGatedDeployment creates a DistributedLock and a Deployment of that name whose pods ask
// for it by annotation and scheduling gate. The pods tolerate an unreachable or not-ready node for
// 2 s only, and the Deployment is replaced with the Recreate strategy: a rolling update would wait
// for new pods to become ready, which they cannot while an old pod holds the lock.
func createGatedDeployment(ns, name string, replicas int) {
	GinkgoHelper()
	_, err := kubectlStdin(fmt.Sprintf(`
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
metadata: {name: %[1]s}
spec: {leaseDurationSeconds: 30}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: %[2]d
  strategy: {type: Recreate}
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata:
      labels: {app: %[1]s}
      annotations: {locks.lockwarden.io/lock: %[1]s}
    spec:
      schedulingGates: [{name: locks.lockwarden.io/lock}]
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
      containers: [{name: app, image: busybox:1.37, command: [sleep, "3600"]}]
`, name, replicas), "apply", "-n", ns, "-f", "-")
	Expect(err).NotTo(HaveOccurred())
}

// lockHolder waits until exactly one live pod matching the selector is ungated, scheduled and
// running, none of the others is, and the holder is none of the pods named in not; it returns
// the holder.
func lockHolder(ns string, selector client.MatchingLabels, not ...string) corev1.Pod {
	GinkgoHelper()
	var holder corev1.Pod
	Eventually(func(g Gomega) {
		var ungated []corev1.Pod
		for _, p := range podsOf(g, ns, selector) {
			if p.DeletionTimestamp != nil {
				continue
			}
			if gated(&p) {
				g.Expect(p.Spec.NodeName).To(BeEmpty(), "gated pod %s is not scheduled", p.Name)
				continue
			}
			ungated = append(ungated, p)
		}
		g.Expect(ungated).To(HaveLen(1), "exactly one pod holds the lock")
		g.Expect(not).NotTo(ContainElement(ungated[0].Name))
		g.Expect(ungated[0].Spec.NodeName).NotTo(BeEmpty())
		g.Expect(ungated[0].Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(ungated[0].Annotations).To(HaveKey(locksv1alpha1.PodFencingTokenAnnotation))
		holder = ungated[0]
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return holder
}

// crdMeta is the metadata of a CRD, readable without registering the apiextensions types.
func crdMeta(name string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
	m.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	return m
}

// tokenOf is the fencing token the controller wrote onto a pod.
func tokenOf(p corev1.Pod) int64 {
	GinkgoHelper()
	token, err := strconv.ParseInt(p.Annotations[locksv1alpha1.PodFencingTokenAnnotation], 10, 64)
	Expect(err).NotTo(HaveOccurred(), "pod %s carries its token", p.Name)
	return token
}
