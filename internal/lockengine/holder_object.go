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
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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

// Workload holders (docs/design.md §3 Workloads): a claim whose spec.holder.object names a Job, a
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

// objectHolder is a claim's holder workload object (spec.holder.object).
type objectHolder struct{ ref locksv1alpha1.HolderObject }

// key is the scope's key of the object (s.world.objects), as workloads.RefKeyOf spells it.
func (o objectHolder) key() string {
	return workloads.RefKeyOf(o.ref.APIVersion, o.ref.Kind, o.ref.Name)
}

// load reads from the cache (WorkloadCache) the object, when its kind is listed; a kind that is
// not is recorded with the reason, and read nowhere.
func (o objectHolder) load(ctx context.Context, r *Reconciler, s *lockScope, c *locksv1alpha1.LockClaim) error {
	if isFinal(c.Status.Phase) {
		return nil
	}
	key := o.key()
	if _, ok := s.world.objects[key]; ok {
		return nil
	}
	if s.world.objects == nil {
		s.world.objects = map[string]heldObject{}
	}
	kind, err := r.Workloads.LookupRef(o.ref.APIVersion, o.ref.Kind)
	if err != nil {
		s.world.objects[key] = heldObject{unwatched: err}
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(kind.GVK)
	switch err := r.WorkloadCache.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: o.ref.Name}, obj); {
	case apierrors.IsNotFound(err):
		obj = nil
	case err != nil:
		return err
	}
	s.world.objects[key] = heldObject{kind: kind, obj: obj}
	return nil
}

// waitVerdict: a kind the install does not list fails the claim; an object that does not exist
// yet (and was never seen) makes it wait aside, as a pod does; one that finished, or was
// replaced, before the claim was granted fails it.
func (o objectHolder) waitVerdict(s *lockScope, c *locksv1alpha1.LockClaim) waiterVerdict {
	read := s.world.objects[o.key()]
	uid := c.Status.ObjectUID
	var v waiterVerdict
	switch {
	case read.unwatched != nil:
		v.end = &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonWorkloadKindNotWatched, message: capitalize(read.unwatched.Error())}
		return v
	case read.obj == nil && uid == "":
		v.missing = &missingHolder{reason: locksv1alpha1.ReasonWorkloadNotFound,
			what: fmt.Sprintf("%s %s does not exist in namespace %s", o.ref.Kind, o.ref.Name, c.Namespace)}
		return v
	case read.obj != nil && uid == "":
		uid = read.obj.GetUID()
		v.seen = uid
	}
	if dead := workloads.Check(read.kind, read.obj, o.ref.Name, uid); !dead.Alive {
		v.end = &ending{phase: locksv1alpha1.ClaimFailed, reason: locksv1alpha1.ReasonHolderTerminated,
			message: "The holder will never get the lock: " + dead.Reason}
	}
	return v
}

func (o objectHolder) holdVerdict(s *lockScope, c *locksv1alpha1.LockClaim) (podliveness.Verdict, time.Duration) {
	read, ok := s.world.objects[o.key()]
	if !ok || read.unwatched != nil {
		// Not read (the claim was granted before the kind left the list): nothing tells when it
		// finishes, so its hold lasts until the claim is deleted, as a detached claim's does.
		return podliveness.Verdict{Alive: true}, 0
	}
	return workloads.Check(read.kind, read.obj, o.ref.Name, c.Status.ObjectUID), 0
}

// deletedWith: c is owned by the object (the claim the workload controller made) and the object
// terminates with the foregroundDeletion finalizer, under which Kubernetes deletes the claim
// before the object (a Job before its pods are gone): the hold lasts until the object is gone, as
// a pod's does.
func (o objectHolder) deletedWith(s *lockScope, c *locksv1alpha1.LockClaim) bool {
	read := s.world.objects[o.key()]
	if read.obj == nil || read.obj.GetDeletionTimestamp().IsZero() || !slices.Contains(read.obj.GetFinalizers(), metav1.FinalizerDeleteDependents) {
		return false
	}
	owner := metav1.GetControllerOf(c)
	return owner != nil && owner.UID == read.obj.GetUID()
}

func (o objectHolder) uid(s *lockScope, c *locksv1alpha1.LockClaim) types.UID {
	if c.Status.ObjectUID != "" {
		return c.Status.ObjectUID
	}
	if read := s.world.objects[o.key()]; read.obj != nil {
		return read.obj.GetUID()
	}
	return ""
}

func (o objectHolder) noteUID(c *locksv1alpha1.LockClaim, uid types.UID) { c.Status.ObjectUID = uid }

func (o objectHolder) record(uid types.UID) *locksv1alpha1.RecordedHolder {
	return &locksv1alpha1.RecordedHolder{APIVersion: o.ref.APIVersion, Kind: o.ref.Kind, Name: o.ref.Name, UID: uid}
}

func (o objectHolder) rebuild(c *locksv1alpha1.LockClaim, uid types.UID) {
	ref := o.ref
	c.Spec.Holder = &locksv1alpha1.ClaimHolder{Object: &ref}
	if uid != "" {
		c.Status.ObjectUID = uid
		c.OwnerReferences = []metav1.OwnerReference{controllerRef(o.ref.APIVersion, o.ref.Kind, o.ref.Name, uid)}
	}
}

// indexKey: the object as workloads.RefKeyOf spells it; none for a kind it cannot spell.
func (o objectHolder) indexKey() (string, string) {
	if key := o.key(); key != "" {
		return indexClaimObject, key
	}
	return "", ""
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
