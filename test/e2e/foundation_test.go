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
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

var _ = Describe("The cluster under test", func() {
	It("serves Kubernetes v1.37.2", func() {
		var version struct {
			ServerVersion struct {
				GitVersion string `json:"gitVersion"`
			} `json:"serverVersion"`
		}
		Expect(json.Unmarshal([]byte(kubectl("version", "-o", "json")), &version)).To(Succeed())
		Expect(version.ServerVersion.GitVersion).To(Equal("v1.37.2"))
	})

	It("schedules a Deployment's pods onto nodes and runs them", func() {
		ns := newNamespace()
		labels := map[string]string{"app": "sleeper"}
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
						// kwok's fake nodes carry this taint so that real workloads never land on them.
						Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
					},
				},
			},
		}
		Expect(k8sClient.Create(ctx(), deploy)).To(Succeed())
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8sClient.List(ctx(), pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(2))
			for _, p := range pods.Items {
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s not scheduled", p.Name)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			}
		}).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	})
})

var _ = Describe("The lockwarden API on a real cluster", func() {
	It("accepts the samples and lists them under kubectl get locks with their columns", func() {
		samples := filepath.Join(repoRoot, "config", "samples")
		kubectl("apply", "-f", samples)
		DeferCleanup(func() { _, _ = tryKubectl("delete", "--ignore-not-found", "-f", samples) })

		out := kubectl("get", "locks", "-A")
		// One table per kind, each with the columns that answer a user's first question.
		for _, header := range [][]string{
			{"NAMESPACE", "NAME", "TYPE", "READY", "AGE"},
			{"NAMESPACE", "NAME", "BACKEND", "HOLDERS", "MAX", "HOLDER", "TOKEN", "WAITING", "READY", "AGE"},
			{"NAMESPACE", "NAME", "LOCK", "PHASE", "HOLDER", "MODE", "TOKEN", "EXPIRES", "AGE"},
		} {
			Expect(out).To(MatchRegexp(`(?m)^`+strings.Join(header, `\s+`)+`\s*$`), "kubectl get locks -A:\n%s", out)
		}
		Expect(out).To(ContainSubstring("lockbackend.locks.lockwarden.io/redis-main"))
		Expect(out).To(MatchRegexp(`distributedlock.locks.lockwarden.io/nightly-migration\s+kubernetes\s`))
		Expect(out).To(MatchRegexp(`lockclaim.locks.lockwarden.io/migration-by-hand\s+nightly-migration\s`))

		By("short names")
		for _, short := range []string{"lb", "dlock", "lclaim"} {
			kubectl("get", short, "-A")
		}
	})

	It("refuses an invalid object with a message that says what to fix", func() {
		_, err := kubectlStdin(`
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
metadata: {name: e2e-bad-redlock}
spec:
  type: Redlock
  redlock: {addresses: ["r0:6379", "r1:6379"]}
`, "apply", "-f", "-")
		Expect(err).To(MatchError(ContainSubstring("redlock needs an odd number of Redis nodes so that a majority is unambiguous")))
	})
})

var _ = Describe("The manager", func() {
	It("starts against the cluster, serves probes and metrics, wins leader election and stops cleanly", func() {
		ns := newNamespace()
		metricsAddr, probeAddr := freeAddr(), freeAddr()
		// Plain HTTP on a loopback address, as make run-local serves metrics; the chart's spec
		// scrapes the default HTTPS endpoint with a token.
		cmd := exec.Command(filepath.Join(binDir, "manager"),
			"--kubeconfig", kubeconfig,
			"--metrics-bind-address", metricsAddr, "--metrics-secure=false",
			"--health-probe-bind-address", probeAddr,
			"--leader-elect", "--leader-election-namespace", ns, "--secret-namespace", ns)
		cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
		Expect(cmd.Start()).To(Succeed())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		DeferCleanup(func() { _ = cmd.Process.Kill() })

		Eventually(httpGet).WithArguments("http://" + probeAddr + "/healthz").
			WithTimeout(30 * time.Second).Should(Equal("ok"))
		Eventually(httpGet).WithArguments("http://" + probeAddr + "/readyz").
			WithTimeout(30 * time.Second).Should(Equal("ok"))

		lease := &coordinationv1.Lease{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "lockwarden.locks.lockwarden.io"}, lease)).To(Succeed())
			g.Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).NotTo(BeEmpty())
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(httpGet).WithArguments("http://" + metricsAddr + "/metrics").
			Should(ContainSubstring(`leader_election_master_status{name="lockwarden.locks.lockwarden.io"} 1`))

		By("granting a claim, which kubectl wait --for=condition=Acquired sees")
		apps := newNamespace()
		kubectl("apply", "-n", apps, "-f", filepath.Join(repoRoot, "config", "samples", "locks_v1alpha1_distributedlock.yaml"))
		_, err := kubectlStdin(`
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
metadata: {name: first}
spec: {lockName: nightly-migration}
---
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
metadata: {name: second}
spec: {lockName: nightly-migration}
`, "apply", "-n", apps, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		kubectl("wait", "-n", apps, "--for=condition=Acquired", "--timeout=30s", "lclaim/first")
		// The first grant and the second claim's place in the queue are two writes to two objects:
		// the second may not have been written when the first reads Acquired. Its place is exact
		// when it is queued: 1 if the first was granted by then, 2 if a pass queued both before
		// the grant (the lock not ready yet); a waiter's place then moves in bands, at most once a
		// minute, so that a handoff writes nothing to the claims that wait.
		Eventually(tryKubectl).WithArguments("get", "-n", apps, "lclaim/second", "-o", "jsonpath={.status.phase} {.status.queuePosition}").
			WithTimeout(30 * time.Second).Should(MatchRegexp(`^Pending [12]$`))
		kubectl("delete", "-n", apps, "lclaim/first", "--wait=true", "--timeout=30s")
		kubectl("wait", "-n", apps, "--for=condition=Acquired", "--timeout=30s", "lclaim/second")
		Expect(kubectl("get", "-n", apps, "dlock/nightly-migration", "-o", "jsonpath={.status.holders[0].claim}")).To(Equal("second"))

		By("stopping on SIGTERM and giving up the leader Lease")
		Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		Eventually(exited).WithTimeout(20 * time.Second).Should(Receive(BeNil()))
		Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(lease), lease)).To(Succeed())
		Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).To(BeEmpty(), "the Lease should be released on shutdown")
	})
})

func ctx() context.Context { return context.Background() }

// newNamespace creates a namespace for one test, whose service accounts may create LockClaims (as
// annotated pods' accounts must), and deletes it afterwards.
func newNamespace() string {
	GinkgoHelper()
	ns := newBareNamespace()
	Expect(rbacenv.AllowClaims(ctx(), k8sClient, ns)).To(Succeed())
	return ns
}

// newBareNamespace creates a namespace for one test, whose service accounts may do nothing, and
// deletes it afterwards.
func newBareNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	Expect(k8sClient.Create(ctx(), ns)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx(), ns) })
	return ns.Name
}

// kubectlStdin runs kubectl with text on its standard input.
func kubectlStdin(text string, args ...string) (string, error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(text)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

// httpGet returns the body of a 200 response, or an error.
func httpGet(url string) (string, error) {
	return httpGetWithToken(url, "")
}

// httpGetWithToken is httpGet with a bearer token, when not empty. It accepts any server
// certificate: the manager's metrics endpoint serves a self-signed one by default, and the token
// checks are what the suite tests.
func httpGetWithToken(url, token string) (string, error) {
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-signed certificate, on loopback
	}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}
