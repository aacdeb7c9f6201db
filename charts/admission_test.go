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

package charts_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
)

// The chart's MutatingAdmissionPolicies (templates/admissionpolicy.yaml, their specs generated from
// config/admission): what they render to, and what a real kube-apiserver does with them.

const (
	policyKey  = "MutatingAdmissionPolicy/lw-lockwarden-pod-scheduling-gate"
	bindingKey = "MutatingAdmissionPolicyBinding/lw-lockwarden-pod-scheduling-gate"
	// jobPolicyKey and jobBindingKey are the policy that suspends annotated Jobs, and its binding.
	jobPolicyKey  = "MutatingAdmissionPolicy/lw-lockwarden-job-suspend"
	jobBindingKey = "MutatingAdmissionPolicyBinding/lw-lockwarden-job-suspend"
	// mapAPI is the capability the chart checks before it renders the policies.
	mapAPI = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"
)

// excludeGateOff is a namespace selector for admissionPolicy.namespaceSelector that leaves out the
// namespaces labelled e2e.lockwarden.io/gate=off.
var excludeGateOff = []string{
	"--set", "admissionPolicy.namespaceSelector.matchExpressions[0].key=e2e.lockwarden.io/gate",
	"--set", "admissionPolicy.namespaceSelector.matchExpressions[0].operator=NotIn",
	"--set", "admissionPolicy.namespaceSelector.matchExpressions[0].values[0]=off",
}

func TestAdmissionPolicyRenders(t *testing.T) {
	g := NewWithT(t)
	// helm template, asking no cluster, assumes API groups and versions but no kinds: the
	// capability is given as helm install finds it in a cluster's discovery.
	objs := render(t, "--api-versions", mapAPI)
	g.Expect(objs.keys()).To(ContainElements(policyKey, bindingKey, jobPolicyKey, jobBindingKey))
	g.Expect(objs.ofKind("MutatingAdmissionPolicy")).To(ConsistOf(policyKey, jobPolicyKey), "the pods' policy and the Jobs', nothing else")
	for _, want := range []struct {
		name, policy, binding string
		rule                  admissionregistrationv1.Rule // the one resource each policy matches, on Create only
		mutation              string                       // what its one mutation writes
		why                   string
	}{
		{"pods get the scheduling gate", policyKey, bindingKey,
			admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			"{name: '" + locksv1alpha1.PodSchedulingGate + "'}", "pods, when they are created, and nothing else"},
		{"Jobs are created suspended", jobPolicyKey, jobBindingKey,
			admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
			"Object.spec{suspend: true}", "Jobs, when they are created, and nothing else: a Job the controller resumed stays resumed"},
	} {
		t.Run(want.name, func(t *testing.T) {
			g := NewWithT(t)
			var policy admissionregistrationv1.MutatingAdmissionPolicy
			objs.get(t, want.policy, &policy)
			spec := policy.Spec
			g.Expect(spec.FailurePolicy).To(Equal(ptr.To(admissionregistrationv1.Fail)))
			g.Expect(spec.ReinvocationPolicy).To(Equal(admissionregistrationv1.IfNeededReinvocationPolicy))
			g.Expect(spec.ParamKind).To(BeNil(), "no parameters: the API server reads no object on the policy's behalf")
			g.Expect(spec.MatchConstraints.ResourceRules).To(ConsistOf(HaveField("RuleWithOperations", admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: want.rule,
			})), want.why)
			g.Expect(spec.MatchConditions).To(ContainElement(HaveField("Expression", ContainSubstring("'"+locksv1alpha1.PodLockAnnotation+"'"))))
			g.Expect(spec.Mutations).To(ConsistOf(And(
				HaveField("PatchType", admissionregistrationv1.PatchTypeApplyConfiguration),
				HaveField("ApplyConfiguration.Expression", ContainSubstring(want.mutation)))))
			g.Expect(policy.Labels).To(HaveKeyWithValue("app.kubernetes.io/instance", "lw"))

			var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
			objs.get(t, want.binding, &binding)
			g.Expect(binding.Spec.PolicyName).To(Equal(policy.Name))
			g.Expect(binding.Spec.ParamRef).To(BeNil())
			g.Expect(binding.Spec.MatchResources).To(BeNil(), "every namespace by default")
		})
	}
	t.Run("admissionPolicy.enabled=false leaves both policies and their bindings out", func(t *testing.T) {
		objs := render(t, "--api-versions", mapAPI, "--set", "admissionPolicy.enabled=false")
		NewWithT(t).Expect(objs.keys()).NotTo(ContainElement(ContainSubstring("MutatingAdmissionPolicy")))
	})
	t.Run("without the API (Kubernetes before 1.36) the chart renders everything else", func(t *testing.T) {
		g := NewWithT(t)
		for _, kube := range []string{"1.32.0", "1.35.3"} {
			objs := render(t, "--kube-version", kube)
			g.Expect(objs.keys()).NotTo(ContainElement(ContainSubstring("MutatingAdmissionPolicy")), kube)
			g.Expect(objs.keys()).To(ContainElements("Deployment/lw-lockwarden", "ClusterRole/lw-lockwarden-manager"), kube)
		}
	})
	t.Run("admissionPolicy.namespaceSelector limits both bindings", func(t *testing.T) {
		g := NewWithT(t)
		excluding := render(t, append([]string{"--api-versions", mapAPI}, excludeGateOff...)...)
		labelling := render(t, "--api-versions", mapAPI, "--set", "admissionPolicy.namespaceSelector.matchLabels.team=payments")
		for _, key := range []string{bindingKey, jobBindingKey} {
			var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
			excluding.get(t, key, &binding)
			g.Expect(binding.Spec.MatchResources.NamespaceSelector).To(Equal(&metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "e2e.lockwarden.io/gate", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"off"}}},
			}), key)
			var labelled admissionregistrationv1.MutatingAdmissionPolicyBinding // a fresh one: decoding keeps fields absent from the input
			labelling.get(t, key, &labelled)
			g.Expect(labelled.Spec.MatchResources.NamespaceSelector).To(Equal(&metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}), key)
		}
	})
	t.Run("the schema refuses a selector that is not a label selector", func(t *testing.T) {
		for set, want := range map[string]string{
			"admissionPolicy.namespaceSelector.matchName=apps":                       "additional properties 'matchName' not allowed",
			"admissionPolicy.namespaceSelector.matchExpressions[0].key=team":         "missing property 'operator'",
			"admissionPolicy.enabled=maybe":                                          "at '/admissionPolicy/enabled': got string, want boolean",
			"admissionPolicy.namespaceSelector.matchExpressions[0].operator=Missing": "at '/admissionPolicy/namespaceSelector/matchExpressions/0/operator'",
		} {
			out, err := run(t, "helm", "template", "lw", chart, "--set", set)
			if err == nil || !strings.Contains(out, want) {
				t.Errorf("helm template --set %s: want an error containing %q, got %v:\n%s", set, want, err, out)
			}
		}
	})
}

