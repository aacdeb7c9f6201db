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

package reliability

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// auditLine is one audit event as kube-apiserver's JSON log backend writes it (trimmed to the
// fields that matter, plus a few it always has).
func auditLine(replica, verb, resource, sub, ns, name string, code int, at string) string {
	imp := ""
	if replica != "" {
		imp = fmt.Sprintf(`"impersonatedUser":{"username":"system:serviceaccount:lockwarden-system:lockwarden","groups":["system:serviceaccounts"],"extra":{%q:[%q]}},`, ReplicaExtra, replica)
	}
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x","stage":"ResponseComplete","requestURI":"/x","verb":%q,"user":{"username":"admin","groups":["system:masters"]},%s"sourceIPs":["127.0.0.1"],"objectRef":{"resource":%q,"namespace":%q,"name":%q,"apiGroup":"locks.lockwarden.io","apiVersion":"v1alpha1","subresource":%q},"responseStatus":{"metadata":{},"code":%d},"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
		verb, imp, resource, ns, name, sub, code, at, at)
}

func TestAcceptedWrites(t *testing.T) {
	lines := []string{
		auditLine("m0", "update", "lockclaims", "status", "ns", "before", 200, "2026-12-05T12:00:00.500000Z"),
		auditLine("m0", "update", "lockclaims", "status", "ns", "granted", 200, "2026-12-05T12:00:02.000000Z"),
		auditLine("m0", "update", "lockclaims", "status", "ns", "refused", 409, "2026-12-05T12:00:02.100000Z"),
		auditLine("m0", "create", "subjectaccessreviews", "", "", "", 201, "2026-12-05T12:00:02.200000Z"),
		auditLine("m0", "patch", "pods", "", "ns", "p", 200, "2026-12-05T12:00:02.300000Z"),
		auditLine("m0", "watch", "pods", "", "", "", 200, "2026-12-05T12:00:02.350000Z"),
		auditLine("m1", "update", "lockclaims", "status", "ns", "other-replica", 200, "2026-12-05T12:00:02.400000Z"),
		auditLine("", "delete", "lockclaims", "", "ns", "harness", 200, "2026-12-05T12:00:02.500000Z"),
		auditLine("m0", "create", "leases", "", "lockwarden-system", "after", 201, "2026-12-05T12:00:09.000000Z"),
		`{"kind":"Event","stage":"ResponseStarted","verb":"up`, // still being written
	}
	writes, err := ParseAuditWrites([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) != 9 {
		t.Fatalf("parsed %d requests, want 9 (the partial last line left out): %v", len(writes), writes)
	}
	if w := writes[0]; w.Replica != "m0" || w.Resource != "lockclaims/status" || w.Name != "before" || w.Code != 200 {
		t.Errorf("first write parsed as %+v", w)
	}
	if writes[7].Replica != "" {
		t.Errorf("a request made without impersonation named replica %q", writes[7].Replica)
	}
	from := time.Date(2026, 12, 5, 12, 0, 1, 0, time.UTC)
	to := from.Add(5 * time.Second)
	var got []string
	for _, w := range AcceptedWrites(writes, "m0", from, to) {
		got = append(got, w.Name)
	}
	if want := "granted,p"; strings.Join(got, ",") != want {
		t.Errorf("accepted writes of m0 in the window: %v, want %s", got, want)
	}
}

func TestParseAuditWritesRejectsGarbage(t *testing.T) {
	if _, err := ParseAuditWrites([]byte("not json\n")); err == nil {
		t.Error("a line that is not an audit event parsed without error")
	}
}

func TestCheckEvictionTargets(t *testing.T) {
	base := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	grants := []Grant{
		{Lock: "ns/l", Claim: "lost-a", Token: 1, Lost: true, Released: at(0)},
		{Lock: "ns/l", Claim: "kept", Token: 2, Released: at(100)},
		{Lock: "ns/m", Claim: "lost-b", Token: 3, Lost: true, Released: at(0)},
	}
	evict := func(replica, name string, code, ms int) AuditWrite {
		return AuditWrite{Replica: replica, Verb: "create", Resource: "pods/eviction", Namespace: "ns", Name: name, Code: code, At: at(ms)}
	}
	cases := map[string]struct {
		writes []AuditWrite
		want   []string
	}{
		"each lost pod evicted": {writes: []AuditWrite{evict("m0", "lost-a", 201, 50), evict("m0", "lost-b", 429, 60), evict("m0", "lost-b", 201, 900)}},
		"a pod that kept its lock evicted": {writes: []AuditWrite{evict("m0", "lost-a", 201, 50), evict("m0", "kept", 201, 60), evict("m0", "lost-b", 201, 70)},
			want: []string{"evicted pod ns/kept"}},
		"refused and foreign evictions do not count": {writes: []AuditWrite{evict("m0", "lost-a", 429, 50), evict("", "lost-b", 201, 60)},
			want: []string{"lost-a (token 1) was seen Lost", "lost-b (token 3) was seen Lost"}},
		"too late": {writes: []AuditWrite{evict("m0", "lost-a", 201, 15_001), evict("m0", "lost-b", 201, 10)},
			want: []string{"evicted only 15.001s later"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := CheckEvictionTargets(grants, tc.writes, 15*time.Second)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %d violations", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCheckLockDelayAudited(t *testing.T) {
	base := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	ended := func(claim string, end EndKind) Grant {
		return Grant{Lock: "ns/l", Claim: claim, Token: 1, End: end, Phase: "Released", Reason: "HolderTerminated"}
	}
	grants := []Grant{ended("a", EndPodDelete), ended("b", EndSilentDeath), {Lock: "ns/l", Claim: "c"}, {Lock: "ns/l", Claim: "d"},
		{Lock: "ns/l", Claim: "e", End: EndRelease, Phase: "Released"}}
	grant := func(claim string, ms int) AuditWrite {
		return AuditWrite{Replica: "m0", Verb: "patch", Resource: "lockclaims/status", Namespace: "ns", Name: claim, Code: 200, Phase: "Held", At: at(ms)}
	}
	deletePod := AuditWrite{Verb: "delete", Resource: "pods", Namespace: "ns", Name: "a", Code: 200, At: at(0)}
	failPod := AuditWrite{Verb: "update", Resource: "pods/status", Namespace: "ns", Name: "b", Code: 200, Phase: "Failed", At: at(10_000)}
	runningPod := AuditWrite{Verb: "update", Resource: "pods/status", Namespace: "ns", Name: "b", Code: 200, Phase: "Running", At: at(9_000)}
	renewal := AuditWrite{Replica: "m0", Verb: "patch", Resource: "lockclaims/status", Namespace: "ns", Name: "d", Code: 200, At: at(500)}
	cases := map[string]struct {
		writes  []AuditWrite
		checked int
		want    []string
	}{
		"both waited": {writes: []AuditWrite{grant("a", -5000), deletePod, renewal, grant("c", 3000), grant("b", 4000), runningPod, failPod, grant("d", 13_000)}, checked: 2},
		"granted early after a pod deletion": {writes: []AuditWrite{deletePod, grant("c", 2999), runningPod, failPod, grant("d", 13_000)}, checked: 2,
			want: []string{"c granted at", "2.999s after the harness ended the pod of a"}},
		"granted early after a pod failed": {writes: []AuditWrite{runningPod, failPod, grant("d", 10_001), {Replica: "m0", Verb: "patch", Resource: "lockclaims/status", Namespace: "ns", Name: "c", Code: 409, Phase: "Held", At: at(9_500)}}, checked: 1,
			want: []string{"d granted at", "1ms after the harness ended the pod of b"}},
		"no grant after the end": {writes: []AuditWrite{deletePod}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := CheckLockDelayAudited(grants, tc.writes, 3*time.Second)
			if got.Checked != tc.checked || len(got.Violations) != len(tc.want)/2 {
				t.Fatalf("checked %d (want %d), violations %q (want %d)", got.Checked, tc.checked, got.Violations, len(tc.want)/2)
			}
			for i := 0; i < len(tc.want); i += 2 {
				v := got.Violations[i/2]
				if !strings.Contains(v, tc.want[i]) || !strings.Contains(v, tc.want[i+1]) {
					t.Errorf("violation %q, want it to mention %q and %q", v, tc.want[i], tc.want[i+1])
				}
			}
		})
	}
}
