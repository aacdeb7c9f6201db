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

package v1alpha1_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

var _ = Describe("Valid objects", func() {
	It("round-trip a DistributedLock with the built-in backend and default lease", func() {
		ns := newNamespace()
		lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}}
		Expect(k8sClient.Create(ctx, lock)).To(Succeed())

		got := &locksv1alpha1.DistributedLock{}
		Expect(k8sClient.Get(ctx, keyOf(lock), got)).To(Succeed())
		Expect(got.Spec.BackendRef.Name).To(Equal(locksv1alpha1.BuiltinBackendName))
		Expect(got.Spec.LeaseDurationSeconds).To(Equal(int32(30)))
		Expect(got.Spec.MaxHolders).To(Equal(int32(1)), "a mutex by default")
		Expect(got.Spec.Key).To(BeEmpty())
		Expect(got.BackendKey(locksv1alpha1.KeyPolicyNamespaced)).To(Equal("lockwarden/" + ns + "/db"))
		Expect(got.BackendKey(locksv1alpha1.KeyPolicyVerbatim)).To(Equal("lockwarden/"+ns+"/db"), "a lock without spec.key keeps its default key under Verbatim")
		Expect(got.BackendName()).To(Equal("kubernetes"))
	})

	It("round-trip a LockClaim for a pod with every optional field", func() {
		ns := newNamespace()
		claim := &locksv1alpha1.LockClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0-db", Namespace: ns},
			Spec: locksv1alpha1.LockClaimSpec{
				LockName:           "db",
				Holder:             &locksv1alpha1.ClaimHolder{PodName: "web-0", Identity: "web"},
				WaitTimeoutSeconds: ptr.To[int32](0),
				Mode:               locksv1alpha1.LockModeExclusive,
			},
		}
		Expect(k8sClient.Create(ctx, claim)).To(Succeed())

		got := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx, keyOf(claim), got)).To(Succeed())
		Expect(got.Spec).To(Equal(claim.Spec))
	})

	It("round-trip a LockClaim status written through the status subresource", func() {
		ns := newNamespace()
		claim := &locksv1alpha1.LockClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
			Spec:       locksv1alpha1.LockClaimSpec{LockName: "db"},
		}
		Expect(k8sClient.Create(ctx, claim)).To(Succeed())
		now := metav1.NowMicro()
		claim.Status = locksv1alpha1.LockClaimStatus{
			Phase:                locksv1alpha1.ClaimHeld,
			FencingToken:         1764480000000001,
			HolderIdentity:       string(claim.UID),
			AcquireTime:          &now,
			LeaseDurationSeconds: 30,
			Conditions: []metav1.Condition{{
				Type: locksv1alpha1.ConditionAcquired, Status: metav1.ConditionTrue,
				Reason: locksv1alpha1.ReasonAcquired, Message: "Held with fencing token 1764480000000001",
				LastTransitionTime: metav1.Now(),
			}},
		}
		Expect(k8sClient.Status().Update(ctx, claim)).To(Succeed())

		got := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx, keyOf(claim), got)).To(Succeed())
		Expect(got.Status.Phase).To(Equal(locksv1alpha1.ClaimHeld))
		Expect(got.Status.FencingToken).To(Equal(int64(1764480000000001)))
		Expect(got.Status.AcquireTime.UnixMicro()).To(Equal(now.UnixMicro()))
		Expect(got.Status.Conditions).To(HaveLen(1))
	})

	DescribeTable("LockBackends of every type get their defaults",
		func(spec locksv1alpha1.LockBackendSpec, check func(locksv1alpha1.LockBackendSpec)) {
			backend := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{GenerateName: "b-"}, Spec: spec}
			Expect(k8sClient.Create(ctx, backend)).To(Succeed())
			DeferCleanup(func() { _ = k8sClient.Delete(ctx, backend) })
			got := &locksv1alpha1.LockBackend{}
			Expect(k8sClient.Get(ctx, keyOf(backend), got)).To(Succeed())
			Expect(got.Spec.KeyPolicy).To(Equal(locksv1alpha1.KeyPolicyNamespaced), "every backend keeps keys under their namespace unless told otherwise")
			check(got.Spec)
		},
		Entry("Kubernetes", locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendKubernetes},
			func(s locksv1alpha1.LockBackendSpec) { Expect(s.Type).To(Equal(locksv1alpha1.BackendKubernetes)) }),
		Entry("Redis", locksv1alpha1.LockBackendSpec{
			Type:  locksv1alpha1.BackendRedis,
			Redis: &locksv1alpha1.RedisBackend{Address: "10.0.0.7:6379", TLS: &locksv1alpha1.TLSConfig{}},
		}, func(s locksv1alpha1.LockBackendSpec) {
			Expect(s.Redis.DB).To(Equal(int32(0)))
			Expect(s.Redis.TLS).NotTo(BeNil(), "an empty tls object must survive: it turns TLS on")
		}),
		Entry("Redlock over five nodes, one of them IPv6", locksv1alpha1.LockBackendSpec{
			Type: locksv1alpha1.BackendRedlock,
			Redlock: &locksv1alpha1.RedlockBackend{Addresses: []locksv1alpha1.HostPort{
				"r0.infra.svc:6379", "r1.infra.svc:6379", "r2.infra.svc:6379", "10.0.0.9:6380", "[fd00::7]:6379"}},
		}, func(s locksv1alpha1.LockBackendSpec) { Expect(s.Redlock.Addresses).To(HaveLen(5)) }),
		Entry("Etcd", locksv1alpha1.LockBackendSpec{
			Type: locksv1alpha1.BackendEtcd,
			Etcd: &locksv1alpha1.EtcdBackend{Endpoints: []locksv1alpha1.EtcdEndpoint{"https://etcd-0.etcd:2379", "etcd-1.etcd:2379"}},
		}, func(s locksv1alpha1.LockBackendSpec) { Expect(s.Etcd.Endpoints).To(HaveLen(2)) }),
		Entry("ZooKeeper", locksv1alpha1.LockBackendSpec{
			Type:      locksv1alpha1.BackendZooKeeper,
			ZooKeeper: &locksv1alpha1.ZooKeeperBackend{Servers: []locksv1alpha1.HostPort{"zk-0:2181"}},
		}, func(s locksv1alpha1.LockBackendSpec) { Expect(s.ZooKeeper.SessionTimeoutSeconds).To(Equal(int32(10))) }),
		Entry("SQL", locksv1alpha1.LockBackendSpec{
			Type: locksv1alpha1.BackendSQL,
			SQL: &locksv1alpha1.SQLBackend{Driver: locksv1alpha1.SQLDriverPostgres, DSNSecretRef: locksv1alpha1.SecretKeySelector{
				SecretReference: locksv1alpha1.SecretReference{Name: "db", Namespace: "lockwarden-system"}, Key: "dsn"}},
		}, func(s locksv1alpha1.LockBackendSpec) { Expect(s.SQL.Table).To(Equal("lockwarden_locks")) }),
	)
})

var _ = Describe("A LockClaim without a mode", func() {
	It("is Shared", func() {
		ns := newNamespace()
		claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: locksv1alpha1.LockClaimSpec{LockName: "db"}}
		Expect(k8sClient.Create(ctx, claim)).To(Succeed())
		got := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx, keyOf(claim), got)).To(Succeed())
		Expect(got.Spec.Mode).To(Equal(locksv1alpha1.LockModeShared))
	})

	It("has priority 0, stored (so that the priority column and its immutability see it)", func() {
		ns := newNamespace()
		claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: locksv1alpha1.LockClaimSpec{LockName: "db"}}
		Expect(k8sClient.Create(ctx, claim)).To(Succeed())
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind("LockClaim"))
		Expect(k8sClient.Get(ctx, keyOf(claim), got)).To(Succeed())
		priority, found, err := unstructured.NestedInt64(got.Object, "spec", "priority")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue(), "spec.priority is defaulted")
		Expect(priority).To(BeZero())
	})
})