// TestAdmissionPolicyOnAPIServer renders the chart for a real kube-apiserver (helm asks it which
// APIs it serves), installs the policy and its binding there, and creates pods.
func TestAdmissionPolicyOnAPIServer(t *testing.T) {
	t.Run("Kubernetes 1.37: annotated pods are created gated, once, and labelled standby", func(t *testing.T) {
		g := NewWithT(t)
		objs := renderFor(t, apiServer(t), excludeGateOff...) // the package's API server, shared with the notes tests
		c := apiPlane.Client
		var policy admissionregistrationv1.MutatingAdmissionPolicy
		var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
		objs.get(t, policyKey, &policy)
		objs.get(t, bindingKey, &binding)
		for _, o := range []client.Object{&policy, &binding,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gate-apps"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gate-off", Labels: map[string]string{"e2e.lockwarden.io/gate": "off"}}},
		} {
			g.Expect(c.Create(context.Background(), o)).To(Succeed())
			t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
		}
		waitGating(t, c, "gate-apps")

		gate := corev1.PodSchedulingGate{Name: locksv1alpha1.PodSchedulingGate}
		other := corev1.PodSchedulingGate{Name: "example.com/quota"}
		standby := locksv1alpha1.PodRoleStandby
		for _, tc := range []struct {
			name      string
			pod       *corev1.Pod
			wantGates []corev1.PodSchedulingGate
			wantRole  string
		}{
			{"annotated", pod("gate-apps", "annotated", true), []corev1.PodSchedulingGate{gate}, standby},
			{"annotated and gated by hand: still one gate", withGates(pod("gate-apps", "gated", true), gate), []corev1.PodSchedulingGate{gate}, standby},
			{"annotated with a gate of its own, which stays", withGates(pod("gate-apps", "quota", true), other), []corev1.PodSchedulingGate{other, gate}, standby},
			{"annotated to wait Gated", withWait(pod("gate-apps", "wait-gated", true), locksv1alpha1.PodLockWaitGated), []corev1.PodSchedulingGate{gate}, standby},
			{"annotated to wait with a value that is no wait: gated", withWait(pod("gate-apps", "wait-typo", true), "standby"), []corev1.PodSchedulingGate{gate}, standby},
			{"a Standby pod runs at once, labelled standby", withWait(pod("gate-apps", "standby", true), locksv1alpha1.PodLockWaitStandby), nil, standby},
			{"a template's role label is overridden: a new pod holds nothing",
				withRole(withWait(pod("gate-apps", "claims-holder", true), locksv1alpha1.PodLockWaitStandby), locksv1alpha1.PodRoleHolder), nil, standby},
			{"without the annotation", pod("gate-apps", "plain", false), nil, ""},
			{"annotated and bound to a node: admitted as it is", withNode(pod("gate-apps", "bound", true)), nil, ""},
			{"annotated, in a namespace the selector leaves out", pod("gate-off", "annotated", true), nil, ""},
		} {
			created := tc.pod.DeepCopy()
			if err := c.Create(context.Background(), created); err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			got := &corev1.Pod{}
			g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(created), got)).To(Succeed())
			if tc.wantGates == nil {
				g.Expect(got.Spec.SchedulingGates).To(BeEmpty(), tc.name)
			} else {
				g.Expect(got.Spec.SchedulingGates).To(Equal(tc.wantGates), tc.name)
			}
			g.Expect(got.Labels[locksv1alpha1.PodRoleLabel]).To(Equal(tc.wantRole), tc.name)
		}
	})

	t.Run("Kubernetes 1.37: annotated Jobs are created suspended, and a resumed Job stays resumed", func(t *testing.T) {
		g := NewWithT(t)
		objs := renderFor(t, apiServer(t), excludeGateOff...)
		c := apiPlane.Client
		var policy admissionregistrationv1.MutatingAdmissionPolicy
		var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
		objs.get(t, jobPolicyKey, &policy)
		objs.get(t, jobBindingKey, &binding)
		for _, o := range []client.Object{&policy, &binding,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "suspend-apps"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "suspend-off", Labels: map[string]string{"e2e.lockwarden.io/gate": "off"}}},
		} {
			g.Expect(c.Create(context.Background(), o)).To(Succeed())
			t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
		}
		waitSuspending(t, c, "suspend-apps")

		for _, tc := range []struct {
			name        string
			job         *batchv1.Job
			wantSuspend bool
		}{
			{"annotated", job("suspend-apps", "annotated", true), true},
			{"annotated, created to run at once: suspended all the same", withSuspend(job("suspend-apps", "running", true), false), true},
			{"annotated and created suspended: unchanged", withSuspend(job("suspend-apps", "suspended", true), true), true},
			{"without the annotation", job("suspend-apps", "plain", false), false},
			{"without the annotation, created suspended: left so", withSuspend(job("suspend-apps", "plain-suspended", false), true), true},
			{"annotated, in a namespace the selector leaves out", job("suspend-off", "annotated", true), false},
		} {
			created := tc.job.DeepCopy()
			if err := c.Create(context.Background(), created); err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			got := &batchv1.Job{}
			g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(created), got)).To(Succeed())
			g.Expect(ptr.Deref(got.Spec.Suspend, false)).To(Equal(tc.wantSuspend), tc.name)
			g.Expect(got.Annotations).To(Equal(tc.job.Annotations), "%s: the annotations as created", tc.name)
		}

		// The controller resumes a Job by patching spec.suspend to false (with its token on the
		// Job and the pod template): the policy looks at creations only, so it does not suspend
		// the Job again, though it still carries the annotation.
		resumed := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "suspend-apps", Name: "annotated"}}
		patch := []byte(`{"metadata":{"annotations":{"` + locksv1alpha1.PodFencingTokenAnnotation + `":"7"}},` +
			`"spec":{"suspend":false,"template":{"metadata":{"annotations":{"` + locksv1alpha1.PodFencingTokenAnnotation + `":"7"}}}}}`)
		g.Expect(c.Patch(context.Background(), resumed, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(resumed), resumed)).To(Succeed())
		g.Expect(resumed.Spec.Suspend).To(Equal(ptr.To(false)), "resumed by an update")
		g.Expect(resumed.Annotations).To(HaveKey(locksv1alpha1.PodLockAnnotation))
		g.Expect(resumed.Spec.Template.Annotations).To(HaveKeyWithValue(locksv1alpha1.PodFencingTokenAnnotation, "7"))

		// A Job created without the annotation and given it afterwards is not suspended: it may
		// be running already.
		plain := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "suspend-apps", Name: "plain"}}
		patch = []byte(`{"metadata":{"annotations":{"` + locksv1alpha1.PodLockAnnotation + `":"db"}}}`)
		g.Expect(c.Patch(context.Background(), plain, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		g.Expect(plain.Annotations).To(HaveKey(locksv1alpha1.PodLockAnnotation))
		g.Expect(plain.Spec.Suspend).To(Equal(ptr.To(false)), "annotated by an update")
	})

	t.Run("Kubernetes 1.35: the chart installs without the policy", func(t *testing.T) {
		g := NewWithT(t)
		// MutatingAdmissionPolicy is beta in 1.35, and off by default.
		_, kubeconfig := emulatedAPIServer(t, "1.35", nil)
		out, err := run(t, "kubectl", "--kubeconfig", kubeconfig, "api-resources", "--api-group=admissionregistration.k8s.io", "-o", "name")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("validatingadmissionpolicies"))
		g.Expect(out).NotTo(ContainSubstring("mutatingadmissionpolicies"))

		objs := renderFor(t, kubeconfig)
		g.Expect(objs.keys()).NotTo(ContainElement(ContainSubstring("MutatingAdmissionPolicy")))
		g.Expect(objs.keys()).To(ContainElements("Deployment/lw-lockwarden", "ClusterRole/lw-lockwarden-manager"))
	})
}

