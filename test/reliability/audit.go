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
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

// The deposed-leader checker does not take the manager's word for what it did: it reads the API
// server's audit log, which records every write the server accepted, whoever made it and however
// the manager logs it. Every replica impersonates the same ServiceAccount, so each kubeconfig
// adds its replica's name as a user extra under ReplicaExtra, and the audit event carries it.

// ReplicaExtra is the impersonated user extra that names the manager replica behind a request.
const ReplicaExtra = "lockwarden-replica"

// AuditPolicy records every request that may change state, once, when its response is complete:
// reads and watches are left out (the harness polls; they would swamp the log) and so are
// Events, which are reports, not state. Status writes of claims and pods keep their request
// body, so that the log says which one granted a claim (phase Held) or failed a pod.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  verbs: ["get", "list", "watch"]
- level: None
  resources:
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
- level: Request
  verbs: ["update", "patch"]
  resources:
  - group: "locks.lockwarden.io"
    resources: ["lockclaims/status"]
  - group: ""
    resources: ["pods/status"]
- level: Metadata
`

// AuditWrite is one write request as the API server's audit log recorded it.
type AuditWrite struct {
	// Replica is the manager replica that made it ("" for anyone else, e.g. the harness).
	Replica string
	Verb    string
	// Resource, with "/subresource" when there is one; Namespace and Name locate the object.
	Resource, Namespace, Name string
	// Code is the response's HTTP status.
	Code int
	// Phase is the status.phase the request wrote, for the status writes whose body the log
	// keeps ("" when it wrote none: a renewal, a condition).
	Phase string
	// At is when the API server received it, by the API server's clock.
	At time.Time
}

func (w AuditWrite) String() string {
	where := w.Name
	if w.Namespace != "" {
		where = w.Namespace + "/" + w.Name
	}
	return fmt.Sprintf("%s %s %s (%d) at %s", w.Verb, w.Resource, where, w.Code, stamp(w.At))
}

// auditEvent is the part of an audit.k8s.io/v1 Event the checker reads.
type auditEvent struct {
	Stage            string `json:"stage"`
	Verb             string `json:"verb"`
	ImpersonatedUser *struct {
		Extra map[string][]string `json:"extra"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject *struct {
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	} `json:"requestObject"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// ParseAuditWrites reads a JSON-lines audit log (or a tail of one that starts at a line) into
// the completed write requests it records. A partial last line, still being written, is left
// out.
func ParseAuditWrites(data []byte) ([]AuditWrite, error) {
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []AuditWrite
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("audit log line %q: %w", truncate(string(line), 120), err)
		}
		if ev.Stage != "ResponseComplete" || ev.ObjectRef == nil || ev.ResponseStatus == nil {
			continue
		}
		w := AuditWrite{Verb: ev.Verb, Resource: ev.ObjectRef.Resource, Namespace: ev.ObjectRef.Namespace,
			Name: ev.ObjectRef.Name, Code: ev.ResponseStatus.Code, At: ev.RequestReceivedTimestamp}
		if ev.ObjectRef.Subresource != "" {
			w.Resource += "/" + ev.ObjectRef.Subresource
		}
		if ev.RequestObject != nil {
			w.Phase = ev.RequestObject.Status.Phase
		}
		if ev.ImpersonatedUser != nil {
			if r := ev.ImpersonatedUser.Extra[ReplicaExtra]; len(r) > 0 {
				w.Replica = r[0]
			}
		}
		out = append(out, w)
	}
	return out, sc.Err()
}

// ReadAuditLog reads the audit log at path from offset off on (an offset taken while the API
// server may have been writing a line: the line it falls in is skipped).
func ReadAuditLog(path string, off int64) ([]AuditWrite, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	// Start one byte early and drop everything up to the first line's end.
	off = max(off-1, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, math.MaxInt64-off))
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	if off > 0 {
		_, data, _ = bytes.Cut(data, []byte("\n"))
	}
	return ParseAuditWrites(data)
}

// readOnlyCreates are creates that change no state: access and token reviews.
var readOnlyCreates = []string{"subjectaccessreviews", "selfsubjectaccessreviews", "localsubjectaccessreviews", "tokenreviews", "selfsubjectreviews"}

// AcceptedWrites lists the writes of replica, received in [from, to], that the API server
// accepted (a 2xx response), leaving out creates that change nothing. A deposed leader must make
// none between waking and the end of its run: a status write, a key-ledger Lease, a gate lifted, a
// pod evicted or a finalizer removed would each act on leadership it no longer has. Its
// preconditioned writes, refused with 409, are what is expected and are not listed.
func AcceptedWrites(writes []AuditWrite, replica string, from, to time.Time) []AuditWrite {
	var out []AuditWrite
	for _, w := range writes {
		if w.Replica != replica || w.At.Before(from) || w.At.After(to) || w.Code < 200 || w.Code >= 300 || w.Verb == "watch" {
			continue
		}
		if w.Verb == "create" && slices.Contains(readOnlyCreates, w.Resource) {
			continue
		}
		out = append(out, w)
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
