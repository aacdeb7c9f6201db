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

// Package workloads_test runs the controller against Tekton PipelineRuns and TaskRuns and Argo
// Workflows: their CRDs from their own Go modules (workloadcrds), no Tekton or Argo controller
// (the specs write the objects' status as those controllers would), and the manager running as a
// ServiceAccount with the shipped RBAC plus exactly the rules the chart adds for these kinds
// (workloads.tekton and workloads.argoWorkflows), so that a verb the chart forgot fails a spec.
package workloads_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
	"github.com/lockwarden/lockwarden/internal/testutil/workloadcrds"
)

const controllerNamespace = "lockwarden-system"

var (
	account      = rbacenv.Account{Name: "lockwarden", Namespace: controllerNamespace, ElectionNamespace: "lockwarden-election"}
	controlPlane *lockenv.ControlPlane
	k8sClient    client.Client
	manager      *lockenv.Manager
	refusals     = &rbacenv.Refusals{}
	refusalsSeen int
)

func TestWorkloadKinds(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Workload kinds suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	crds, err := workloadcrds.Load()
	Expect(err).NotTo(HaveOccurred())
	root := filepath.Join("..", "..")
	controlPlane, err = lockenv.StartControlPlaneWith(root, lockenv.ControlPlaneOptions{CRDs: crds}, controllerNamespace)
	Expect(err).NotTo(HaveOccurred())
	k8sClient = controlPlane.Client

	objs, grants, err := rbacenv.Load(filepath.Join(root, "config", "rbac"), account)
	Expect(err).NotTo(HaveOccurred())
	role := chartWorkloadRole(root)
	objs = append(objs, role, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account.Name, Namespace: account.Namespace}},
	})
	grants = append(grants, rbacenv.Grant{Role: "ClusterRole " + role.Name, Rules: role.Rules})
	Expect(rbacenv.Install(context.Background(), k8sClient, account, objs, grants)).To(Succeed())

	manager, err = lockenv.StartManager(refusals.As(controlPlane.Config, account), lockenv.ManagerOptions{
		Namespace:     controllerNamespace,
		WorkloadKinds: "batch/v1/Job,tekton.dev/v1/PipelineRun,tekton.dev/v1/TaskRun,argoproj.io/v1alpha1/Workflow",
	})
	Expect(err).NotTo(HaveOccurred())
})

// Each spec fails if the manager was refused a request while it ran.
var _ = AfterEach(func() {
	all := refusals.List()
	fresh := all[refusalsSeen:]
	refusalsSeen = len(all)
	Expect(fresh).To(BeEmpty(), "the API server refused these requests of the manager (config/rbac plus the chart's workload rules)")
})

var _ = AfterSuite(func() {
	if manager != nil {
		Expect(manager.Stop()).To(Succeed())
	}
	if controlPlane != nil {
		Expect(controlPlane.Stop()).To(Succeed())
	}
})

// chartWorkloadRole is a ClusterRole of the rules the chart's manager ClusterRole gains with
// workloads.tekton and workloads.argoWorkflows: those on tekton.dev and argoproj.io.
func chartWorkloadRole(root string) *rbacv1.ClusterRole {
	GinkgoHelper()
	binDir, err := exec.Command(filepath.Join(root, "hack", "k8s-binaries.sh"), "bin-dir").Output()
	Expect(err).NotTo(HaveOccurred(), "hack/k8s-binaries.sh bin-dir (make test-unit builds the binaries first)")
	out, err := exec.Command(filepath.Join(strings.TrimSpace(string(binDir)), "helm"), "template", "lw", filepath.Join(root, "charts", "lockwarden"),
		"--namespace", controllerNamespace, "--set", "workloads.tekton=true", "--set", "workloads.argoWorkflows=true",
		"--show-only", "templates/rbac.yaml").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "helm template: %s", out)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "lockwarden-workload-kinds"}}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var cr rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &cr); err != nil || cr.Kind != "ClusterRole" || cr.Name != "lw-lockwarden-manager" {
			continue
		}
		for _, r := range cr.Rules {
			if len(r.APIGroups) == 1 && (r.APIGroups[0] == "tekton.dev" || r.APIGroups[0] == "argoproj.io") {
				role.Rules = append(role.Rules, r)
			}
		}
	}
	Expect(role.Rules).NotTo(BeEmpty(), "the chart rendered no rules on tekton.dev or argoproj.io")
	return role
}

// ctx is a context for one API call.
func ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	DeferCleanup(cancel)
	return c
}
