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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Field indexes that let watches wake exactly the objects that care.
const (
	// indexClaimLock indexes LockClaims by spec.lockName.
	indexClaimLock = "spec.lockName"
	// indexClaimPod indexes LockClaims by spec.holder.podName.
	indexClaimPod = "spec.holder.podName"
	// indexClaimLease indexes LockClaims by spec.holder.leaseName.
	indexClaimLease = "spec.holder.leaseName"
	// indexClaimObject indexes LockClaims by spec.holder.object, as workloads.RefKeyOf spells it.
	indexClaimObject = "spec.holder.object"
	// indexLockRecord indexes DistributedLocks by the claims and holders their record names
	// (recordIndexKeys): what wakes a lock whose holder's claim is gone.
	indexLockRecord = "status.holders"
	// indexLockBackend indexes DistributedLocks by the name of their backend.
	indexLockBackend = "spec.backendRef.name"
	// Pods are indexed by node in the pod cache (podcache.Cache.ListOnNode).
)

// fieldIndex is one field index: the objects it indexes, its field name, how to read it, and
// whether Lists look it up in one namespace or across all.
type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
	scope   indexScope
}

// indexScope says under which keys an index files an object. controller-runtime's own
// IndexField files every namespaced object twice, under its namespace and under all namespaces;
// each index here is looked up only one way, so it files each object once. At 10,000 pod claims
// the second copy of the claims' pod-name index alone was 10,000 one-element sets.
type indexScope int

const (
	// namespaced answers a List in one namespace (client.InNamespace); a List across all
	// namespaces finds nothing in it.
	namespaced indexScope = iota
	// clusterWide answers a List across all namespaces; a List in one namespace finds nothing.
	clusterWide
)

// fieldIndexes are the field indexes every reconciler relies on.
var fieldIndexes = []fieldIndex{
	{&locksv1alpha1.LockClaim{}, indexClaimLock, func(o client.Object) []string {
		return claimLocks(o.(*locksv1alpha1.LockClaim))
	}, namespaced},
	{&locksv1alpha1.LockClaim{}, indexClaimPod, holderIndex(indexClaimPod), namespaced},
	{&locksv1alpha1.LockClaim{}, indexClaimLease, holderIndex(indexClaimLease), namespaced},
	{&locksv1alpha1.LockClaim{}, indexClaimObject, holderIndex(indexClaimObject), namespaced},
	{&locksv1alpha1.DistributedLock{}, indexLockRecord, func(o client.Object) []string {
		return recordIndexKeys(o.(*locksv1alpha1.DistributedLock).Status.CurrentHolders())
	}, namespaced},
	{&locksv1alpha1.DistributedLock{}, indexLockBackend, func(o client.Object) []string {
		return []string{o.(*locksv1alpha1.DistributedLock).BackendName()}
	}, clusterWide},
}

// holderIndex files a claim under its holder in the index of the holder's kind
// (holder.indexKey), and nowhere in the others.
func holderIndex(index string) client.IndexerFunc {
	return func(o client.Object) []string {
		if ix, key := holderOf(o.(*locksv1alpha1.LockClaim)).indexKey(); ix == index {
			return []string{key}
		}
		return nil
	}
}

// SetupIndexes registers the field indexes every reconciler relies on. Call it once, before the
// reconcilers are set up.
func SetupIndexes(ctx context.Context, mgr manager.Manager) error {
	for _, ix := range fieldIndexes {
		informer, err := mgr.GetCache().GetInformer(ctx, ix.obj)
		if err != nil {
			return err
		}
		if err := informer.AddIndexers(toolscache.Indexers{cacheIndexName(ix.field): ix.indexFunc()}); err != nil {
			return err
		}
	}
	return nil
}

// cacheIndexName is the name under which the manager's cache looks up the index of field when a
// List has client.MatchingFields on it (controller-runtime's FieldIndexName, internal to it).
func cacheIndexName(field string) string { return "field:" + field }

// allNamespacesKey is the namespace part of the key under which the manager's cache looks a value
// up in a List across all namespaces (controller-runtime's KeyToNamespacedKey, internal to it).
const allNamespacesKey = "__all_namespaces"

// indexFunc files an object under "namespace/value" (namespaced) or "__all_namespaces/value"
// (clusterWide) for each value extract reads from it: the key the cache looks up for a List with
// client.MatchingFields.
func (ix fieldIndex) indexFunc() toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		o, ok := obj.(client.Object)
		if !ok {
			return nil, nil
		}
		values := ix.extract(o)
		if len(values) == 0 {
			return nil, nil
		}
		ns := allNamespacesKey
		if ix.scope == namespaced {
			ns = o.GetNamespace()
		}
		keys := make([]string, len(values))
		for i, v := range values {
			keys[i] = ns + "/" + v
		}
		return keys, nil
	}
}

func ctrlObjectMeta(nn types.NamespacedName) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}
}
