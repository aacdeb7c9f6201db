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

package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/claimrights"
)

// This file holds the one path from an annotated owner (a pod, or a workload object) to its
// claim, which the pod lock and workload controllers share: find the owner's claim
// (controlledClaim), ask whether the owner's service account may have one (mayClaimFor), and
// create it (createOwnedClaim). What the annotations ask for, and their messages, is
// annotated_claim.go.

// claimOwner is an annotated object that gets a claim of its own, controlled by it.
type claimOwner struct {
	// obj is the pod or workload object: the claim's controller, and where the events go.
	obj client.Object
	// apiVersion and kind name obj in the claim's owner reference (a typed pod's TypeMeta is
	// often empty).
	apiVersion, kind string
	// annotations says which annotations obj's claim follows.
	annotations ownerKind
	// holder is the claim's spec.holder: the pod, or the object.
	holder locksv1alpha1.ClaimHolder
	// label is the claim's label that names obj (PodClaimLabel or WorkloadClaimLabel).
	label string
	// notWaiting, when set, says why obj does not wait for the claim it gets (a workload object
	// created running, a pod without its scheduling gate): the event of the claim's creation is
	// then a Warning of reason notWaitingReason (NotSuspended, NotGated), this sentence at its end.
	notWaiting, notWaitingReason string
}

// errForeignClaim says that a claim of the owner's claim name is not the owner's own: it goes with
// an earlier pod (or object) of that name, and its deletion wakes the owner.
var errForeignClaim = errors.New("the claim name is taken by a claim that is not the owner's own")

// errForgedClaim says that a claim of the owner's claim name is controlled by the owner but is
// not the claim the controller makes for it: another lock, another holder, or a holder.identity
// of its own. Anyone who may create claims can set an owner reference, and an identity copied
// from a lock's status once let such a claim share another pod's hold; the controller neither
// follows nor marks an owner for a claim it would not have made.
var errForgedClaim = errors.New("the claim of the owner's name is not the claim the controller makes for it")

// controlledClaim returns the claim called name in owner's namespace when owner controls it and it
// is the claim the controller makes (madeFor lockName and holder); nil when there is none,
// errForeignClaim when a claim of that name has another controller, and errForgedClaim when
// owner controls it but the controller would not have made it.
func controlledClaim(ctx context.Context, c client.Reader, owner metav1.Object, name, lockName string, holder locksv1alpha1.ClaimHolder) (*locksv1alpha1.LockClaim, error) {
	claim := &locksv1alpha1.LockClaim{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, claim); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !metav1.IsControlledBy(claim, owner):
		return nil, errForeignClaim
	case !madeFor(claim, lockName, holder):
		return nil, errForgedClaim
	}
	return claim, nil
}

// replaceOwnedClaim replaces owner's ended claim with a new one of the same name, as its
// annotations ask: the delete is preconditioned on the ended claim's UID, and claims carry no
// finalizer, so the name is free at once. The new claim queues at the tail and, if granted, gets a
// new token. (A Standby or still-gated pod, podlock_requeue.go; a Workflow run again,
// workload_rerun.go.)
func replaceOwnedClaim(ctx context.Context, c client.Writer, recorder events.EventRecorder, owner claimOwner, ended *locksv1alpha1.LockClaim) error {
	if err := c.Delete(ctx, ended, client.Preconditions{UID: &ended.UID}); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("deleting %s %s's ended LockClaim %s: %w", owner.kind, owner.obj.GetName(), ended.Name, err))
	}
	_, err := createOwnedClaim(ctx, c, recorder, owner, ended.Name)
	return err
}

// existingLocks reads the locks names from the cache, leaving out those that do not exist.
func existingLocks(ctx context.Context, c client.Reader, namespace string, names []string) ([]*locksv1alpha1.DistributedLock, error) {
	var locks []*locksv1alpha1.DistributedLock
	for _, name := range names {
		lock := &locksv1alpha1.DistributedLock{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, lock); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		locks = append(locks, lock)
	}
	return locks, nil
}

// heldBefore says whether owner (a pod, or a workload object) held its lock once: the controller
// writes the token annotation only on an owner whose claim holds, beside the holder annotation,
// which names the claim's identity, the owner's own UID. An object copied from one that held
// (kubectl get -o yaml and create, kubectl debug --copy-to) carries both annotations with another
// UID: it never held, and is not taken for one whose claim was deleted (no claim, no event,
// suspended for ever); it queues as any new object does.
func heldBefore(owner metav1.Object) bool {
	annotations := owner.GetAnnotations()
	_, token := annotations[locksv1alpha1.PodFencingTokenAnnotation]
	return token && annotations[locksv1alpha1.PodHolderAnnotation] == string(owner.GetUID())
}