// renderFor renders the chart for the cluster of kubeconfig, as helm install does: with the APIs
// that cluster serves, each manifest validated against its schemas. The cluster has lockwarden's
// CRDs already, which the release would own: --take-ownership lets the render go on.
func renderFor(t *testing.T, kubeconfig string, args ...string) objects {
	t.Helper()
	out, err := run(t, "helm", append([]string{"template", "lw", chart, "--namespace", "locks", "--validate",
		"--take-ownership", "--kubeconfig", kubeconfig}, args...)...)
	if err != nil {
		t.Fatalf("helm template --validate %v: %v\n%s", args, err, out)
	}
	return parse(t, out)
}

// emulatedAPIServer starts a kube-apiserver that emulates an earlier Kubernetes release
// (--emulated-version: the APIs and feature gate defaults of that release), with further flags and
// lockwarden's CRDs, stopped when the test ends; it returns an admin client and kubeconfig.
func emulatedAPIServer(t *testing.T, release string, flags map[string]string) (client.Client, string) {
	t.Helper()
	apiServer(t) // sets KUBEBUILDER_ASSETS
	all := map[string]string{"emulated-version": release}
	maps.Copy(all, flags)
	cp, err := lockenv.StartControlPlaneWith("..", lockenv.ControlPlaneOptions{APIServerFlags: all})
	if err != nil {
		t.Fatalf("starting a kube-apiserver emulating %s: %v", release, err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the kube-apiserver: %v", err)
		}
	})
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return cp.Client, path
}

