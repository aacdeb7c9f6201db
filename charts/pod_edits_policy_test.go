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
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The chart's ValidatingAdmissionPolicy on the controller's own pod updates (config/admission/
// controller_pod_edits_policy.yaml): the controller's ServiceAccount may change a pod's role label,
// token, holder and deletion-cost annotations and remove the lockwarden gate, and nothing else.

const (
	podEditsPolicyKey  = "ValidatingAdmissionPolicy/lw-lockwarden-controller-pod-edits"
	podEditsBindingKey = "ValidatingAdmissionPolicyBinding/lw-lockwarden-controller-pod-edits"
)

func TestPodEditsPolicyRenders(t *testing.T) {
	g := NewWithT(t)
	objs := render(t) // release lw in namespace locks
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	objs.get(t, podEditsPolicyKey, &policy)
	g.Expect(policy.Spec.MatchConditions).To(ConsistOf(HaveField("Expression",
		"'system:serviceaccount:locks:lw-lockwarden:' == request.userInfo.username + ':'")), "the release's own ServiceAccount")
	named := render(t, "--set", "serviceAccount.name=locker")
	named.get(t, podEditsPolicyKey, &policy)
	g.Expect(policy.Spec.MatchConditions[0].Expression).To(ContainSubstring("'system:serviceaccount:locks:locker:'"))
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	objs.get(t, podEditsBindingKey, &binding)
	g.Expect(binding.Spec.ValidationActions).To(Equal([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}))
	g.Expect(binding.Spec.MatchResources).To(BeNil(), "every namespace")

	off := render(t, "--set", "podEditsPolicy.enabled=false")
	g.Expect(off.keys()).NotTo(ContainElements(podEditsPolicyKey, podEditsBindingKey))
}

// TestPodEditsPolicyOnAPIServer installs the rendered policy on a real kube-apiserver and patches
// pods as the controller's ServiceAccount (by impersonation): the patches the controller makes
// pass, any other change is refused, and other users are not judged.
func TestPodEditsPolicyOnAPIServer(t *testing.T) {
	g := NewWithT(t)
	objs := renderFor(t, apiServer(t))
	admin := apiPlane.Client
	ctx := context.Background()
	const ns = "pod-edits"
	const controllerUser = "system:serviceaccount:locks:lw-lockwarden"

	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	objs.get(t, podEditsPolicyKey, &policy)
	objs.get(t, podEditsBindingKey, &binding)
	patcher := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-edits-patcher"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}}}}
	patcherBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-edits-patcher"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: patcher.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "locks", Name: "lw-lockwarden"}}}
	gate := corev1.PodSchedulingGate{Name: locksv1alpha1.PodSchedulingGate}
	quota := corev1.PodSchedulingGate{Name: "example.com/quota"}
	newPod := func(name string) *corev1.Pod {
		p := withGates(pod(ns, name, true), gate, quota)
		p.Labels = map[string]string{"app": "web"}
		return p
	}
	for _, o := range []client.Object{&policy, &binding, patcher, patcherBinding,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		newPod("probe"), newPod("holder"), newPod("label"), newPod("annotation"), newPod("other-gate"), newPod("image"), newPod("by-admin"),
		newPod("node-selector"), newPod("affinity"),
	} {
		g.Expect(admin.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = admin.Delete(ctx, o) })
	}
	cfg := rest.CopyConfig(apiPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:locks", "system:authenticated"}}
	asController, err := client.New(cfg, client.Options{Scheme: admin.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	patch := func(c client.Client, name, body string) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		return c.Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, []byte(body)))
	}
	const relabel = `{"metadata":{"labels":{"app":"payments"}}}`

	// The API server loads a new policy within a second or so. Each probe writes a new value:
	// once a probe got through, the same label again would change nothing, which the policy allows.
	probes := 0
	g.Eventually(func() error {
		probes++
		return patch(asController, "probe", fmt.Sprintf(`{"metadata":{"labels":{"app":"probe-%d"}}}`, probes))
	}).
		WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).
		Should(MatchError(ContainSubstring("may change no label of a pod but locks.lockwarden.io/role")), "the API server has loaded the policy")

	// What the controller writes (controller.holderPatch, rolePatch): the token, holder and
	// deletion-cost annotations and the role label, and the lockwarden gate deleted by name.
	holderPatch := `{"metadata":{"labels":{"` + locksv1alpha1.PodRoleLabel + `":"holder"},"annotations":{"` +
		locksv1alpha1.PodFencingTokenAnnotation + `":"7","` + locksv1alpha1.PodHolderAnnotation + `":"u1",` +
		`"controller.kubernetes.io/pod-deletion-cost":"2147483647"}},` +
		`"spec":{"schedulingGates":[{"$patch":"delete","name":"` + locksv1alpha1.PodSchedulingGate + `"}]}}`
	g.Expect(patch(asController, "holder", holderPatch)).To(Succeed())
	g.Expect(patch(asController, "holder", `{"metadata":{"labels":{"`+locksv1alpha1.PodRoleLabel+`":"standby"}}}`)).To(Succeed())
	// A standby that was holder loses the pod-deletion-cost it was given (rolePatch).
	g.Expect(patch(asController, "holder", `{"metadata":{"labels":{"`+locksv1alpha1.PodRoleLabel+`":"standby"},"annotations":{"controller.kubernetes.io/pod-deletion-cost":null}}}`)).To(Succeed())
	held := &corev1.Pod{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "holder"}, held)).To(Succeed())
	g.Expect(held.Spec.SchedulingGates).To(Equal([]corev1.PodSchedulingGate{quota}), "the other gate stays")
	g.Expect(held.Annotations).To(HaveKeyWithValue(locksv1alpha1.PodFencingTokenAnnotation, "7"))

	for _, tc := range []struct{ name, pod, body, want string }{
		{"a label of the app's", "label", relabel, "may change no label of a pod but locks.lockwarden.io/role"},
		{"an annotation of the app's", "annotation", `{"metadata":{"annotations":{"example.com/owner":"me"}}}`, "may change no annotation of a pod but"},
		{"another project's gate", "other-gate", `{"spec":{"schedulingGates":[{"$patch":"delete","name":"example.com/quota"}]}}`, "may only remove the scheduling gate locks.lockwarden.io/lock"},
		{"a container image", "image", `{"spec":{"containers":[{"name":"app","image":"evil:1"}]}}`, "may change no container"},
		{"a gated pod's nodeSelector", "node-selector", `{"spec":{"nodeSelector":{"example.com/pool":"theirs"}}}`, "may change no nodeSelector or affinity"},
		{"a gated pod's affinity", "affinity", `{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"example.com/pool","operator":"In","values":["theirs"]}]}]}}}}}`, "may change no nodeSelector or affinity"},
	} {
		err := patch(asController, tc.pod, tc.body)
		if err == nil {
			t.Errorf("%s: the controller's patch was admitted", tc.name)
			continue
		}
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", tc.name, err)
		g.Expect(err.Error()).To(ContainSubstring(tc.want), tc.name)
	}

	// Anyone else's updates are not this policy's to judge.
	g.Expect(patch(admin, "by-admin", relabel)).To(Succeed())
}
