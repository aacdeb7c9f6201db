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

// Package rbac proves that the manager's RBAC (config/rbac, which the Helm chart copies) grants
// exactly what the manager uses. It starts a control plane (envtest's kube-apiserver and etcd)
// whose audit log records every request, installs the shipped roles and bindings for a
// ServiceAccount, and runs the manager in-process as that account (its client impersonates it)
// through a whole story on every kind. Then the audit log must show no request of the account
// refused, and every verb the roles grant used at least once.
package rbac

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"

	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

const (
	// systemNamespace is the controller's namespace (--secret-namespace): the Secrets that
	// LockBackends name and the built-in backend's Leases, under the namespace Role.
	systemNamespace = "lockwarden-system"
	// electionNamespace holds the leader election Lease (--leader-election-namespace).
	electionNamespace = "lockwarden-election"
	// serviceAccount is the manager's account, as the chart names it.
	serviceAccount = "lockwarden"
	// accountUser is the user name the API server gives serviceAccount.
	accountUser = "system:serviceaccount:" + systemNamespace + ":" + serviceAccount

	repoRoot = "../.."
)

// account is the manager's ServiceAccount and where its roles go.
var account = rbacenv.Account{Name: serviceAccount, Namespace: systemNamespace, ElectionNamespace: electionNamespace}

// grant is one role bound to the manager's account.
type grant = rbacenv.Grant

// TestManagerRBAC runs the story under the shipped RBAC, then checks the audit log both ways.
func TestManagerRBAC(t *testing.T) {
	objs, grants, err := rbacenv.Load(filepath.Join(repoRoot, "config", "rbac"), account)
	if err != nil {
		t.Fatalf("Loading config/rbac: %v", err)
	}
	// The manager's informers list, then watch, as they do against an API server that cannot
	// stream lists: the most the cache asks for. Streaming (client-go's default where the server
	// can) needs watch alone, so this run proves the larger set of verbs used and sufficient.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := lockenv.StartControlPlaneWith(repoRoot, lockenv.ControlPlaneOptions{APIServerFlags: map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    auditLog,
	}}, systemNamespace, electionNamespace)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cp.Stop()
		}
	})

	storyErr := runStory(t, cp, objs, grants)
	// Stopping the API server ends every watch, so that the log is complete when it is read.
	stopped = true
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stopping the control plane: %v", err)
	}
	all, err := readAudit(auditLog)
	if err != nil {
		t.Fatalf("Reading the audit log: %v", err)
	}
	events := by(all, accountUser)
	if len(events) == 0 {
		t.Fatalf("The audit log has no request made as %s (of %d in all): the checks below would prove nothing", accountUser, len(all))
	}
	if storyErr != nil {
		t.Errorf("The story stopped before its end, so the checks below saw only part of it:\n%v", storyErr)
	}

	t.Run("NoRequestIsForbidden", func(t *testing.T) {
		if refused := forbidden(events); len(refused) > 0 {
			t.Errorf("The manager's account was refused %d request(s); grant what the code needs (the +kubebuilder:rbac markers in internal/controller, or config/rbac):\n  %s",
				len(refused), strings.Join(refused, "\n  "))
		}
	})
	t.Run("EveryGrantedVerbIsUsed", func(t *testing.T) {
		if idle := unused(grants, accesses(events)); len(idle) > 0 {
			t.Errorf("The manager's roles grant %d verb(s) that it never used in the story; remove them, or extend the story if the code does need them:\n  %s",
				len(idle), strings.Join(idle, "\n  "))
		}
	})
}
