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
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/creack/pty"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// holdLock makes a detached claim by hand that holds lock, and returns it once it does.
func holdLock(ns, lock string) *locksv1alpha1.LockClaim {
	GinkgoHelper()
	holder := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"},
		Spec: locksv1alpha1.LockClaimSpec{LockName: lock}}
	Expect(k8sClient.Create(ctx(), holder)).To(Succeed())
	Eventually(func(g Gomega) locksv1alpha1.ClaimPhase {
		g.Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(holder), holder)).To(Succeed())
		return holder.Status.Phase
	}).Should(Equal(locksv1alpha1.ClaimHeld))
	return holder
}

// queuedClaim waits until ns has a Pending claim other than the holder's, and returns its name.
func queuedClaim(ns string) string {
	GinkgoHelper()
	var name string
	Eventually(func(g Gomega) {
		var pending []string
		for _, c := range claims(ns) {
			if c.Name != "holder" && c.Status.Phase == locksv1alpha1.ClaimPending {
				pending = append(pending, c.Name)
			}
		}
		g.Expect(pending).To(HaveLen(1))
		name = pending[0]
	}).Should(Succeed())
	return name
}

var _ = Describe("lockctl acquire --try", func() {
	It("takes a free lock, and exits 5 without queueing when it is taken", func() {
		ns := newNamespace()
		newLock(ns, "db-migrate")
		p1, p2 := newPod(ns, "web-1"), newPod(ns, "web-2")
		code, stdout, stderr := run(podEnv(p1), "acquire", "--lock", "db-migrate", "--try")
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(HavePrefix(`acquired lock "db-migrate" in namespace "` + ns + `": holder=web-1 token=`))

		code, stdout, stderr = run(podEnv(p2), "acquire", "--lock", "db-migrate", "--try")
		Expect(code).To(Equal(exitBusy))
		Expect(stdout).To(BeEmpty())
		Expect(oneLine(stderr)).To(MatchRegexp(`^lockctl: lock "db-migrate" in namespace "` + ns +
			`" is busy \(held by claim web-1-db-migrate-\w+\); try again later, or see who holds it: lockctl status db-migrate -n ` + ns + `$`))
		Expect(claims(ns)).To(HaveLen(1), "the busy try left no claim")
	})
})

var _ = Describe("lockctl run exit codes", func() {
	It("exits 121 with --try on a taken lock, without running the command, and runs it on a free one", func() {
		ns := newNamespace()
		newLock(ns, "report")
		holder := holdLock(ns, "report")
		marker := filepath.Join(GinkgoT().TempDir(), "ran")

		code, _, stderr := run(nil, "run", "--lock", "report", "-n", ns, "--try", "--", "touch", marker)
		Expect(code).To(Equal(runBusy))
		Expect(oneLine(stderr)).To(HavePrefix(`lockctl: lock "report" in namespace "` + ns + `" is busy (held by claim holder)`))
		Expect(marker).NotTo(BeAnExistingFile())
		Expect(claims(ns)).To(HaveLen(1))

		Expect(k8sClient.Delete(ctx(), holder)).To(Succeed())
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(BeEmpty())
		code, _, stderr = run(nil, "run", "--lock", "report", "-n", ns, "--try", "--", "sh", "-c", "touch "+marker+"; exit 3")
		Expect(code).To(Equal(3), stderr)
		Expect(marker).To(BeAnExistingFile())
	})

	It("exits 122 when the lock does not exist", func() {
		ns := newNamespace()
		code, _, stderr := run(nil, "run", "--lock", "nope", "-n", ns, "--", "true")
		Expect(code).To(Equal(runClaimFailed))
		Expect(oneLine(stderr)).To(Equal(`lockctl: lock "nope" not found in namespace "` + ns + `"; create the DistributedLock or fix --lock`))
	})

	It("exits 126 and releases the lock when the command cannot be executed", func() {
		ns := newNamespace()
		newLock(ns, "report")
		notAProgram := filepath.Join(GinkgoT().TempDir(), "not-a-program")
		Expect(os.WriteFile(notAProgram, []byte("this is not a program\n"), 0o755)).To(Succeed())
		code, _, stderr := run(nil, "run", "--lock", "report", "-n", ns, "--", notAProgram)
		Expect(code).To(Equal(runCannotExecute))
		Expect(stderr).To(HaveSuffix(`lockctl: cannot execute "` + notAProgram + `": exec format error; check the file's permissions and interpreter line` + "\n"))
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(BeEmpty())
	})

	It("exits 127 without queueing when the command does not exist", func() {
		ns := newNamespace()
		newLock(ns, "report")
		holdLock(ns, "report")
		code, _, stderr := run(nil, "run", "--lock", "report", "-n", ns, "--", "no-such-command-lockctl")
		Expect(code).To(Equal(runCommandMissing))
		Expect(oneLine(stderr)).To(Equal(`lockctl: command "no-such-command-lockctl" not found in PATH; check the command's name and PATH`))
		Expect(claims(ns)).To(HaveLen(1))
	})
})