// madeFor says whether claim is one the controller makes for holder on lock lockName: that lock,
// and that holder exactly (a pod, or a workload object), with no identity of its own.
func madeFor(claim *locksv1alpha1.LockClaim, lockName string, holder locksv1alpha1.ClaimHolder) bool {
	return locksv1alpha1.LocksLabel(claim.Spec.Locks()) == lockName && claim.Spec.Holder != nil && equality.Semantic.DeepEqual(*claim.Spec.Holder, holder)
}

// createOwnedClaim creates owner's claim, called name, as its annotations ask (annotatedSpec);
// nil, without error, when they cannot make one (a Warning event says why) or the cache is behind
// our own create. The claim is labelled with owner's name and controlled by it, so that it goes
// when owner goes.
func createOwnedClaim(ctx context.Context, c client.Writer, recorder events.EventRecorder, owner claimOwner, name string) (*locksv1alpha1.LockClaim, error) {
	obj := owner.obj
	spec, problem := annotatedSpec(obj.GetAnnotations(), owner.annotations)
	if problem != nil {
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, problem.reason, "WaitForLock", "%s", problem.message)
		return nil, nil
	}
	spec.Holder = owner.holder.DeepCopy()
	controller := true
	claim := &locksv1alpha1.LockClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: obj.GetNamespace(),
			Name:      name,
			Labels:    map[string]string{owner.label: podLabelValue(obj.GetName())},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.apiVersion, Kind: owner.kind, Name: obj.GetName(),
				UID: obj.GetUID(), Controller: &controller}},
		},
		Spec: spec,
	}
	lockName := locksv1alpha1.LocksLabel(spec.Locks())
	if err := c.Create(ctx, claim); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil // a cache behind our own create; the claim's event wakes us
		}
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, "ClaimFailed", "WaitForLock",
			"Could not create LockClaim %s for lock %s: %v", name, lockName, err)
		return nil, err
	}
	msg := fmt.Sprintf("Created LockClaim %s for lock %s", name, lockName)
	if owner.notWaiting != "" {
		recorder.Eventf(obj, claim, corev1.EventTypeWarning, owner.notWaitingReason, "WaitForLock", "%s; %s", msg, owner.notWaiting)
		return claim, nil
	}
	recorder.Eventf(obj, claim, corev1.EventTypeNormal, "ClaimCreated", "WaitForLock", "%s", msg)
	return claim, nil
}

// podLabelValue fits a pod's (or object's) name into a label value (at most 63 characters).
func podLabelValue(pod string) string {
	if len(pod) <= validation.LabelValueMaxLength {
		return pod
	}
	sum := sha256.Sum256([]byte(pod))
	return hex.EncodeToString(sum[:])[:validation.LabelValueMaxLength]
}

// mayClaimFor asks rights (nil: everyone may) whether serviceAccount, which obj (an annotated pod
// or workload) runs as, may create LockClaims in obj's namespace, which the claim made on obj's
// behalf needs (claimrights): anyone who creates obj may run it as that account, so the
// annotation gives it no more than the account could take with lockctl. A refused obj gets a
// Warning event and is looked at again once the answer is old (retry), so that a RoleBinding made
// afterwards takes effect.
func mayClaimFor(ctx context.Context, rights *claimrights.Checker, recorder events.EventRecorder, obj client.Object,
	serviceAccount, lockName string) (allowed bool, retry time.Duration, err error) {
	if rights == nil {
		return true, 0, nil
	}
	v, err := rights.MayClaim(ctx, obj.GetNamespace(), serviceAccount)
	if err != nil {
		return false, 0, err
	}
	if !v.Allowed {
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonClaimNotAllowed, "WaitForLock", "%s",
			claimNotAllowedMessage(obj.GetNamespace(), serviceAccount, lockName))
	}
	return v.Allowed, v.RetryAfter, nil
}

// ReasonClaimNotAllowed is the reason of the Warning event on a pod or workload object whose
// service account may not create the claim its annotation asks for.
const ReasonClaimNotAllowed = "ClaimNotAllowed"

// claimNotAllowedMessage says why no claim was made for lock on behalf of a workload running as
// serviceAccount of namespace, and how to allow it.
func claimNotAllowedMessage(namespace, serviceAccount, lock string) string {
	if serviceAccount == "" {
		serviceAccount = claimrights.DefaultServiceAccount
	}
	return fmt.Sprintf("Service account %s/%s may not create LockClaims in namespace %s, so no claim is made for lock %s on its behalf: "+
		"bind it to a Role that may (the lockctl Role of config/samples/pods/lockctl-rbac.yaml, for one); this is looked at again within seconds",
		namespace, serviceAccount, namespace, lock)
}
