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

package rbac

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
)

// auditPolicy logs every request once it is answered, at Metadata level: who, which verb on
// which resource, and the authorizer's decision, without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// The audit annotation in which the authorizer records its decision ("allow" or "forbid").
const decisionAnnotation = "authorization.k8s.io/decision"

// auditEvent is the part of an audit.k8s.io/v1 Event the checks read.
type auditEvent struct {
	AuditID          string `json:"auditID"`
	RequestURI       string `json:"requestURI"`
	Verb             string `json:"verb"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// readAudit parses a JSON-lines audit log.
func readAudit(path string) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var events []auditEvent
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for s.Scan() {
		var e auditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		events = append(events, e)
	}
	return events, s.Err()
}

// by returns the events of requests made as user (through impersonation, as the test's manager
// makes them).
func by(events []auditEvent, user string) []auditEvent {
	var out []auditEvent
	for _, e := range events {
		if e.ImpersonatedUser != nil && e.ImpersonatedUser.Username == user {
			out = append(out, e)
		}
	}
	return out
}

// forbidden describes the requests that were refused (answered 403, or denied by the
// authorizer), in the order first seen; a request repeated (a retry) is one line with a count.
func forbidden(events []auditEvent) []string {
	seen := map[string]bool{} // audit IDs: one request is logged at several stages
	count := map[string]int{}
	var lines []string
	for _, e := range events {
		refused := e.Annotations[decisionAnnotation] == "forbid" || (e.ResponseStatus != nil && e.ResponseStatus.Code == 403)
		if !refused || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		why := e.Annotations["authorization.k8s.io/reason"]
		if e.ResponseStatus != nil && e.ResponseStatus.Message != "" {
			why = e.ResponseStatus.Message
		}
		line := fmt.Sprintf("%s %s: %s", e.Verb, e.RequestURI, why)
		if count[line] == 0 {
			lines = append(lines, line)
		}
		count[line]++
	}
	for i, line := range lines {
		if n := count[line]; n > 1 {
			lines[i] = fmt.Sprintf("%s (%d times)", line, n)
		}
	}
	return lines
}

// access is one kind of request: a verb on a resource (with its subresource, "pods/status") of
// an API group, in a namespace ("" for cluster-scoped resources and requests across namespaces).
type access struct{ namespace, group, resource, verb string }

// accesses returns what the authorized resource requests among events did.
func accesses(events []auditEvent) map[access]bool {
	out := map[access]bool{}
	for _, e := range events {
		if e.ObjectRef == nil || e.ObjectRef.Resource == "" || e.Annotations[decisionAnnotation] != "allow" {
			continue // a discovery request, or one the authorizer refused
		}
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		out[access{e.ObjectRef.Namespace, e.ObjectRef.APIGroup, resource, e.Verb}] = true
	}
	return out
}

// unused lists every (verb, group, resource) entry of the grants that no access used: a
// ClusterRole's anywhere, a Role's in its namespace. Entries the audit log could never show used
// (wildcards, resource names, non-resource URLs) are listed too, since nothing can prove them
// needed.
func unused(grants []grant, used map[access]bool) []string {
	var out []string
	for _, g := range grants {
		for _, rule := range g.Rules {
			if len(rule.NonResourceURLs) > 0 || len(rule.ResourceNames) > 0 {
				out = append(out, fmt.Sprintf("%s: a rule with nonResourceURLs or resourceNames, which this test cannot check: %+v", g.Role, rule))
				continue
			}
			for _, group := range rule.APIGroups {
				for _, resource := range rule.Resources {
					for _, verb := range rule.Verbs {
						if !usedAnywhere(used, g.Namespace, group, resource, verb) {
							out = append(out, fmt.Sprintf("%s: %s %s", g.Role, verb, qualified(group, resource)))
						}
					}
				}
			}
		}
	}
	return out
}

// usedAnywhere says whether some access matches the entry, within namespace unless it is empty.
// A wildcard matches nothing: it cannot be shown to be needed.
func usedAnywhere(used map[access]bool, namespace, group, resource, verb string) bool {
	if group == rbacv1.APIGroupAll || resource == rbacv1.ResourceAll || verb == rbacv1.VerbAll {
		return false
	}
	for a := range used {
		if a.group == group && a.resource == resource && a.verb == verb && (namespace == "" || a.namespace == namespace) {
			return true
		}
	}
	return false
}

// qualified writes a resource as kubectl does: "leases.coordination.k8s.io", "pods".
func qualified(group, resource string) string {
	if group == "" {
		return resource
	}
	name, sub, _ := strings.Cut(resource, "/")
	if sub != "" {
		return name + "." + group + "/" + sub
	}
	return name + "." + group
}

// TestUnused checks the coverage rule the RBAC test relies on: a Role's entry is used only in
// its own namespace, a ClusterRole's anywhere, subresources count apart, and wildcards are
// never proven.
func TestUnused(t *testing.T) {
	cluster := grant{Role: "ClusterRole c", Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "patch"}},
		{APIGroups: []string{"locks.lockwarden.io"}, Resources: []string{"lockclaims/status"}, Verbs: []string{"patch"}},
	}}
	role := grant{Role: "Role ns/r", Namespace: "ns", Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}},
	}}
	wild := grant{Role: "ClusterRole w", Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"get"}},
	}}
	tests := []struct {
		name   string
		grants []grant
		used   []access
		want   []string
	}{
		{"every entry used", []grant{cluster, role}, []access{
			{"a", "", "pods", "list"}, {"b", "", "pods", "patch"},
			{"a", "locks.lockwarden.io", "lockclaims/status", "patch"}, {"ns", "coordination.k8s.io", "leases", "get"},
		}, nil},
		{"nothing used", []grant{cluster, role}, nil, []string{
			"ClusterRole c: list pods", "ClusterRole c: patch pods",
			"ClusterRole c: patch lockclaims.locks.lockwarden.io/status", "Role ns/r: get leases.coordination.k8s.io",
		}},
		{"a Role's entry used in another namespace only", []grant{role}, []access{
			{"other", "coordination.k8s.io", "leases", "get"},
		}, []string{"Role ns/r: get leases.coordination.k8s.io"}},
		{"the object used, not its subresource", []grant{cluster}, []access{
			{"a", "", "pods", "list"}, {"a", "", "pods", "patch"}, {"a", "locks.lockwarden.io", "lockclaims", "patch"},
		}, []string{"ClusterRole c: patch lockclaims.locks.lockwarden.io/status"}},
		{"a wildcard is never proven", []grant{wild}, []access{{"a", "", "pods", "get"}}, []string{"ClusterRole w: get *"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := map[access]bool{}
			for _, a := range tt.used {
				used[a] = true
			}
			got := unused(tt.grants, used)
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			NewWithT(t).Expect(got).To(Equal(want))
		})
	}
}

// TestForbiddenAndAccesses checks how audit events are read: a refusal is listed once however
// many stages were logged, a repeated one once with its count, and only authorized resource
// requests count as accesses.
func TestForbiddenAndAccesses(t *testing.T) {
	log := `{"auditID":"1","stage":"ResponseComplete","verb":"list","requestURI":"/api/v1/pods","impersonatedUser":{"username":"sa"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"code":200},"annotations":{"authorization.k8s.io/decision":"allow"}}
{"auditID":"2","stage":"ResponseComplete","verb":"patch","requestURI":"/api/v1/namespaces/a/pods/p","impersonatedUser":{"username":"sa"},"objectRef":{"resource":"pods","namespace":"a","apiVersion":"v1"},"responseStatus":{"code":403,"message":"pods \"p\" is forbidden"},"annotations":{"authorization.k8s.io/decision":"forbid"}}
{"auditID":"3","stage":"ResponseStarted","verb":"watch","requestURI":"/api/v1/pods?watch=true","impersonatedUser":{"username":"sa"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"code":403},"annotations":{"authorization.k8s.io/decision":"forbid","authorization.k8s.io/reason":"no rule"}}
{"auditID":"3","stage":"ResponseComplete","verb":"watch","requestURI":"/api/v1/pods?watch=true","impersonatedUser":{"username":"sa"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"code":403},"annotations":{"authorization.k8s.io/decision":"forbid","authorization.k8s.io/reason":"no rule"}}
{"auditID":"7","stage":"ResponseComplete","verb":"patch","requestURI":"/api/v1/namespaces/a/pods/p","impersonatedUser":{"username":"sa"},"objectRef":{"resource":"pods","namespace":"a","apiVersion":"v1"},"responseStatus":{"code":403,"message":"pods \"p\" is forbidden"},"annotations":{"authorization.k8s.io/decision":"forbid"}}
{"auditID":"4","stage":"ResponseComplete","verb":"get","requestURI":"/apis","impersonatedUser":{"username":"sa"},"responseStatus":{"code":200},"annotations":{"authorization.k8s.io/decision":"allow"}}
{"auditID":"5","stage":"ResponseComplete","verb":"delete","requestURI":"/api/v1/namespaces/a/pods/p","user":{"username":"admin"},"objectRef":{"resource":"pods","namespace":"a","apiVersion":"v1"},"responseStatus":{"code":403},"annotations":{"authorization.k8s.io/decision":"forbid"}}
{"auditID":"6","stage":"ResponseComplete","verb":"patch","requestURI":"/apis/locks.lockwarden.io/v1alpha1/namespaces/a/lockclaims/c/status","impersonatedUser":{"username":"sa"},"objectRef":{"resource":"lockclaims","subresource":"status","namespace":"a","apiGroup":"locks.lockwarden.io"},"responseStatus":{"code":409},"annotations":{"authorization.k8s.io/decision":"allow"}}
`
	path := t.TempDir() + "/audit.log"
	g := NewWithT(t)
	g.Expect(os.WriteFile(path, []byte(log), 0o600)).To(Succeed())
	events, err := readAudit(path)
	g.Expect(err).NotTo(HaveOccurred())
	mine := by(events, "sa")
	g.Expect(mine).To(HaveLen(7), "the admin's own request is not the account's")
	g.Expect(forbidden(mine)).To(Equal([]string{
		`patch /api/v1/namespaces/a/pods/p: pods "p" is forbidden (2 times)`,
		"watch /api/v1/pods?watch=true: no rule",
	}))
	g.Expect(accesses(mine)).To(Equal(map[access]bool{
		{"", "", "pods", "list"}:                                   true,
		{"a", "locks.lockwarden.io", "lockclaims/status", "patch"}: true,
	}))
}
