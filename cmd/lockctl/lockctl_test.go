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
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/faultproxy"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

var _ = Describe("lockctl acquire", func() {
	It("grants three pods in order, with rising tokens in their token files, and re-attaches", func() {
		ns := newNamespace()
		newLock(ns, "db-migrate")
		p1, p2, p3 := newPod(ns, "web-1"), newPod(ns, "web-2"), newPod(ns, "web-3")
		dir := GinkgoT().TempDir()
		tokenFile := func(i int) string { return filepath.Join(dir, "token-"+strconv.Itoa(i)) }

		code, stdout, stderr := run(podEnv(p1), "acquire", "--lock", "db-migrate", "--token-file", tokenFile(1))
		Expect(code).To(Equal(exitOK), stderr)
		t1 := readToken(tokenFile(1))
		Expect(stdout).To(HavePrefix(`acquired lock "db-migrate" in namespace "` + ns + `": holder=web-1 token=` + strconv.FormatInt(t1, 10) + " waited="))

		second := start(podEnv(p2), "acquire", "--lock", "db-migrate", "--token-file", tokenFile(2))
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(HaveLen(2))
		third := start(podEnv(p3), "acquire", "--lock", "db-migrate", "--token-file", tokenFile(3))
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(HaveLen(3))
		Consistently(second, time.Second).ShouldNot(gexec.Exit())

		// status shows the holder and the queue in order.
		code, stdout, stderr = run(nil, "status", "db-migrate", "-n", ns, "-o", "json")
		Expect(code).To(Equal(exitOK), stderr)
		var st lockclient.LockStatus
		Expect(json.Unmarshal([]byte(stdout), &st)).To(Succeed())
		// status -o json still prints the deprecated holder, for programs written before shared locks.
		holder := st.Holder //nolint:staticcheck // SA1019: the deprecated field is checked on purpose
		Expect(holder.Pod).To(Equal("web-1"))
		Expect(holder.FencingToken).To(Equal(t1))
		Expect(holder.ExpireTime).NotTo(BeNil())
		Expect(st.Queue).To(HaveLen(2))
		Expect([]string{st.Queue[0].Pod, st.Queue[1].Pod}).To(Equal([]string{"web-2", "web-3"}))
		code, stdout, _ = run(nil, "status", "db-migrate", "-n", ns)
		Expect(code).To(Equal(exitOK))
		Expect(stdout).To(ContainSubstring("Places:      1 (a mutex), held\nHolders:     1 (last token " + strconv.FormatInt(t1, 10) + ")\n  1. pod web-1 "))
		Expect(stdout).To(MatchRegexp(`(?m)^  1\. pod web-2 .*\n  2\. pod web-3 `))
		code, stdout, _ = run(nil, "status", "-n", ns)
		Expect(code).To(Equal(exitOK))
		Expect(stdout).To(MatchRegexp(`(?m)^db-migrate\s+1/1\s+pod web-1 .*\s2\s+true$`))

		// The first pod releases its own claim (the init container after its migration).
		code, stdout, stderr = run(podEnv(p1), "release", "--lock", "db-migrate")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(HavePrefix(`released claim "` + lockclient.ClaimName("web-1", p1.UID, "db-migrate") + `"`))
		Expect(second.wait(30*time.Second)).To(Equal(exitOK), second.stderr())
		t2 := readToken(tokenFile(2))
		Expect(t2).To(BeNumerically(">", t1))
		Consistently(third, time.Second).ShouldNot(gexec.Exit())

		// A restarted init container of the second pod finds its claim and its token again.
		code, stdout, stderr = run(podEnv(p2), "acquire", "--lock", "db-migrate", "--token-file", tokenFile(2))
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(ContainSubstring("reattached=true"))
		Expect(readToken(tokenFile(2))).To(Equal(t2))
		Expect(claims(ns)).To(HaveLen(2))

		// Releasing by claim name hands the lock to the third pod.
		code, _, stderr = run(nil, "release", lockclient.ClaimName("web-2", p2.UID, "db-migrate"), "-n", ns)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(third.wait(30*time.Second)).To(Equal(exitOK), third.stderr())
		Expect(readToken(tokenFile(3))).To(BeNumerically(">", t2))
	})

	It("exits 3 when --timeout passes", func() {
		ns := newNamespace()
		newLock(ns, "db-migrate")
		p1, p2 := newPod(ns, "web-1"), newPod(ns, "web-2")
		code, _, stderr := run(podEnv(p1), "acquire", "--lock", "db-migrate")
		Expect(code).To(Equal(exitOK), stderr)

		started := time.Now()
		code, _, stderr = run(podEnv(p2), "acquire", "--lock", "db-migrate", "--timeout", "2s")
		Expect(code).To(Equal(exitTimedOut))
		Expect(time.Since(started)).To(BeNumerically("<", 15*time.Second))
		Expect(oneLine(stderr)).To(And(
			HavePrefix(`lockctl: timed out waiting for lock "db-migrate" in namespace "`+ns+`"`),
			HaveSuffix("; raise --timeout, or see who holds the lock: lockctl status db-migrate -n "+ns)))
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(HaveLen(1), "the timed-out claim is gone")
	})

	It("exits 4 with what to do when the lock or the pod is missing, or RBAC forbids", func() {
		ns := newNamespace()
		newLock(ns, "db-migrate")
		p := newPod(ns, "web-1")

		code, _, stderr := run(podEnv(p), "acquire", "--lock", "nope")
		Expect(code).To(Equal(exitClaimFailed))
		Expect(oneLine(stderr)).To(Equal(`lockctl: lock "nope" not found in namespace "` + ns + `"; create the DistributedLock or fix --lock`))

		code, _, stderr = run([]string{"POD_NAME=ghost", "POD_NAMESPACE=" + ns}, "acquire", "--lock", "db-migrate")
		Expect(code).To(Equal(exitClaimFailed))
		Expect(oneLine(stderr)).To(Equal(`lockctl: pod "ghost" not found in namespace "` + ns +
			`"; set POD_NAME, POD_NAMESPACE and POD_UID from the downward API of the pod lockctl runs in (docs/lockctl.md)`))

		code, _, stderr = run(podEnv(p), "acquire", "--lock", "db-migrate", "--as", "system:serviceaccount:"+ns+":nobody")
		Expect(code).To(Equal(exitClaimFailed))
		Expect(oneLine(stderr)).To(And(
			ContainSubstring(`User "system:serviceaccount:`+ns+`:nobody" cannot get resource "distributedlocks"`),
			HaveSuffix("; give the service account the lockctl Role (config/samples/pods/lockctl-rbac.yaml) or fix --as")))
		Expect(claims(ns)).To(BeEmpty())

		code, _, stderr = run(nil, "wait", "no-such-claim", "-n", ns)
		Expect(code).To(Equal(exitClaimFailed))
		Expect(oneLine(stderr)).To(HavePrefix(`lockctl: claim "no-such-claim" not found in namespace "` + ns + `"`))
	})
})

