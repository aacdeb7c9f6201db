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

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// claimChangedForLock passes the claim events its lock's pass must see: creation, deletion, the
// start of deletion, a spec or finalizer change, and a change of phase. The status writes of
// waiting claims (queue positions) are not among them: a busy lock's pass would otherwise run
// once per waiter after every handoff. Nor is a one-lock claim's change of phase that is this
// process's own last write of it (a grant's Held, a holder's Released): the pass that wrote it
// acted on it already, and the pass it woke found nothing to do (it cost a tenth of a handoff's
// record path). A claim of several locks passes its own phase writes too: the pass of one of its
// locks writes them, and each other lock's pass must see them. Every write passes when it brings
// the cache up to a write that a pass found missing (written). A deletion also drops what written
// remembers of the claim: no pass reads it again, and a manager that serves claims for months
// would otherwise keep a resourceVersion for every claim it ever wrote (each pass looks its
// claims up in that map).
func claimChangedForLock(written *ownWrites) predicate.Predicate {
	return predicate.Funcs{
		DeleteFunc: func(e event.DeleteEvent) bool {
			written.forget(e.Object.GetUID())
			return true
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*locksv1alpha1.LockClaim), e.ObjectNew.(*locksv1alpha1.LockClaim)
			return written.caughtUp(n) ||
				o.Generation != n.Generation ||
				(o.Status.Phase != n.Status.Phase && (several(n) || !written.isLast(n))) ||
				o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				!slices.Equal(o.Finalizers, n.Finalizers)
		},
	}
}

// lockChangedForPass passes the events of a lock that its pass must see: every one but the lock's
// own status write, which the pass that wrote it has acted on already (a pass would find nothing
// to do, after listing and copying every claim of the lock). A change of spec, the start of
// deletion, a change of finalizers, a write by anyone else (a user, a tool, another manager) and
// the cache catching up with an own write that a pass found missing all pass.
func lockChangedForPass(written *ownWrites) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return written.caughtUp(n) ||
				!written.isLast(n) ||
				o.GetGeneration() != n.GetGeneration() ||
				o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
				!slices.Equal(o.GetFinalizers(), n.GetFinalizers())
		},
	}
}

// nodeReadyChanged passes the Node events that can change a holder's verdict under
// holderNodeLossSeconds: a change of the Ready condition (its status or its transition time) and
// a deletion. Every other Node update passes nothing: kubelets rewrite their Node's status every
// few minutes (the heartbeats themselves go to Leases, which are not Nodes), and images,
// capacity and other conditions change with no bearing on a hold. Creations pass nothing either:
// a pod is bound only to a Node that exists already, and every lock has a pass at start.
func nodeReadyChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := nodeReady(e.ObjectOld), nodeReady(e.ObjectNew)
			return o.Status != n.Status || !o.LastTransitionTime.Equal(&n.LastTransitionTime)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// nodeReady is a Node's Ready condition; the zero condition when it has none (or o is not a Node).
func nodeReady(o client.Object) corev1.NodeCondition {
	if node, ok := o.(*corev1.Node); ok {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c
			}
		}
	}
	return corev1.NodeCondition{}
}
