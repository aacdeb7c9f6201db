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

package main

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// newSharedLock creates a DistributedLock of places places.
func newSharedLock(ns, name string, places int32) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx(), &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: 6, MaxHolders: places}})).To(Succeed())
}

var _ = Describe("lockctl --mode on a lock of several places", func() {
	It("holds Shared beside other readers or Exclusive alone, and status shows every holder", func() {
		ns := newNamespace()
		newSharedLock(ns, "reports", 3)
		r1, r2, w := newPod(ns, "report-1"), newPod(ns, "report-2"), newPod(ns, "migrate")

		code, _, stderr := run(podEnv(r1), "acquire", "--lock", "reports")
		Expect(code).To(Equal(exitOK), stderr)
		code, stdout, stderr := run(podEnv(r2), "acquire", "--lock", "reports", "--mode", "Shared")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).NotTo(ContainSubstring("mode="))
		writer := start(podEnv(w), "run", "--lock", "reports", "--mode", "Exclusive", "--", "sh", "-c", `echo "migrating with $LOCKWARDEN_FENCING_TOKEN"`)
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(HaveLen(3))
		Consistently(writer, time.Second).ShouldNot(gexec.Exit(), "the writer waits for the readers")

		code, stdout, stderr = run(nil, "status", "reports", "-n", ns, "-o", "json")
		Expect(code).To(Equal(exitOK), stderr)
		var st lockclient.LockStatus
		Expect(json.Unmarshal([]byte(stdout), &st)).To(Succeed())
		Expect(st.MaxHolders).To(Equal(int32(3)))
		Expect([]int{st.Holding, st.Waiting}).To(Equal([]int{2, 1}))
		Expect(st.Holders).To(HaveExactElements(
			And(HaveField("Pod", "report-1"), HaveField("Mode", locksv1alpha1.LockModeShared), HaveField("ExpireTime", Not(BeNil()))),
			And(HaveField("Pod", "report-2"), HaveField("Mode", locksv1alpha1.LockModeShared), HaveField("ExpireTime", Not(BeNil())))))
		Expect(st.Holders[1].FencingToken).To(BeNumerically(">", st.Holders[0].FencingToken))
		Expect(st.Holder.Pod).To(Equal("report-1"), "holder, the first holder, is kept for older scripts") //nolint:staticcheck // SA1019: the deprecated holder field is checked on purpose
		Expect(st.Queue).To(ConsistOf(And(HaveField("Pod", "migrate"), HaveField("Mode", locksv1alpha1.LockModeExclusive))))
		code, stdout, _ = run(nil, "status", "reports", "-n", ns)
		Expect(code).To(Equal(exitOK))
		Expect(stdout).To(ContainSubstring("Places:      3, 2 held, 1 free\nHolders:     2 (last token "))
		Expect(stdout).To(MatchRegexp(`(?m)^  1\. pod report-1 \(claim \S+\), Shared, token \d+, acquired .*\n  2\. pod report-2 \(claim \S+\), Shared, token \d+, `))
		Expect(stdout).To(MatchRegexp(`(?m)^Queue:       1 waiting\n  1\. pod migrate \(claim \S+\), Exclusive, waiting `))
		code, stdout, _ = run(nil, "status", "-n", ns)
		Expect(code).To(Equal(exitOK))
		Expect(stdout).To(MatchRegexp(`(?m)^reports\s+2/3\s+pod report-1 \(claim \S+\) and 1 more\s`))

		for _, reader := range []*corev1.Pod{r1, r2} {
			code, _, stderr = run(podEnv(reader), "release", "--lock", "reports")
			Expect(code).To(Equal(exitOK), stderr)
		}
		Expect(writer.wait(30*time.Second)).To(Equal(exitOK), writer.stderr())
		Expect(writer.stdout()).To(MatchRegexp(`^migrating with \d+\n$`))
		Expect(writer.stderr()).To(MatchRegexp(`lockctl: acquired lock "reports" .* mode=Exclusive\n`))
	})

	It("refuses another mode than the one of the pod's claim, with exit code 4", func() {
		ns := newNamespace()
		newSharedLock(ns, "reports", 2)
		p := newPod(ns, "report-1")
		code, _, stderr := run(podEnv(p), "acquire", "--lock", "reports")
		Expect(code).To(Equal(exitOK), stderr)
		code, _, stderr = run(podEnv(p), "acquire", "--lock", "reports", "--mode", "Exclusive")
		Expect(code).To(Equal(exitClaimFailed))
		Expect(oneLine(stderr)).To(Equal(`lockctl: pod report-1 already has LockClaim ` + lockclient.ClaimName("report-1", p.UID, "reports") +
			` for lock "reports" in mode Shared, not Exclusive, and a claim's mode cannot change; give --mode the claim's mode` +
			` (the pod's locks.lockwarden.io/lock-mode annotation sets it) or leave --mode out`))
		code, _, stderr = run(podEnv(p), "run", "--lock", "reports", "--mode", "Exclusive", "--", "true")
		Expect(code).To(Equal(runClaimFailed), stderr)
		code, stdout, stderr := run(podEnv(p), "acquire", "--lock", "reports", "--mode", "Shared")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(ContainSubstring("reattached=true"))
	})
})