var _ = Describe("lockctl run signalled while it waits", func() {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
		It("withdraws its claim on "+signalName(sig)+" and exits 128+N", func() {
			ns := newNamespace()
			newLock(ns, "report")
			holder := holdLock(ns, "report")
			marker := filepath.Join(GinkgoT().TempDir(), "ran")
			proc := start(nil, "run", "--lock", "report", "-n", ns, "--", "touch", marker)
			queuedClaim(ns)

			proc.Signal(sig)
			Expect(proc.wait(30 * time.Second)).To(Equal(128 + int(sig)))
			Expect(oneLine(proc.stderr())).To(Equal(`lockctl: interrupted by ` + signalName(sig) + ` while waiting for lock "report"; the claim was withdrawn`))
			Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(HaveLen(1), "only the holder's claim is left")

			// Nothing is granted to the process that left: the lock is free once the holder goes.
			Expect(k8sClient.Delete(ctx(), holder)).To(Succeed())
			Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(BeEmpty())
			Expect(marker).NotTo(BeAnExistingFile())
		})
	}

	It("withdraws a pod's claim on SIGHUP too, in run and in acquire", func() {
		ns := newNamespace()
		newLock(ns, "report")
		holdLock(ns, "report")
		p := newPod(ns, "job-1")

		proc := start(podEnv(p), "run", "--lock", "report", "--", "true")
		queuedClaim(ns)
		proc.Signal(syscall.SIGHUP)
		Expect(proc.wait(30 * time.Second)).To(Equal(128 + int(syscall.SIGHUP)))
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(HaveLen(1))

		proc = start(podEnv(p), "acquire", "--lock", "report")
		queuedClaim(ns)
		proc.Signal(syscall.SIGHUP)
		Expect(proc.wait(30 * time.Second)).To(Equal(exitError))
		Expect(oneLine(proc.stderr())).To(Equal("lockctl: interrupted by a signal"))
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(HaveLen(1))
	})
})

var _ = Describe("lockctl run's command and the terminal", func() {
	// The command's process ID and process group, as the command sees them.
	const showGroup = `read -r pid comm state ppid pgrp rest < /proc/$$/stat; echo "pid=$pid pgrp=$pgrp"`

	It("gets a process group of its own without a controlling terminal", func() {
		ns := newNamespace()
		newLock(ns, "report")
		cmd := lockctl(nil, "run", "--lock", "report", "-n", ns, "--", "sh", "-c", showGroup)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // a new session: no controlling terminal
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session, 60*time.Second).Should(gexec.Exit(0))
		var pid, pgrp int
		Expect(scan(string(session.Out.Contents()), &pid, &pgrp)).To(Succeed())
		Expect(pgrp).To(Equal(pid), "the command leads its own group")
		Expect(pgrp).NotTo(Equal(cmd.Process.Pid))
	})

	It("stays in lockctl's foreground process group on a terminal, and can read from it", func() {
		ns := newNamespace()
		newLock(ns, "report")
		cmd := lockctl(nil, "run", "--lock", "report", "-n", ns, "--", "sh", "-c", showGroup+`; read -r line; echo "read:$line"`)
		// lockctl leads a new session whose controlling terminal is the pty, in its foreground.
		terminal, err := pty.Start(cmd)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			// lockctl leads its session and process group: on a failure, nothing outlives the test.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = terminal.Close()
		})
		out := gbytes.NewBuffer()
		go func() { _, _ = io.Copy(io.MultiWriter(out, GinkgoWriter), terminal) }()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()

		Eventually(out, 60*time.Second).Should(gbytes.Say(`pid=(\d+) pgrp=(\d+)`))
		var pid, pgrp int
		Expect(scan(string(out.Contents()), &pid, &pgrp)).To(Succeed())
		Expect(pgrp).To(Equal(cmd.Process.Pid), "the command is in lockctl's process group")
		Expect(pid).NotTo(Equal(cmd.Process.Pid))

		// In a background group, this read would stop the command with SIGTTIN.
		_, err = terminal.Write([]byte("hello\n"))
		Expect(err).NotTo(HaveOccurred())
		Eventually(out, 10*time.Second).Should(gbytes.Say(`read:hello`))
		var waitErr error
		Eventually(exited, 30*time.Second).Should(Receive(&waitErr))
		Expect(waitErr).NotTo(HaveOccurred())
		Eventually(func() []locksv1alpha1.LockClaim { return claims(ns) }).Should(BeEmpty())
	})
})

var pidLine = regexp.MustCompile(`pid=(\d+) pgrp=(\d+)`)

// scan reads "pid=N pgrp=M" from s.
func scan(s string, pid, pgrp *int) error {
	m := pidLine.FindStringSubmatch(s)
	if m == nil {
		return io.ErrUnexpectedEOF
	}
	var err error
	if *pid, err = strconv.Atoi(m[1]); err != nil {
		return err
	}
	*pgrp, err = strconv.Atoi(m[2])
	return err
}

// heartbeats lists the heartbeat Leases of a namespace.
func heartbeats(ns string) []coordinationv1.Lease {
	GinkgoHelper()
	list := &coordinationv1.LeaseList{}
	Expect(k8sClient.List(ctx(), list, client.InNamespace(ns), client.MatchingLabels{locksv1alpha1.HeartbeatLabel: "true"})).To(Succeed())
	return list.Items
}

