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
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// startRedis runs a redis-server on a free loopback port for the rest of the container, and
// returns its address. The suite fails, never skips, without Debian's redis-server.
func startRedis() string {
	GinkgoHelper()
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	Expect(err).NotTo(HaveOccurred(), "redis-server is needed: apt-get install -y redis-server")
	addr := freeAddr()
	port := addr[strings.LastIndex(addr, ":")+1:]
	cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", GinkgoT().TempDir())
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	DeferCleanup(rdb.Close)
	Eventually(func() error { return rdb.Ping(ctx()).Err() }).WithTimeout(10 * time.Second).Should(Succeed())
	return addr
}

var _ = Describe("A lock with lossPolicy Evict and lockDelaySeconds", Ordered, func() {
	BeforeAll(startManager)

	It("evicts a Deployment's holder pod that lost the lock, and grants its replacement after the delay with a higher token", func() {
		addr := startRedis()
		rdb := goredis.NewClient(&goredis.Options{Addr: addr})
		DeferCleanup(rdb.Close)
		ns := newNamespace()
		backend := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: ns + "-redis"},
			Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
				Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(addr)}}}
		Expect(k8sClient.Create(ctx(), backend)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx(), backend) })
		const delay = 5
		_, err := kubectlStdin(`
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
metadata: {name: reports}
spec:
  backendRef: {name: `+backend.Name+`}
  leaseDurationSeconds: 6
  lockDelaySeconds: `+strconv.Itoa(delay)+`
  lossPolicy: Evict
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: report-writer}
spec:
  replicas: 1
  selector: {matchLabels: {app: report-writer}}
  template:
    metadata:
      labels: {app: report-writer}
      annotations: {locks.lockwarden.io/lock: reports}
    spec:
      schedulingGates: [{name: locks.lockwarden.io/lock}]
      terminationGracePeriodSeconds: 1
      containers: [{name: writer, image: busybox:1.37}]
`, "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())

		// holding waits for the one pod of the Deployment that is ungated and running, other than
		// the pod whose UID is not, and returns it with its token.
		holding := func(not types.UID) (corev1.Pod, int64) {
			GinkgoHelper()
			var pod corev1.Pod
			var token int64
			Eventually(func(g Gomega) {
				var live []corev1.Pod
				for _, p := range podsOf(g, ns, client.MatchingLabels{"app": "report-writer"}) {
					if p.DeletionTimestamp == nil && p.UID != not && !gated(&p) && p.Status.Phase == corev1.PodRunning {
						live = append(live, p)
					}
				}
				g.Expect(live).To(HaveLen(1))
				pod = live[0]
				var err error
				token, err = strconv.ParseInt(pod.Annotations[locksv1alpha1.PodFencingTokenAnnotation], 10, 64)
				g.Expect(err).NotTo(HaveOccurred())
			}).WithTimeout(90 * time.Second).Should(Succeed())
			return pod, token
		}
		first, firstToken := holding("")

		By("a client outside lockwarden takes the key from under the holder")
		key := "lockwarden/" + ns + "/reports"
		Expect(rdb.Set(ctx(), key, "intruder", 2*time.Second).Err()).To(Succeed())

		By("the holder's claim is Lost, the pod is evicted, the Deployment replaces it")
		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				reasons = append(reasons, e.Reason)
			}
			g.Expect(reasons).To(ContainElements(locksv1alpha1.ReasonRenewFailed, locksv1alpha1.ReasonHolderEvicted))
		}).WithTimeout(60 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			err := k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: first.Name}, &corev1.Pod{})
			g.Expect(err).To(HaveOccurred(), "the evicted pod is gone")
		}).WithTimeout(60 * time.Second).Should(Succeed())

		second, secondToken := holding(first.UID)
		Expect(secondToken).To(BeNumerically(">", firstToken))

		By("the replacement was granted no sooner than the lock delay after the loss")
		claims := &locksv1alpha1.LockClaimList{}
		Expect(k8sClient.List(ctx(), claims, client.InNamespace(ns))).To(Succeed())
		var granted *locksv1alpha1.LockClaim
		for i := range claims.Items {
			if h := claims.Items[i].Spec.Holder; h != nil && h.PodName == second.Name {
				granted = &claims.Items[i]
			}
		}
		Expect(granted).NotTo(BeNil(), "the replacement's claim")
		lost := &eventsv1.EventList{}
		Expect(k8sClient.List(ctx(), lost, client.InNamespace(ns))).To(Succeed())
		var lostAt time.Time
		for _, e := range lost.Items {
			if e.Reason == locksv1alpha1.ReasonRenewFailed {
				lostAt = e.EventTime.Time
			}
		}
		Expect(lostAt).NotTo(BeZero())
		// The event is stamped after the pass that ended the hold, so the delay, counted from that
		// pass, may end up to the event's lag before lostAt+delay: allow a second.
		Expect(granted.Status.AcquireTime.Time).To(BeTemporally(">=", lostAt.Add(delay*time.Second-time.Second)),
			"lost at %s, granted at %s", lostAt, granted.Status.AcquireTime.Time)
	})
})
