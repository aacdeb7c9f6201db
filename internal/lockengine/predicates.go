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
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// claimChangedForLock passes the claim events its lock's pass must see: creation, deletion, the
// start of deletion, a spec or finalizer change, and a change of phase. The status writes of
// waiting claims (queue positions) are not among them: a busy lock's pass would otherwise run
// once per waiter after every handoff. They pass, though, when they bring the cache up to a write
// that a pass found missing (written).
func claimChangedForLock(written *ownWrites) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*locksv1alpha1.LockClaim), e.ObjectNew.(*locksv1alpha1.LockClaim)
			return written.caughtUp(n) ||
				o.Generation != n.Generation ||
				o.Status.Phase != n.Status.Phase ||
				o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				!slices.Equal(o.Finalizers, n.Finalizers)
		},
	}
}
