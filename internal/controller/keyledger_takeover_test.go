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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/keyledger"
)

var _ = Describe("A key whose owner is gone without letting it go", func() {
	// The key ledger's Lease outlives its lock when the lock's finalizer is removed by hand before
	// the controller's pass, a namespace is force-deleted, or the CRDs are deleted while no
	// controller runs. The lock created next on that key takes the key over: to tell a gone owner
	// from a cache that lags, it reads the owner on the API server. Under the chart's RBAC that
	// read was refused (no get on distributedlocks), every pass of the new lock failed Forbidden,
	// and its claims waited for ever (issue 37, bug 5). The suite's manager runs under the shipped
	// RBAC, so the refusal fails this spec.
	It("is taken over by the next lock on that key, which then grants", func() {
		ns := newNamespace()
		key := locksv1alpha1.NamespacedKeyPrefix(ns) + "db"
		leftover := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: controllerNamespace, Name: keyledger.LeaseName(registry.StoreOf(nil), key),
				Labels: map[string]string{keyledger.LedgerLabel: "true"},
				Annotations: map[string]string{keyledger.BackendAnnotation: locksv1alpha1.BuiltinBackendName,
					keyledger.KeyAnnotation: key, keyledger.LockAnnotation: ns + "/db"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("uid-of-a-lock-deleted-long-ago")},
		}
		Expect(k8sClient.Create(ctx(), leftover)).To(Succeed())

		newLock(ns, "db")
		newClaim(ns, "a", "db", "")
		Eventually(phaseOf(ns, "a")).Should(Equal(held))
	})
})
