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
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// The shared-lock samples on a real scheduler: the semaphore Job and the read/write lock.

// running says whether a pod is on a node and has not finished: its containers may run.
func running(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// jobClaims returns, by pod name, the claims of a Job's pods for lock.
func jobClaims(ns, job, lock string) map[string]*locksv1alpha1.LockClaim {
	GinkgoHelper()
	out := map[string]*locksv1alpha1.LockClaim{}
	for _, p := range podsOf(Default, ns, client.MatchingLabels{"job-name": job}) {
		c := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: lockclient.ClaimName(p.Name, p.UID, lock)}, c)).To(Succeed())
		out[p.Name] = c
	}
	return out
}

// heldDuring says whether two ended claims held their lock at the same moment.
func heldDuring(a, b *locksv1alpha1.LockClaim) bool {
	return a.Status.AcquireTime.Before(b.Status.ReleaseTime) && b.Status.AcquireTime.Before(a.Status.ReleaseTime)
}

// mostAtOnce is the largest number of ended claims that held their lock at one moment, by their
// acquire and release times (a release and a grant at the same moment do not overlap).
func mostAtOnce(claims map[string]*locksv1alpha1.LockClaim) int {
	GinkgoHelper()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for pod, c := range claims {
		Expect(c.Status.AcquireTime).NotTo(BeNil(), pod)
		Expect(c.Status.ReleaseTime).NotTo(BeNil(), pod)
		edges = append(edges, edge{c.Status.AcquireTime.Time, 1}, edge{c.Status.ReleaseTime.Time, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // releases first
	})
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

var _ = Describe("Shared locks on a real scheduler", Ordered, func() {
	BeforeAll(startManager)

	It("run at most three pods of the semaphore Job at once, the others unscheduled, and complete it", func() {
		ns := newNamespace()
		w := watchPods(ns, func(pods []corev1.Pod) string {
			var on []string
			for _, p := range pods {
				if gated(&p) && p.Spec.NodeName != "" {
					return "gated pod " + p.Name + " is on node " + p.Spec.NodeName
				}
				if running(&p) {
					on = append(on, p.Name)
				}
			}
			if len(on) > 3 {
				return fmt.Sprintf("%d pods on nodes at once: %s", len(on), strings.Join(on, ", "))
			}
			return ""
		})
		defer w.stop()
		kubectl("apply", "-n", ns, "-f", filepath.Join(repoRoot, "config", "samples", "pods", "semaphore-job.yaml"))
		kubectl("wait", "-n", ns, "--for=condition=Complete", "--timeout=180s", "job/render")
		w.stop()

		claims := jobClaims(ns, "render", "render-slots")
		Expect(claims).To(HaveLen(10))
		tokens := map[int64]bool{}
		for pod, c := range claims {
			Expect(c.Spec.Mode).To(Equal(locksv1alpha1.LockModeShared), pod)
			Expect(c.Status.Phase).To(Equal(locksv1alpha1.ClaimReleased), "pod %s's claim ends with the pod", pod)
			tokens[c.Status.FencingToken] = true
		}
		Expect(tokens).To(HaveLen(10), "every grant has its own token")
		Expect(mostAtOnce(claims)).To(BeNumerically("<=", 3), "the claims' own acquire and release times")
	})

	It("run the migration of the read/write sample alone, between the reports", func() {
		ns := newNamespace()
		w := watchPods(ns, func(pods []corev1.Pod) string {
			var migrating bool
			var reading []string
			for _, p := range pods {
				switch {
				case !running(&p):
				case p.Labels["job-name"] == "schema-migration":
					migrating = true
				default:
					reading = append(reading, p.Name)
				}
			}
			if migrating && len(reading) > 0 {
				return "the migration ran beside " + strings.Join(reading, ", ")
			}
			return ""
		})
		defer w.stop()
		kubectl("apply", "-n", ns, "-f", filepath.Join(repoRoot, "config", "samples", "pods", "read-write-lock.yaml"))
		kubectl("wait", "-n", ns, "--for=condition=Complete", "--timeout=180s", "job/nightly-reports", "job/schema-migration")
		w.stop()

		migrations := jobClaims(ns, "schema-migration", "reports-db")
		Expect(migrations).To(HaveLen(1))
		var migration *locksv1alpha1.LockClaim
		for _, c := range migrations {
			migration = c
		}
		Expect(migration.Spec.Mode).To(Equal(locksv1alpha1.LockModeExclusive))
		reports := jobClaims(ns, "nightly-reports", "reports-db")
		Expect(reports).To(HaveLen(12))
		for pod, r := range reports {
			Expect(r.Spec.Mode).To(Equal(locksv1alpha1.LockModeShared))
			Expect(heldDuring(r, migration)).To(BeFalse(), "report %s held the lock while the migration did", pod)
			// Tokens follow the grants: a report granted after the migration has a higher one.
			Expect(r.Status.FencingToken > migration.Status.FencingToken).To(Equal(r.Status.AcquireTime.After(migration.Status.AcquireTime.Time)), pod)
		}
	})
})
