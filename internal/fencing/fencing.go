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

// Package fencing issues fencing tokens without reading any clock.
//
// A grant is recorded by a write of the DistributedLock's status preconditioned on the
// resourceVersion the writer read (a compare-and-swap through the API server). Tokens come from
// that precondition: Offset + resourceVersion × PerWrite + i for the i-th holder the write grants.
// Successful preconditioned writes of one object have strictly increasing preconditions (each
// write's precondition is at least the resourceVersion its predecessor produced, which is above
// the predecessor's precondition), and since Kubernetes 1.35 the resourceVersions of one resource
// are comparable integers (the etcd revision, which never goes back). So tokens strictly increase
// across holders, controller restarts, leader failover, clock steps on the controller or the API
// server, finalizers removed by hand and deletion and re-creation of the lock: a re-created lock's
// resourceVersions are above every one its predecessor had. Two locks that name one backend key
// are kept apart by the controller: the one that takes the key over from another writes its status
// first, so its grants' preconditions are above the other's.
//
// Issue refuses, rather than reissues, when the result would not be above the lock's last token:
// that happens only if the API server's storage went back in time (an etcd restored from a backup).
package fencing

import (
	"fmt"
	"strconv"
)

const (
	// Offset starts this scheme above every token lockwarden's first scheme can have issued (the
	// lock's creation second × 10⁶ plus a count: below 4·10¹⁵ until the year 2096), so that an
	// upgrade never lowers a lock's tokens.
	Offset int64 = 4_000_000_000_000_000
	// PerWrite is how many tokens one grant write can issue: one per holder it grants.
	PerWrite = 256
	// MaxSafe is the largest token that readers of JSON numbers as doubles (JavaScript, jq) still
	// read exactly, 2⁵³−1. It is reached at resourceVersion 1.95·10¹³, decades of writes away.
	MaxSafe int64 = 1<<53 - 1
)

// Issue returns the tokens of the n holders that one grant write grants, the write being
// preconditioned on resourceVersion and last being the lock's last token (status.fencingToken).
func Issue(resourceVersion string, last int64, n int) ([]int64, error) {
	if n < 1 || n > PerWrite {
		return nil, fmt.Errorf("fencing: one write grants 1 to %d holders, not %d", PerWrite, n)
	}
	rv, err := strconv.ParseInt(resourceVersion, 10, 64)
	if err != nil || rv <= 0 {
		return nil, fmt.Errorf("fencing: resourceVersion %q is not a positive integer; tokens need Kubernetes 1.35 or later, whose resourceVersions are comparable integers", resourceVersion)
	}
	if rv > (MaxSafe-Offset)/PerWrite {
		return nil, fmt.Errorf("fencing: resourceVersion %d is too large for tokens that JSON readers read exactly", rv)
	}
	first := Offset + rv*PerWrite
	if first <= last {
		return nil, fmt.Errorf("fencing: the token for resourceVersion %d (%d) is not above the lock's last token %d: the API server's storage went back in time; no token is issued", rv, first, last)
	}
	tokens := make([]int64, n)
	for i := range tokens {
		tokens[i] = first + int64(i)
	}
	return tokens, nil
}
