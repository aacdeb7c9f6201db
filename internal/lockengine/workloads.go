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
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/podliveness"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// Workload holders (DESIGN.md §3 Workloads): a claim whose spec.holder.object names a Job, a
// Tekton run, an Argo Workflow or another kind the install lists holds while that object exists
// and has not finished (package workloads says when it has). The objects are read from the
// cache, which watches only the listed kinds (Reconciler.Workloads); a claim naming any other
// kind fails, since nothing would tell it when its object finishes.

// heldObject is what a pass knows of the holder object of one claim.
type heldObject struct {
	// kind is the object's listed kind; unwatched says why the kind is not listed (then kind is
	// the zero Kind and obj nil).
	kind      workloads.Kind
	unwatched error
	// obj is the object from the cache; nil when it does not exist.
	obj *unstructured.Unstructured
}

// holderObjectKey is the scope's key of the holder object claim c names; empty when it names none.
func holderObjectKey(c *locksv1alpha1.LockClaim) string {
	h := c.Spec.Holder
	if h == nil || h.Object == nil {
		return ""
	}
	return workloads.RefKeyOf(h.Object.APIVersion, h.Object.Kind, h.Object.Name)
}

// loadObject reads from the cache (WorkloadCache) the holder object that claim c names, when its kind is listed;
// a kind that is not is recorded with the reason, and read nowhere.
func (r *Reconciler) loadObject(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim) error {
	h := c.Spec.Holder
	if h == nil || h.Object == nil || isFinal(c.Status.Phase) {
		return nil
	}
	key := holderObjectKey(c)
	if _, ok := s.objects[key]; ok {
		return nil
	}
	if s.objects == nil {
		s.objects = map[string]heldObject{}
	}
	kind, err := r.Workloads.LookupRef(h.Object.APIVersion, h.Object.Kind)
	if err != nil {
		s.objects[key] = heldObject{unwatched: err}
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(kind.GVK)
	switch err := r.WorkloadCache.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: h.Object.Name}, obj); {
	case apierrors.IsNotFound(err):
		obj = nil
	case err != nil:
		return err
	}
	s.objects[key] = heldObject{kind: kind, obj: obj}
	return nil
}

// objectVerdict is the liveness of the holder object of c, a claim that holds.
func (s *lockScope) objectVerdict(c *locksv1alpha1.LockClaim) podliveness.Verdict {
	o, ok := s.objects[holderObjectKey(c)]
	if !ok || o.unwatched != nil {
		// Not read (the claim was granted before the kind left the list): nothing tells when it
		// finishes, so its hold lasts until the claim is deleted, as a detached claim's does.
		return podliveness.Verdict{Alive: true}
	}
	return workloads.Check(o.kind, o.obj, c.Spec.Holder.Object.Name, c.Status.ObjectUID)
}

// judgeObject adds to v, the verdict on a waiting claim, what its holder object says: a kind the
// install does not list fails the claim; an object that does not exist yet (and was never seen)
// makes it wait aside, as a pod does; one that finished, or was replaced, before the claim was
// granted fails it. It records the object's UID in the claim's status when first seen.
func (s *lockScope) judgeObject(c *locksv1alpha1.LockClaim, v waiterVerdict) waiterVerdict {
	h := c.Spec.Holder
	if v.end != nil || h == nil || h.Object == nil {
		return v
	}
	o := s.objects[holderObjectKey(c)]
	switch {
	case o.unwatched != nil:
		v.end = &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonWorkloadKindNotWatched, message: capitalize(o.unwatched.Error())}
		return v
	case o.obj == nil && c.Status.ObjectUID == "":
		v.missing = &missingHolder{reason: locksv1alpha1.ReasonWorkloadNotFound,
			what: fmt.Sprintf("%s %s does not exist in namespace %s", h.Object.Kind, h.Object.Name, c.Namespace)}
		return v
	case o.obj != nil && c.Status.ObjectUID == "":
		c.Status.ObjectUID = o.obj.GetUID()
	}
	if dead := workloads.Check(o.kind, o.obj, h.Object.Name, c.Status.ObjectUID); !dead.Alive {
		v.end = &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonHolderTerminated,
			message: "The holder will never get the lock: " + dead.Reason}
	}
	return v
}

// deletedWithObject says whether claim c goes with its holder object's foreground deletion: c is
// owned by the object (the claim the workload controller made) and the object terminates with the
// foregroundDeletion finalizer, under which Kubernetes deletes the claim before the object (a Job
// before its pods are gone): the hold lasts until the object is gone, as a pod's does.
func (s *lockScope) deletedWithObject(c *locksv1alpha1.LockClaim) bool {
	o := s.objects[holderObjectKey(c)]
	if o.obj == nil || o.obj.GetDeletionTimestamp().IsZero() || !slices.Contains(o.obj.GetFinalizers(), metav1.FinalizerDeleteDependents) {
		return false
	}
	owner := metav1.GetControllerOf(c)
	return owner != nil && owner.UID == o.obj.GetUID()
}

// capitalize makes a message of an error's words.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// watchWorkloads adds to b a watch of each listed workload kind, which wakes the locks of the
// claims that name the object when it is created, deleted, or changes how far it has run.
func (r *Reconciler) watchWorkloads(b *builder.Builder) *builder.Builder {
	for _, kind := range r.Workloads.Kinds() {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(kind.GVK)
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(r.locksOfObject), builder.WithPredicates(workloadProgressed(kind)))
	}
	return b
}

// locksOfObject maps a workload object to the locks of the claims that name it as their holder.
func (r *Reconciler) locksOfObject(ctx context.Context, o client.Object) []ctrl.Request {
	gk := o.GetObjectKind().GroupVersionKind().GroupKind()
	key := workloads.RefKey(gk, o.GetName())
	return r.locksOfClaimsNaming(ctx, o, indexClaimObject, key, key)
}

// workloadProgressed passes the updates of a workload object that can change its verdict: how far
// it has run (workloads.Finished) or its deletion starting. A Job's status changes with every pod
// it starts or finishes, and none of those matters until the Job finishes.
func workloadProgressed(kind workloads.Kind) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*unstructured.Unstructured)
			n, okNew := e.ObjectNew.(*unstructured.Unstructured)
			if !okOld || !okNew {
				return true
			}
			was, _ := workloads.Finished(kind, o)
			is, _ := workloads.Finished(kind, n)
			return was != is || o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero()
		},
	}
}
