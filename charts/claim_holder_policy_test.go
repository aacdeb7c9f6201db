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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The chart's ValidatingAdmissionPolicy on claims that name a pod (config/admission/
// claim_holder_policy.yaml): a claim may name a pod as its holder only when it is made from that
// pod or by someone who may evict it.

const (
	holderPolicyKey  = "ValidatingAdmissionPolicy/lw-lockwarden-claim-holder-pod"
	holderBindingKey = "ValidatingAdmissionPolicyBinding/lw-lockwarden-claim-holder-pod"
	// podNameExtra is the user extra under which the API server names the pod that a bound
	// service account token belongs to.
	podNameExtra = "authentication.kubernetes.io/pod-name"
)

func TestClaimHolderPolicyRenders(t *testing.T) {
	t.Run("on by default, on every supported Kubernetes, in every namespace", func(t *testing.T) {
		g := NewWithT(t)
		for _, kube := range []string{"1.32.0", "1.37.0"} {
			objs := render(t, append([]string{"--kube-version", kube}, excludeGateOff...)...)
			g.Expect(objs.ofKind("ValidatingAdmissionPolicy")).To(ConsistOf(holderPolicyKey, podEditsPolicyKey), kube)
			var policy admissionregistrationv1.ValidatingAdmissionPolicy
			objs.get(t, holderPolicyKey, &policy)
			g.Expect(policy.Spec.FailurePolicy).To(Equal(ptr.To(admissionregistrationv1.Fail)))
			g.Expect(policy.Spec.MatchConstraints.ResourceRules).To(ConsistOf(HaveField("RuleWithOperations.Operations",
				[]admissionregistrationv1.OperationType{admissionregistrationv1.Create})), "claims are judged when they are created: holder.podName is immutable")
			var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
			objs.get(t, holderBindingKey, &binding)
			g.Expect(binding.Spec.PolicyName).To(Equal(policy.Name))
			g.Expect(binding.Spec.ValidationActions).To(Equal([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}))
			g.Expect(binding.Spec.MatchResources).To(BeNil(), "admissionPolicy.namespaceSelector does not limit it")
		}
	})
	t.Run("claimHolderPolicy.enabled=false leaves it out", func(t *testing.T) {
		objs := render(t, "--set", "claimHolderPolicy.enabled=false")
		NewWithT(t).Expect(objs.keys()).NotTo(ContainElements(holderPolicyKey, holderBindingKey))
	})
}

// TestClaimHolderPolicyOnAPIServer installs the rendered policy on a real kube-apiserver and
// creates claims as users with and without the right to evict the pod they name, and from within
// that pod or another, as the API server sees a pod's bound token (by impersonation).
func TestClaimHolderPolicyOnAPIServer(t *testing.T) {
	g := NewWithT(t)
	objs := renderFor(t, apiServer(t))
	admin := apiPlane.Client
	ctx := context.Background()
	const ns = "claim-holders"

	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	objs.get(t, holderPolicyKey, &policy)
	objs.get(t, holderBindingKey, &binding)
	lockctlRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lockctl"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{locksv1alpha1.GroupVersion.Group}, Resources: []string{"lockclaims"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
	}}
	evictorRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evictor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{locksv1alpha1.GroupVersion.Group}, Resources: []string{"lockclaims"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	}}
	bind := func(role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role}}
	}
	web := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "web"}
	elsewhere := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "other-team", Name: "web"}
	for _, o := range []client.Object{&policy, &binding,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		lockctlRole, evictorRole,
		bind("lockctl", web, elsewhere),
		bind("evictor", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "editor"}),
	} {
		g.Expect(admin.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = admin.Delete(ctx, o) })
	}

	// as is a client that the API server takes for user, with the pod name of a bound token when
	// pod is set.
	as := func(user, pod string) client.Client {
		cfg := rest.CopyConfig(apiPlane.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		if pod != "" {
			cfg.Impersonate.Extra = map[string][]string{podNameExtra: {pod}}
		}
		c, err := client.New(cfg, client.Options{Scheme: admin.Scheme()})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	claim := func(name, pod string) *locksv1alpha1.LockClaim {
		c := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "db"}}
		if pod != "" {
			c.Spec.Holder = &locksv1alpha1.ClaimHolder{PodName: pod}
		}
		return c
	}
	webSA := "system:serviceaccount:" + ns + ":web"

	// The API server loads a new policy within a second or so: until it refuses the plainest
	// case, nothing below would mean anything.
	g.Eventually(func() error {
		return as(webSA, "").Create(ctx, claim("probe", "db-0"), client.DryRunAll)
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(
		MatchError(ContainSubstring("neither made from that pod")), "the API server has loaded the policy")

	for _, tc := range []struct {
		name        string
		user, pod   string // the requester, and the pod its token is bound to
		claim       *locksv1alpha1.LockClaim
		wantRefused bool
	}{
		{"lockctl acquire in pod web-0 names web-0", webSA, "web-0", claim("web-0-own", "web-0"), false},
		{"pod web-0's account names another pod", webSA, "web-0", claim("web-0-names-db", "db-0"), true},
		{"the pod's account with a token bound to no pod names the pod", webSA, "", claim("unbound", "web-0"), true},
		{"a pod of the same name in another namespace", "system:serviceaccount:other-team:web", "web-0", claim("elsewhere", "web-0"), true},
		{"someone who may evict pods names one", "editor", "", claim("editor-names-db", "db-0"), false},
		{"a detached claim names no pod", webSA, "", claim("detached", ""), false},
	} {
		err := as(tc.user, tc.pod).Create(ctx, tc.claim)
		switch {
		case !tc.wantRefused && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.wantRefused && err == nil:
			t.Errorf("%s: admitted, want refused", tc.name)
		case tc.wantRefused:
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", tc.name, err)
			g.Expect(err.Error()).To(And(ContainSubstring("spec.holder.podName names pod "+tc.claim.Spec.Holder.PodName),
				ContainSubstring("lockctl acquire"), ContainSubstring("pods/eviction")), tc.name)
		}
	}
}