// heldClaim waits until ns has a Held claim and returns it.
func heldClaim(ns string) locksv1alpha1.LockClaim {
	GinkgoHelper()
	var held locksv1alpha1.LockClaim
	Eventually(func(g Gomega) {
		var found []locksv1alpha1.LockClaim
		for _, c := range claims(ns) {
			if c.Status.Phase == locksv1alpha1.ClaimHeld {
				found = append(found, c)
			}
		}
		g.Expect(found).To(HaveLen(1))
		held = found[0]
	}).Should(Succeed())
	return held
}

var _ = Describe("lockctl run's heartbeat outside a pod", func() {
	It("holds the lock with a heartbeat Lease named after its claim, and deletes both when the command ends", func() {
		ns := newNamespace()
		newLock(ns, "report")
		done := filepath.Join(GinkgoT().TempDir(), "done")
		proc := start(nil, "run", "--lock", "report", "-n", ns, "--", "sh", "-c", "while [ ! -e "+done+" ]; do sleep 0.1; done")
		claim := heldClaim(ns)
		Expect(claim.Spec.Holder).NotTo(BeNil())
		Expect(claim.Spec.Holder.LeaseName).To(Equal(claim.Name))
		leases := heartbeats(ns)
		Expect(leases).To(HaveLen(1))
		Expect(leases[0].Name).To(Equal(claim.Name))
		Expect(*leases[0].Spec.LeaseDurationSeconds).To(Equal(int32(15)), "--heartbeat defaults to 15s")

		Expect(os.WriteFile(done, nil, 0o644)).To(Succeed())
		Expect(proc.wait(30 * time.Second)).To(Equal(0))
		Expect(claims(ns)).To(BeEmpty())
		Expect(heartbeats(ns)).To(BeEmpty())
	})

	It("makes no heartbeat with --heartbeat 0", func() {
		ns := newNamespace()
		newLock(ns, "report")
		done := filepath.Join(GinkgoT().TempDir(), "done")
		proc := start(nil, "run", "--lock", "report", "-n", ns, "--heartbeat", "0", "--", "sh", "-c", "while [ ! -e "+done+" ]; do sleep 0.1; done")
		claim := heldClaim(ns)
		Expect(claim.Spec.Holder).To(BeNil())
		Expect(heartbeats(ns)).To(BeEmpty())
		Expect(os.WriteFile(done, nil, 0o644)).To(Succeed())
		Expect(proc.wait(30 * time.Second)).To(Equal(0))
	})

	It("after SIGKILL of lockctl, grants the lock to the next claimant within the heartbeat's duration", func() {
		ns := newNamespace()
		newLock(ns, "report")
		pidFile := filepath.Join(GinkgoT().TempDir(), "pid")
		first := start(nil, "run", "--lock", "report", "-n", ns, "--heartbeat", "3s", "--",
			"sh", "-c", "echo $$ > "+pidFile+"; exec sleep 300")
		DeferCleanup(func() {
			// The command outlives lockctl's SIGKILL, as it would on a real machine.
			if b, err := os.ReadFile(pidFile); err == nil {
				if pid, err := strconv.Atoi(string(b[:len(b)-1])); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
		killed := heldClaim(ns)
		marker := filepath.Join(GinkgoT().TempDir(), "ran")
		second := start(nil, "run", "--lock", "report", "-n", ns, "--heartbeat", "3s", "--", "touch", marker)
		queuedClaim2 := func(g Gomega) string {
			for _, c := range claims(ns) {
				if c.Name != killed.Name && c.Status.Phase == locksv1alpha1.ClaimPending {
					return c.Name
				}
			}
			g.Expect("a queued claim").To(BeEmpty())
			return ""
		}
		Eventually(queuedClaim2).ShouldNot(BeEmpty())
		// Held, renewed: well past the heartbeat's duration, the second waits.
		Consistently(func() bool { _, err := os.Stat(marker); return err == nil }, 4*time.Second).Should(BeFalse())

		// (Its command keeps lockctl's output open, so the session does not see it exit.)
		first.Signal(syscall.SIGKILL)
		killedAt := time.Now()
		Eventually(func() bool { _, err := os.Stat(marker); return err == nil }, 3*time.Second+1500*time.Millisecond, 20*time.Millisecond).
			Should(BeTrue(), "the next claimant was not granted within the heartbeat's 3s (and a pass's latency)")
		GinkgoWriter.Printf("granted %s after SIGKILL\n", time.Since(killedAt))
		Expect(second.wait(30 * time.Second)).To(Equal(0))

		released := &locksv1alpha1.LockClaim{}
		Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(&killed), released)).To(Succeed())
		Expect(released.Status.Phase).To(Equal(locksv1alpha1.ClaimReleased))
		Expect(meta.FindStatusCondition(released.Status.Conditions, locksv1alpha1.ConditionAcquired).Message).To(Equal(
			"Released: heartbeat Lease " + killed.Name + " in namespace " + ns + " was not renewed for 3s"))
	})
})
