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

package lockengine

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/podliveness"
)

// detachedHolder is the holder of a claim that names none (no spec.holder, or only an identity):
// nothing tells when it dies, so it holds until the claim is deleted, and its lease runs out
// only if the controller itself cannot renew it.
type detachedHolder struct{}

func (detachedHolder) load(context.Context, *Reconciler, *lockScope, *locksv1alpha1.LockClaim) error {
	return nil
}

func (detachedHolder) waitVerdict(*lockScope, *locksv1alpha1.LockClaim) waiterVerdict {
	return waiterVerdict{}
}

func (detachedHolder) holdVerdict(*lockScope, *locksv1alpha1.LockClaim) (podliveness.Verdict, time.Duration) {
	return podliveness.Verdict{Alive: true}, 0
}

func (detachedHolder) deletedWith(*lockScope, *locksv1alpha1.LockClaim) bool { return false }

func (detachedHolder) uid(*lockScope, *locksv1alpha1.LockClaim) types.UID { return "" }

func (detachedHolder) noteUID(*locksv1alpha1.LockClaim, types.UID) {}

func (detachedHolder) record(types.UID) *locksv1alpha1.RecordedHolder { return nil }

// rebuild keeps an identity-only holder detached: the record keeps the identity, not the holder.
func (detachedHolder) rebuild(*locksv1alpha1.LockClaim, types.UID) {}

func (detachedHolder) indexKey() (string, string) { return "", "" }
