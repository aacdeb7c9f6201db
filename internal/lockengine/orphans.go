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
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// This file serves the claims of a DistributedLock that does not exist.

// reconcileOrphans serves the claims of a lock that does not exist: they wait for it to be
// created, a held one (possible only if the lock's finalizer was removed by hand) fails and is
// no longer renewed, so that its key expires on the backend, and a deleted one is let go.
func (r *Reconciler) reconcileOrphans(ctx context.Context, s *lockScope) error {
	r.memory.forget(s.name, "")
	msg := fmt.Sprintf("DistributedLock %s does not exist in namespace %s; create it or fix spec.lockName", s.name.Name, s.name.Namespace)
	var errs []error
	for _, c := range s.claims {
		msg, skip := orphanedPart(c, s.name, msg)
		if skip {
			continue
		}
		key := client.ObjectKeyFromObject(c)
		switch {
		case !c.DeletionTimestamp.IsZero():
			r.Renewer.Forget(key)
			errs = append(errs, r.removeFinalizer(ctx, s, c))
			continue
		case isHeld(c):
			r.Renewer.Forget(key)
			markEnded(c, locksv1alpha1.ClaimFailed, locksv1alpha1.ReasonLockNotFound, msg, s.now)
		case !isFinal(c.Status.Phase):
			markWaiting(c, 0, false, locksv1alpha1.ReasonLockNotFound, msg)
		}
		errs = append(errs, r.writeClaim(ctx, s, c))
		// A finalizer from an earlier lockwarden, which released through it: nothing is held here.
		errs = append(errs, r.shedFinalizer(ctx, s, c))
	}
	return errors.Join(errs...)
}
