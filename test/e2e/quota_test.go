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
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The chart's tenantQuotas on a real control plane: the ResourceQuota it renders bounds a
// namespace's LockClaims and DistributedLocks (kube-controller-manager counts them; the API
// server refuses what is over). No manager runs: a quota counts objects, granted or not.
var _ = Describe("The chart's tenant quotas", func() {
	It("refuse the claim and the lock beyond a namespace's counts, with the API server's reason", func() {
		ns := newNamespace()
		quota := newHelm().mustRun("template", "lw", filepath.Join(repoRoot, "charts", "lockwarden"),
			"--show-only", "templates/tenantquotas.yaml",
			"--set", "tenantQuotas[0].namespace="+ns, "--set", "tenantQuotas[0].lockClaims=2", "--set", "tenantQuotas[0].distributedLocks=1")
		// kube-controller-manager counts a kind once its quota monitor has found it: a CRD installed
		// moments before (as this suite does) is found at its next discovery, within 30 s. A quota
		// created before that is counted only at the next full resync (5 min), so the quota is
		// made again until it is counted; until then the API server refuses every counted object.
		By("creating the chart's ResourceQuota until kube-controller-manager counts the namespace")
		Eventually(func(g Gomega) {
			_, _ = tryKubectl("delete", "-n", ns, "resourcequota", "lw-lockwarden-locks", "--ignore-not-found", "--wait")
			_, err := kubectlStdin(quota, "apply", "-f", "-")
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(func(g Gomega) {
				rq := &corev1.ResourceQuota{}
				g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "lw-lockwarden-locks"}, rq)).To(Succeed())
				g.Expect(rq.Status.Used).To(HaveLen(2))
			}).WithTimeout(5 * time.Second).Should(Succeed())
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		lock := func(name string) *locksv1alpha1.DistributedLock {
			return &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		}
		claim := func(name string) *locksv1alpha1.LockClaim {
			return &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: locksv1alpha1.LockClaimSpec{LockName: "db"}}
		}
		Expect(k8sClient.Create(ctx(), lock("db"))).To(Succeed())
		Expect(k8sClient.Create(ctx(), lock("cache"))).To(MatchError(ContainSubstring("exceeded quota")))
		for i := range 2 {
			Expect(k8sClient.Create(ctx(), claim(fmt.Sprintf("c%d", i)))).To(Succeed())
		}
		Expect(k8sClient.Create(ctx(), claim("c2"))).To(MatchError(And(
			ContainSubstring("exceeded quota"), ContainSubstring("count/lockclaims.locks.lockwarden.io"))))
	})
})
