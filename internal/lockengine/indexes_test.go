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

package lockengine

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestIndexKeys pins the keys each index files an object under: the ones controller-runtime's
// cache looks up for a List with client.MatchingFields, once per object (a namespaced index under
// the object's namespace, a cluster-wide one under all namespaces), never both.
func TestIndexKeys(t *testing.T) {
	byField := map[string]fieldIndex{}
	for _, ix := range fieldIndexes {
		byField[ix.field] = ix
	}
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-0-db"},
		Spec: locksv1alpha1.LockClaimSpec{LockName: "db", Holder: &locksv1alpha1.ClaimHolder{PodName: "web-0"}}}
	lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db"},
		Spec: locksv1alpha1.DistributedLockSpec{BackendRef: locksv1alpha1.BackendReference{Name: "redis"}}}

	for _, tc := range []struct {
		field string
		obj   any
		want  []string
	}{
		{indexClaimLock, claim, []string{"apps/db"}},
		{indexClaimPod, claim, []string{"apps/web-0"}},
		{indexClaimLease, claim, nil},
		{indexLockBackend, lock, []string{"__all_namespaces/redis"}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			g := NewWithT(t)
			ix, ok := byField[tc.field]
			g.Expect(ok).To(BeTrue())
			keys, err := ix.indexFunc()(tc.obj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(keys).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	g.Expect(cacheIndexName(indexClaimLock)).To(Equal("field:spec.lockName"))
}