// waitGating waits until the API server behind c has loaded the gating policy and its binding
// (it loads them through a watch of its own): a pod asking for a lock comes back gated from a
// dry run in namespace ns.
func waitGating(t *testing.T, c client.Client, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func() []corev1.PodSchedulingGate {
		p := pod(ns, "probe", true)
		if err := c.Create(context.Background(), p, client.DryRunAll); err != nil {
			return nil
		}
		return p.Spec.SchedulingGates
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).ShouldNot(BeEmpty())
}

// waitSuspending waits until the API server behind c has loaded the Job policy and its binding: a
// Job asking for a lock comes back suspended from a dry run in namespace ns.
func waitSuspending(t *testing.T, c client.Client, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		j := job(ns, "probe", true)
		if err := c.Create(context.Background(), j, client.DryRunAll); err != nil {
			return false
		}
		return ptr.Deref(j.Spec.Suspend, false)
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(BeTrue())
}

// job is a Job with one container, annotated to ask for the lock "db" if annotated, with
// spec.suspend unset.
func job(namespace, name string, annotated bool) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "report", Image: "busybox:1.37"}},
		}}},
	}
	if annotated {
		j.Annotations = map[string]string{locksv1alpha1.PodLockAnnotation: "db"}
	}
	return j
}

func withSuspend(j *batchv1.Job, suspend bool) *batchv1.Job {
	j.Spec.Suspend = ptr.To(suspend)
	return j
}

// pod is a pod with one container, annotated to ask for the lock "db" if annotated.
func pod(namespace, name string, annotated bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.37"}}},
	}
	if annotated {
		p.Annotations = map[string]string{locksv1alpha1.PodLockAnnotation: "db"}
	}
	return p
}

func withGates(p *corev1.Pod, gates ...corev1.PodSchedulingGate) *corev1.Pod {
	p.Spec.SchedulingGates = gates
	return p
}

// withWait sets the pod's lock-wait annotation.
func withWait(p *corev1.Pod, wait string) *corev1.Pod {
	p.Annotations[locksv1alpha1.PodLockWaitAnnotation] = wait
	return p
}

// withRole gives the pod a role label of its own, as a pod template might.
func withRole(p *corev1.Pod, role string) *corev1.Pod {
	p.Labels = map[string]string{locksv1alpha1.PodRoleLabel: role}
	return p
}

func withNode(p *corev1.Pod) *corev1.Pod {
	p.Spec.NodeName = "node-1"
	return p
}
