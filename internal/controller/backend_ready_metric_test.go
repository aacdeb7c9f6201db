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
	"errors"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

var _ = Describe("lockwarden_backend_ready", func() {
	It("follows each probe of a LockBackend, and goes with the LockBackend", func() {
		faultyStore.SetUnavailable(nil)
		DeferCleanup(func() { faultyStore.SetUnavailable(nil) })
		lb := &locksv1alpha1.LockBackend{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probed-"},
			Spec:       locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL, SQL: faultySQL},
		}
		Expect(k8sClient.Create(ctx(), lb)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx(), lb) })
		Eventually(backendReady(lb.Name)).Should(Equal("1"))

		faultyStore.SetUnavailable(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
		Eventually(backendReady(lb.Name)).Should(Equal("0"))
		ns := newNamespace()
		newLock(ns, "db", func(l *locksv1alpha1.DistributedLock) { l.Spec.BackendRef.Name = lb.Name })
		newClaim(ns, "a", "db", "")
		Eventually(acquired(ns, "a")).Should(Equal("False/BackendUnavailable"), "0 means nothing is granted")

		faultyStore.SetUnavailable(nil)
		Eventually(backendReady(lb.Name)).Should(Equal("1"))
		Eventually(phaseOf(ns, "a")).Should(Equal(held))

		Expect(k8sClient.Delete(ctx(), lb)).To(Succeed())
		Eventually(backendReady(lb.Name)).Should(Equal("absent"))
	})

	It("is 0 for a LockBackend whose Secret is missing", func() {
		lb := &locksv1alpha1.LockBackend{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "no-secret-"},
			Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendSQL, SQL: &locksv1alpha1.SQLBackend{
				Driver: locksv1alpha1.SQLDriverPostgres,
				DSNSecretRef: locksv1alpha1.SecretKeySelector{
					SecretReference: locksv1alpha1.SecretReference{Name: "does-not-exist", Namespace: controllerNamespace}, Key: "dsn"}}},
		}
		Expect(k8sClient.Create(ctx(), lb)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx(), lb) })
		Eventually(backendReady(lb.Name)).Should(Equal("0"))
	})

	It("reports the built-in backend when a LockBackend of type Kubernetes has it probed", func() {
		lb := &locksv1alpha1.LockBackend{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "in-cluster-"},
			Spec:       locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendKubernetes},
		}
		Expect(k8sClient.Create(ctx(), lb)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx(), lb) })
		Eventually(backendReady(lb.Name)).Should(Equal("1"))
	})
})

// backendReady returns the value of the running manager's lockwarden_backend_ready series for
// backend, or "absent" when it has none, for Eventually.
func backendReady(backend string) func() string {
	return func() string {
		ch := make(chan prometheus.Metric)
		go func() {
			mgrMetric.BackendReady.Collect(ch)
			close(ch)
		}()
		value := "absent"
		for m := range ch {
			var d dto.Metric
			Expect(m.Write(&d)).To(Succeed())
			for _, l := range d.GetLabel() {
				if l.GetName() == "backend" && l.GetValue() == backend {
					value = strconv.FormatFloat(d.GetGauge().GetValue(), 'g', -1, 64)
				}
			}
		}
		return value
	}
}
