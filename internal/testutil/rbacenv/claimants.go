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

package rbacenv

import (
	"context"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/claimrights"
)

// ClaimantRole is the Role that AllowClaims creates and binds.
const ClaimantRole = "lockwarden-test-claimant"

// AllowClaims lets every service account of namespace create LockClaims there, as a user of
// annotated pods and workloads does for theirs (the controller makes an annotation's claim only
// for an account that may: claimrights). Test namespaces whose pods ask for locks by annotation
// call it; a namespace that has not is where a refused pod is tested.
func AllowClaims(ctx context.Context, c client.Client, namespace string) error {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ClaimantRole},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{locksv1alpha1.GroupVersion.Group},
			Resources: []string{"lockclaims"}, Verbs: []string{"create", "get", "list", "watch", "delete"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ClaimantRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ClaimantRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName,
			Name: "system:serviceaccounts:" + namespace}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := createOnce(ctx, c, o); err != nil {
			return err
		}
	}
	// The API server's authorizer sees a new binding a moment later: until then a claim would be
	// refused, and the refusal kept for claimrights.DefaultTTL.
	return WaitAuthorized(ctx, c, Account{Name: claimrights.DefaultServiceAccount, Namespace: namespace},
		[]Grant{{Role: "Role " + ClaimantRole, Namespace: namespace, Rules: role.Rules}}, 30*time.Second)
}
