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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RBACRefusals lists the requests of user that the API server refused, as a manager's log
// reports them: the API server's "is forbidden: User "<user>" cannot …" message, once per
// distinct refusal. The managers run as the shipped RBAC's ServiceAccount, so each is a verb a
// code path needs and config/rbac lacks (the rbac checker). A refusal logged within one of
// excused is not listed: a kube-apiserver that has just started serves requests before its
// RBAC authorizer has read the roles, and refuses them all meanwhile (seen in
// redis/apiserver-restart, seed 797768091, for the whole second of its start), which says
// nothing about the roles.
func RBACRefusals(log, user string, excused []Span) []string {
	marker := "is forbidden: User " + strconv.Quote(user) + " cannot "
	seen := map[string]bool{}
	var out []string
	for line := range strings.Lines(log) {
		i := strings.Index(line, marker)
		if i < 0 {
			// The log's JSON or logfmt may escape the quotes.
			line = strings.ReplaceAll(line, `\"`, `"`)
			if i = strings.Index(line, marker); i < 0 {
				continue
			}
		}
		if from, to, ok := logLineTime(line); ok && slices.ContainsFunc(excused, func(sp Span) bool { return sp.overlaps(from, to) }) {
			continue
		}
		// `get resource "distributedlocks" in API group "locks.lockwarden.io"`, without where.
		what := strings.TrimSpace(line[i+len(marker):])
		for _, end := range []string{" in the namespace ", " at the cluster scope", `"}`} {
			if j := strings.Index(what, end); j >= 0 {
				what = what[:j]
			}
		}
		if !seen[what] {
			seen[what] = true
			out = append(out, "refused: cannot "+what)
		}
	}
	return out
}

// klogTime matches klog's header, "E1206 03:44:11.717575", which has no year.
var klogTime = regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}(\.\d+)?) `)

// logLineTime reads when a manager's log line was written, as the interval its timestamp's
// precision allows: zap's JSON "ts" or console timestamp (RFC 3339, whole seconds unless it
// has a fraction), or klog's header (in UTC, the harness's and the managers' zone, this year).
func logLineTime(line string) (from, to time.Time, ok bool) {
	var stamp string
	switch {
	case strings.Contains(line, `"ts":"`):
		stamp = line[strings.Index(line, `"ts":"`)+len(`"ts":"`):]
		stamp, _, _ = strings.Cut(stamp, `"`)
	case klogTime.MatchString(line):
		m := klogTime.FindStringSubmatch(line)
		t, err := time.Parse("0102 15:04:05.999999", m[1])
		if err != nil {
			return time.Time{}, time.Time{}, false
		}
		t = t.AddDate(time.Now().UTC().Year(), 0, 0)
		return withPrecision(t, m[2] != "")
	default:
		stamp, _, _ = strings.Cut(line, "\t")
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(stamp))
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	return withPrecision(t, strings.Contains(stamp, "."))
}

// withPrecision is the interval a timestamp t stands for: t itself when it has a fraction of a
// second, else the whole second from t.
func withPrecision(t time.Time, fraction bool) (from, to time.Time, ok bool) {
	if fraction {
		return t, t, true
	}
	return t, t.Add(time.Second), true
}
