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
	"strconv"
	"strings"
)

// RBACRefusals lists the requests of user that the API server refused, as a manager's log
// reports them: the API server's "is forbidden: User "<user>" cannot …" message, once per
// distinct refusal. The managers run as the shipped RBAC's ServiceAccount, so each is a verb a
// code path needs and config/rbac lacks (the rbac checker).
func RBACRefusals(log, user string) []string {
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
