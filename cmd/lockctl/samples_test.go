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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// samples reads the objects of a file in config/samples/pods.
func samples(file string) []*unstructured.Unstructured {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "pods", file))
	Expect(err).NotTo(HaveOccurred())
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

// applySamples creates a sample file's objects in ns (dry run only, if dryRun).
func applySamples(ns, file string, dryRun bool) {
	GinkgoHelper()
	for _, u := range samples(file) {
		u.SetNamespace(ns)
		if u.GetKind() == "RoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			Expect(unstructured.SetNestedSlice(u.Object, subjects, "subjects")).To(Succeed())
		}
		var opts []client.CreateOption
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		Expect(k8sClient.Create(ctx(), u, opts...)).To(Succeed(), "%s: %s %s", file, u.GetKind(), u.GetName())
	}
}

var _ = Describe("The lockctl samples", func() {
	It("are accepted by the API server", func() {
		ns := newNamespace()
		for _, file := range []string{"init-container-migration.yaml", "cronjob-lockctl-run.yaml", "kubectl-wait-claim.yaml", "lockctl-rbac.yaml", "lockctl-run-rbac.yaml", "heartbeat-claim.yaml",
			"gated-deployment.yaml", "gated-job.yaml", "semaphore-job.yaml", "read-write-lock.yaml", "leader-election.yaml", "priority-hotfix.yaml", "two-environments.yaml"} {
			applySamples(ns, file, true)
		}
	})

	It("grant a workload's service account all that lockctl needs", func() {
		ns := newNamespace()
		applySamples(ns, "lockctl-rbac.yaml", false)
		newLock(ns, "db-migrate")
		web1, web2 := newPod(ns, "web-1"), newPod(ns, "web-2")
		as := []string{"--as", "system:serviceaccount:" + ns + ":web"}

		code, _, stderr := run(podEnv(web1), append([]string{"acquire", "--lock", "db-migrate"}, as...)...)
		Expect(code).To(Equal(exitOK), stderr)
		code, _, stderr = run(podEnv(web1), append([]string{"status", "db-migrate"}, as...)...)
		Expect(code).To(Equal(exitOK), stderr)
		waiter := start(podEnv(web2), append([]string{"run", "--lock", "db-migrate", "--", "true"}, as...)...)
		code, _, stderr = run(podEnv(web1), append([]string{"release", "--lock", "db-migrate"}, as...)...)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(waiter.wait(30*time.Second)).To(Equal(exitOK), waiter.stderr())

		// The Role lists locks too (lockctl watches its lock while it waits).
		code, stdout, stderr := run(nil, append([]string{"status", "-n", ns}, as...)...)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stdout).To(ContainSubstring("db-migrate"))
	})

	It("grant an account outside the cluster all that lockctl run needs, heartbeat included", func() {
		ns := newNamespace()
		applySamples(ns, "lockctl-run-rbac.yaml", false)
		newLock(ns, "db-migrate")
		as := []string{"--as", "system:serviceaccount:" + ns + ":ci-runner", "-n", ns}
		code, _, stderr := run(nil, append([]string{"run", "--lock", "db-migrate", "--heartbeat", "3s"}, append(as, "--", "true")...)...)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(stderr).NotTo(ContainSubstring("forbidden"))
	})

	It("still work with the Role of an earlier release, which gets locks but cannot watch them", func() {
		ns := newNamespace()
		applySamples(ns, "lockctl-rbac.yaml", false)
		role := &rbacv1.Role{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "lockctl"}, role)).To(Succeed())
		for i, rule := range role.Rules {
			if slices.Contains(rule.Resources, "distributedlocks") {
				role.Rules[i].Verbs = []string{"get"}
			}
		}
		Expect(k8sClient.Update(ctx(), role)).To(Succeed())
		newLock(ns, "db-migrate")
		web1, web2 := newPod(ns, "web-1"), newPod(ns, "web-2")
		as := []string{"--as", "system:serviceaccount:" + ns + ":web"}

		code, _, stderr := run(podEnv(web1), append([]string{"acquire", "--lock", "db-migrate"}, as...)...)
		Expect(code).To(Equal(exitOK), stderr)
		waiter := start(podEnv(web2), append([]string{"run", "--lock", "db-migrate", "--", "true"}, as...)...)
		code, _, stderr = run(podEnv(web1), append([]string{"release", "--lock", "db-migrate"}, as...)...)
		Expect(code).To(Equal(exitOK), stderr)
		Expect(waiter.wait(30*time.Second)).To(Equal(exitOK), waiter.stderr())
	})
})
