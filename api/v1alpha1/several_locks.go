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
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Locks are the locks the claim asks for, in name order: its lockName, or its lockNames (the
// order in which the controller takes and records them).
func (s *LockClaimSpec) Locks() []string {
	if len(s.LockNames) == 0 {
		return []string{s.LockName}
	}
	names := slices.Clone(s.LockNames)
	slices.Sort(names)
	return slices.Compact(names)
}

// LocksLabel names a claim's locks in messages: the lock's name, or the names joined by commas.
func LocksLabel(locks []string) string { return strings.Join(locks, ",") }

// PodClaimNameOfLocks is PodClaimName for a claim of several locks (in any order): one name for
// the set, as the pod annotation's list and lockctl's --lock flags both make it. For one lock it
// is PodClaimName.
func PodClaimNameOfLocks(pod string, uid types.UID, locks []string) string {
	if len(locks) == 1 {
		return PodClaimName(pod, uid, locks[0])
	}
	sorted := slices.Clone(locks)
	slices.Sort(sorted)
	// Commas cannot be in a lock's name: the hash tells {a.b, c} from {a, b.c}.
	sum := sha256.Sum256([]byte(string(uid) + "/" + strings.Join(sorted, ",")))
	suffix := hex.EncodeToString(sum[:])[:10]
	base := pod + "-" + strings.Join(sorted, "-")
	const maxBase = 253 - 1 - 10
	if len(base) > maxBase {
		base = strings.TrimRight(base[:maxBase], "-.")
	}
	return base + "-" + suffix
}
