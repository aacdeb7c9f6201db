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

package v1alpha1

import (
	"cmp"
	"math"
	"strconv"
)

// QueueOrder orders the claims of one lock as the controller grants them (docs/design.md §3, Grant): a
// higher spec.priority first, then by arrival. A claim's arrival is status.arrival, recorded at
// its first status write, or, before that write, the resourceVersion it has: its creation's,
// unless something changed it since, which can place it later but never before a claim that was
// there first. (creationTimestamp has whole seconds, so it cannot order claims made within one
// second.)
//
// Claims whose status an earlier version of the controller wrote have no arrival, and never get
// one (their resourceVersion has moved on with every status write): they were all created before
// any claim that has one, so they come first among their priority, in the order that version kept
// (creation time, then name). The name breaks the remaining ties.
func QueueOrder(a, b *LockClaim) int {
	if c := cmp.Compare(b.Spec.Priority, a.Spec.Priority); c != 0 {
		return c
	}
	aa, aOld := arrivalOf(a)
	ba, bOld := arrivalOf(b)
	switch {
	case aOld && bOld:
		if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
	case aOld != bOld:
		if aOld {
			return -1
		}
		return 1
	default:
		if c := cmp.Compare(aa, ba); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.Name, b.Name)
}

// arrivalOf is a claim's arrival (see QueueOrder); old is true for a claim whose status an
// earlier version wrote, which has none. A resourceVersion that is not a number (a fake client's)
// places the claim last.
func arrivalOf(c *LockClaim) (arrival int64, old bool) {
	if c.Status.Arrival > 0 {
		return c.Status.Arrival, false
	}
	if c.Status.Phase != "" {
		return 0, true
	}
	if rv, ok := ResourceVersionNumber(c.ResourceVersion); ok {
		return rv, false
	}
	return math.MaxInt64, false
}

// ResourceVersionNumber reads a resourceVersion as the number it is on Kubernetes 1.35 and later
// (the etcd revision: comparable between objects of one resource); ok is false for anything else.
func ResourceVersionNumber(rv string) (n int64, ok bool) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
