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

// Package rbacenv installs the manager's shipped RBAC (config/rbac, which the Helm chart copies)
// for a ServiceAccount in a test's API server, and gives the manager a client that acts as that
// account and records every request the API server refuses. test/rbac runs its story under it and
// checks the audit log both ways; the controller suite runs every spec under it, so that a verb
// the code sends and the roles lack fails a test rather than a user.
package rbacenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The kustomize placeholders config/rbac binds its roles to; config/default renames them, the
// chart binds the same rules to its own ServiceAccount, and the tests to their Account.
const (
	placeholderAccount   = "controller-manager"
	placeholderNamespace = "system"
)

// Account is the manager's ServiceAccount in a test, and where its namespaced roles go.
type Account struct {
	// Name is the ServiceAccount's name.
	Name string
	// Namespace is the controller's namespace (--secret-namespace): the ServiceAccount, the
	// Secrets that LockBackends name and the built-in backend's Leases, under the namespace Role.
	Namespace string
	// ElectionNamespace holds the leader election Role. A namespace of its own, so that neither
	// Role's Lease rules can pass for the other's.
	ElectionNamespace string
}

// User is the user name the API server gives the account.
func (a Account) User() string { return "system:serviceaccount:" + a.Namespace + ":" + a.Name }

// Groups are the groups the API server puts the account in.
func (a Account) Groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + a.Namespace, "system:authenticated"}
}

// controllerRBAC lists the files of config/rbac that give the manager its permissions, each with
// the namespace the account puts it in (empty for cluster-scoped objects).
func (a Account) controllerRBAC() []struct{ file, namespace string } {
	return []struct{ file, namespace string }{
		{"role.yaml", ""},
		{"role_binding.yaml", ""},
		{"namespace_role.yaml", a.Namespace},
		{"namespace_role_binding.yaml", a.Namespace},
		{"leader_election_role.yaml", a.ElectionNamespace},
		{"leader_election_role_binding.yaml", a.ElectionNamespace},
	}
}

// Grant is one role bound to the manager's account: its rules and where they apply.
type Grant struct {
	// Role names the role in messages, e.g. "ClusterRole manager-role".
	Role string
	// Namespace is where the rules apply; empty for a ClusterRole bound cluster-wide.
	Namespace string
	// Rules are the role's rules as config/rbac has them.
	Rules []rbacv1.PolicyRule
}

// Load reads the controller's RBAC files under dir (config/rbac), moves their namespaced objects
// to the account's namespaces and their subjects to the account. It returns the objects to create
// and the grants the bindings make. The rules are never re-typed: what is tested is what ships.
func Load(dir string, a Account) ([]client.Object, []Grant, error) {
	var objs []client.Object
	roles := map[string]Grant{} // by kind/namespace/name
	type ref struct{ key, binding string }
	var bound []ref
	for _, f := range a.controllerRBAC() {
		docs, err := YAMLDocuments(filepath.Join(dir, f.file))
		if err != nil {
			return nil, nil, err
		}
		for _, doc := range docs {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f.file, err)
			}
			var obj client.Object
			switch meta.Kind {
			case "ClusterRole":
				r := &rbacv1.ClusterRole{}
				obj = r
				if err := yaml.UnmarshalStrict(doc, r); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", f.file, err)
				}
				roles["ClusterRole//"+r.Name] = Grant{Role: "ClusterRole " + r.Name, Rules: r.Rules}
			case "Role":
				r := &rbacv1.Role{}
				obj = r
				if err := yaml.UnmarshalStrict(doc, r); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", f.file, err)
				}
				r.Namespace = f.namespace
				roles["Role/"+r.Namespace+"/"+r.Name] = Grant{Role: "Role " + r.Namespace + "/" + r.Name, Namespace: r.Namespace, Rules: r.Rules}
			case "ClusterRoleBinding":
				b := &rbacv1.ClusterRoleBinding{}
				obj = b
				if err := yaml.UnmarshalStrict(doc, b); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", f.file, err)
				}
				if err := a.bind(b.Subjects); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", f.file, err)
				}
				bound = append(bound, ref{b.RoleRef.Kind + "//" + b.RoleRef.Name, "ClusterRoleBinding " + b.Name})
			case "RoleBinding":
				b := &rbacv1.RoleBinding{}
				obj = b
				if err := yaml.UnmarshalStrict(doc, b); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", f.file, err)
				}
				b.Namespace = f.namespace
				if err := a.bind(b.Subjects); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", f.file, err)
				}
				if b.RoleRef.Kind != "Role" {
					return nil, nil, fmt.Errorf("%s: RoleBinding %s refers to a %s; the test handles Roles only", f.file, b.Name, b.RoleRef.Kind)
				}
				bound = append(bound, ref{"Role/" + b.Namespace + "/" + b.RoleRef.Name, "RoleBinding " + b.Name})
			default:
				return nil, nil, fmt.Errorf("%s: unexpected kind %q", f.file, meta.Kind)
			}
			objs = append(objs, obj)
		}
	}
	var grants []Grant
	for _, b := range bound {
		g, ok := roles[b.key]
		if !ok {
			return nil, nil, fmt.Errorf("%s refers to %s, which none of the files defines in that namespace", b.binding, b.key)
		}
		grants = append(grants, g)
	}
	if len(grants) == 0 {
		return nil, nil, errors.New("no role is bound to the controller's account")
	}
	return objs, grants, nil
}

// bind points the kustomize placeholder subject at the account; any other subject is an error,
// since the test would not know whose grant it is.
func (a Account) bind(subjects []rbacv1.Subject) error {
	if len(subjects) == 0 {
		return errors.New("a binding without subjects")
	}
	for i, s := range subjects {
		if s.Kind != rbacv1.ServiceAccountKind || s.Name != placeholderAccount || s.Namespace != placeholderNamespace {
			return fmt.Errorf("unexpected subject %+v; expected the ServiceAccount %s/%s", s, placeholderNamespace, placeholderAccount)
		}
		subjects[i].Name, subjects[i].Namespace = a.Name, a.Namespace
	}
	return nil
}

// YAMLDocuments splits the YAML file at path into its non-empty documents (comments alone make
// none).
func YAMLDocuments(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

// stripComments drops comment-only lines, so that a document of comments counts as empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}