var _ = Describe("lockctl wait", func() {
	It("waits for a claim made by hand, and times out with exit code 3", func() {
		ns := newNamespace()
		newLock(ns, "report")
		holder := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "report"}}
		Expect(k8sClient.Create(ctx(), holder)).To(Succeed())
		code, stdout, stderr := run(nil, "wait", "holder", "-n", ns)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(ContainSubstring("holder=holder token="))

		Expect(k8sClient.Create(ctx(), &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "next"},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "report"}})).To(Succeed())
		code, _, stderr = run(nil, "wait", "next", "-n", ns, "--timeout", "1s")
		Expect(code).To(Equal(exitTimedOut))
		Expect(oneLine(stderr)).To(And(HavePrefix(`lockctl: timed out waiting for claim "next"`), HaveSuffix("lockctl status report -n "+ns)))

		waiter := start(nil, "wait", "next", "-n", ns)
		Expect(k8sClient.Delete(ctx(), holder)).To(Succeed())
		Expect(waiter.wait(30*time.Second)).To(Equal(exitOK), waiter.stderr())
		Expect(waiter.stdout()).To(ContainSubstring("holder=next"))
	})
})

var _ = Describe("lockctl run", func() {
	It("returns the command's exit code, gives it the token, and releases the claim", func() {
		ns := newNamespace()
		newLock(ns, "report")
		out := filepath.Join(GinkgoT().TempDir(), "seen")
		code, _, stderr := run(nil, "run", "--lock", "report", "-n", ns, "--",
			"sh", "-c", `echo "$LOCKWARDEN_FENCING_TOKEN $LOCKWARDEN_LOCK" > `+out+`; exit 7`)
		Expect(code).To(Equal(7), stderr)
		seen, err := os.ReadFile(out)
		Expect(err).NotTo(HaveOccurred())
		fields := strings.Fields(string(seen))
		Expect(fields).To(HaveLen(2))
		Expect(strconv.ParseInt(fields[0], 10, 64)).To(BeNumerically(">", 0))
		Expect(fields[1]).To(Equal("report"))
		Expect(claims(ns)).To(BeEmpty(), "the claim is released when the command ends")

		// In a pod the claim is the pod's, so that it goes with the pod.
		p := newPod(ns, "job-1")
		code, _, stderr = run(podEnv(p), "run", "--lock", "report", "--", "sh", "-c",
			"test -n \"$LOCKWARDEN_CLAIM\" && exit 0")
		Expect(code).To(Equal(0), stderr)
		Expect(claims(ns)).To(BeEmpty())
	})

	It("holds several locks together, gives the command each one's token, and releases them all", func() {
		ns := newNamespace()
		newLock(ns, "staging")
		newLock(ns, "prod")
		out := filepath.Join(GinkgoT().TempDir(), "seen")
		tokens := filepath.Join(GinkgoT().TempDir(), "tokens")
		code, stdout, stderr := run(nil, "run", "--lock", "staging", "--lock", "prod", "-n", ns, "--token-file", tokens, "--",
			"sh", "-c", `echo "$LOCKWARDEN_FENCING_TOKENS $LOCKWARDEN_LOCK" > `+out)
		Expect(code).To(Equal(0), stderr)
		Expect(stdout).To(BeEmpty())
		seen, err := os.ReadFile(out)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(seen)).To(MatchRegexp(`^prod=[1-9][0-9]*,staging=[1-9][0-9]* prod,staging\n$`))
		file, err := os.ReadFile(tokens)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(file)).To(MatchRegexp(`^prod=[1-9][0-9]*\nstaging=[1-9][0-9]*\n$`))
		Expect(claims(ns)).To(BeEmpty(), "the claim is released when the command ends")

		// In a pod: acquire, as an init container would, and release by the same locks.
		p := newPod(ns, "deploy-1")
		code, stdout, stderr = run(podEnv(p), "acquire", "--lock", "staging,prod")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(MatchRegexp(`acquired lock "prod,staging" in namespace "%s": holder=deploy-1 tokens=prod:[1-9][0-9]*,staging:[1-9][0-9]* `, ns))
		code, stdout, stderr = run(nil, "status", "prod", "-n", ns)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(MatchRegexp(`1\. pod deploy-1 \(claim [^)]*\), Exclusive, token [1-9][0-9]*, acquired [^\n]*, together with staging`))
		code, stdout, stderr = run(podEnv(p), "release", "--lock", "prod", "--lock", "staging")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(ContainSubstring("released claim"))
		Expect(claims(ns)).To(BeEmpty())
	})

	It("stops the command with TERM and exits 123 when the lock is lost", func() {
		ns := newNamespace()
		newLock(ns, "report")
		dir := GinkgoT().TempDir()
		startedFile, termFile := filepath.Join(dir, "started"), filepath.Join(dir, "term")
		proc := start(nil, "run", "--lock", "report", "-n", ns, "--grace", "5s", "--",
			"sh", "-c", `trap 'echo term > `+termFile+`; exit 0' TERM; touch `+startedFile+`; while :; do sleep 0.1; done`)
		Eventually(func() error { _, err := os.Stat(startedFile); return err }).Should(Succeed())

		// Someone deletes the claim: the lock is released under the command's feet.
		list := claims(ns)
		Expect(list).To(HaveLen(1))
		Expect(k8sClient.Delete(ctx(), &list[0])).To(Succeed())

		Expect(proc.wait(30 * time.Second)).To(Equal(runLockLost))
		Expect(os.ReadFile(termFile)).To(Equal([]byte("term\n")))
		Expect(proc.stderr()).To(MatchRegexp(`(?m)^lockctl: lost lock "report": claim "report-\w+" in namespace "` + ns + `" .*; its fencing token is stale; the command was stopped$`))
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(BeEmpty())
	})

	It("stops the command with TERM and exits 123 when, cut off from the API server, it sees no renewal", func() {
		ns := newNamespace()
		newLock(ns, "report") // a lease of 6 s
		u, err := url.Parse(controlPlane.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		proxy, err := faultproxy.New(u.Host)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = proxy.Close() }()
		proxied := rest.CopyConfig(controlPlane.Config)
		proxied.Host = "https://" + proxy.Addr()
		dir := GinkgoT().TempDir()
		viaProxy := writeKubeconfig(proxied, filepath.Join(dir, "kubeconfig"))
		startedFile, termFile := filepath.Join(dir, "started"), filepath.Join(dir, "term")
		proc := start([]string{"KUBECONFIG=" + viaProxy}, "run", "--lock", "report", "-n", ns, "--grace", "5s", "--",
			"sh", "-c", `trap 'echo term > `+termFile+`; exit 0' TERM; touch `+startedFile+`; while :; do sleep 0.1; done`)
		Eventually(func() error { _, err := os.Stat(startedFile); return err }).Should(Succeed())

		proxy.Partition(faultproxy.Blackhole)
		cut := time.Now()
		list := claims(ns)
		Expect(list).To(HaveLen(1))
		lastExpire := list[0].Status.ExpireTime.Time // the latest lockctl can have seen
		Eventually(func() ([]byte, error) { return os.ReadFile(termFile) }, 10*time.Second).Should(Equal([]byte("term\n")))
		info, err := os.Stat(termFile)
		Expect(err).NotTo(HaveOccurred())
		stopped := info.ModTime() // when the command handled TERM
		Expect(stopped).To(BeTemporally("<", lastExpire), "TERM came %s after the cut", stopped.Sub(cut))
		// The controller still renews the claim: lockctl stopped out of caution.
		Expect(claims(ns)).To(ConsistOf(HaveField("Status.Phase", locksv1alpha1.ClaimHeld)))

		proxy.Heal() // so that lockctl's release goes through
		Expect(proc.wait(30 * time.Second)).To(Equal(runLockLost))
		Expect(proc.stderr()).To(MatchRegexp(`(?m)^lockctl: lost lock "report": claim "report-\w+" in namespace "` + ns + `": no renewal .*; its fencing token may be stale; the command was stopped \(is the API server reachable from here\?\)$`))
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(BeEmpty())
	})

	It("exits 124 when --timeout passes before the command can start, and leaves no claim", func() {
		ns := newNamespace()
		newLock(ns, "report")
		holder := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "report"}}
		Expect(k8sClient.Create(ctx(), holder)).To(Succeed())
		Eventually(func(g Gomega) locksv1alpha1.ClaimPhase {
			g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(holder), holder)).To(Succeed())
			return holder.Status.Phase
		}).Should(Equal(locksv1alpha1.ClaimHeld))

		marker := filepath.Join(GinkgoT().TempDir(), "ran")
		code, _, stderr := run(nil, "run", "--lock", "report", "-n", ns, "--timeout", "1s", "--", "touch", marker)
		Expect(code).To(Equal(runTimedOut))
		Expect(oneLine(stderr)).To(HavePrefix(`lockctl: timed out waiting for lock "report"`))
		Expect(marker).NotTo(BeAnExistingFile())
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(HaveLen(1))
	})
})
