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
	"errors"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/intern"
	"github.com/lockwarden/lockwarden/internal/workloads"
)

// CacheOptions are the manager's cache options: what the informers keep of each object. No
// cached object keeps its managedFields, which nothing here reads and which are often the
// larger part of an object. Cached LockClaims share the strings they repeat (trimClaim). Pods
// are not in this cache at all (NewCache refuses them) but in the pod cache (podcache). Of Leases it keeps only heartbeat Leases (the label
// locks.lockwarden.io/heartbeat: "true"): a cluster's nodes renew one Lease each every 10 s, and
// the controller's own Leases (key ledger, built-in backend, leader election) are read from the
// API server, never from the cache. Every Node is cached (holders' nodes, holderNodeLossSeconds),
// each reduced to its name and Ready condition: a few hundred bytes a node, whatever images
// and addresses it lists. Every object of the listed workload kinds is cached, each reduced to
// the fields its kind's rules read (trimWorkload): a Job's pod template or a PipelineRun's inline
// pipeline can be large. kinds must be the ones the
// controllers are set up with (Options.Workloads).
func CacheOptions(kinds *workloads.Registry) cache.Options {
	strs := intern.New(maxInternedClaimStrings)
	byObject := map[client.Object]cache.ByObject{
		&locksv1alpha1.LockClaim{}: {Transform: func(obj any) (any, error) { return trimClaim(obj, strs) }},
		&corev1.Node{}:             {Transform: trimNode},
		&coordinationv1.Lease{}:    {Label: labels.SelectorFromSet(labels.Set{locksv1alpha1.HeartbeatLabel: "true"})},
	}
	for _, k := range kinds.Kinds() {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(k.GVK)
		byObject[obj] = cache.ByObject{Transform: func(obj any) (any, error) { return trimWorkload(k, obj) }}
	}
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: byObject}
}

// maxInternedClaimStrings bounds the strings the claim transform shares between cached claims
// (internal/intern): namespaces, lock names, condition reasons and messages. A cluster has far
// fewer distinct ones; a table this size takes at most about a megabyte.
const maxInternedClaimStrings = 16384

// lockAnnotationPrefix is the prefix of every annotation lockwarden reads or writes on an object.
const lockAnnotationPrefix = "locks.lockwarden.io/"

// NewCache makes the manager's cache, as cache.New does, except that it refuses Pods: they are
// kept by the pod cache (podcache), in a fraction of the memory. A Get, List or informer of
// Pods here would quietly start a second informer of every Pod in the cluster, the largest thing
// the manager could keep; it is an error instead, which every test of a reconciler would show.
func NewCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return noPods{c}, nil
}

// errPodsNotCached is what the manager's cache answers for Pods.
var errPodsNotCached = errors.New("the manager's cache keeps no Pods: read them from the pod cache (internal/podcache)")

// noPods is the manager's cache without Pods.
type noPods struct{ cache.Cache }

// isPod says whether obj is a Pod or a list of them, typed or not.
func isPod(obj runtime.Object) bool {
	switch obj.(type) {
	case *corev1.Pod, *corev1.PodList:
		return true
	}
	return isPodKind(obj.GetObjectKind().GroupVersionKind())
}

func isPodKind(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "" && (gvk.Kind == "Pod" || gvk.Kind == "PodList")
}

func (c noPods) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if isPod(obj) {
		return errPodsNotCached
	}
	return c.Cache.Get(ctx, key, obj, opts...)
}

func (c noPods) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if isPod(list) {
		return errPodsNotCached
	}
	return c.Cache.List(ctx, list, opts...)
}

func (c noPods) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if isPod(obj) {
		return nil, errPodsNotCached
	}
	return c.Cache.GetInformer(ctx, obj, opts...)
}

func (c noPods) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if isPodKind(gvk) {
		return nil, errPodsNotCached
	}
	return c.Cache.GetInformerForKind(ctx, gvk, opts...)
}

// trimClaim drops a LockClaim's managedFields, as every cached object's, and shares the strings
// that many claims repeat through strs: namespace, type, label and annotation keys, owner kinds,
// finalizers, lock name and mode, phase, and the conditions' type, status, reason and message
// (a lock's waiters all carry the same message). Only the memory changes, never a value: the
// lock's pass compares a claim's status with the one it would write, field by field, to decide
// whether to write. The claim is changed in place: the informer has just decoded it, and
// nothing else holds it yet.
func trimClaim(obj any, strs *intern.Table) (any, error) {
	claim, ok := obj.(*locksv1alpha1.LockClaim)
	if !ok {
		return obj, nil
	}
	claim.ManagedFields = nil
	claim.APIVersion, claim.Kind = strs.String(claim.APIVersion), strs.String(claim.Kind)
	claim.Namespace = strs.String(claim.Namespace)
	claim.Labels = internKeys(claim.Labels, strs)
	claim.Annotations = internKeys(claim.Annotations, strs)
	for i := range claim.OwnerReferences {
		ref := &claim.OwnerReferences[i]
		ref.APIVersion, ref.Kind = strs.String(ref.APIVersion), strs.String(ref.Kind)
	}
	for i, f := range claim.Finalizers {
		claim.Finalizers[i] = strs.String(f)
	}
	claim.Spec.LockName = strs.String(claim.Spec.LockName)
	claim.Spec.Mode = locksv1alpha1.LockMode(strs.String(string(claim.Spec.Mode)))
	claim.Status.Phase = locksv1alpha1.ClaimPhase(strs.String(string(claim.Status.Phase)))
	for i := range claim.Status.Conditions {
		c := &claim.Status.Conditions[i]
		c.Type, c.Reason, c.Message = strs.String(c.Type), strs.String(c.Reason), strs.String(c.Message)
		c.Status = metav1.ConditionStatus(strs.String(string(c.Status)))
	}
	return claim, nil
}

// internKeys returns m with its keys shared through strs (its values, often one per object, are
// kept as they are); nil for an empty map.
func internKeys(m map[string]string, strs *intern.Table) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strs.String(k)] = v
	}
	return out
}

// trimNode keeps of a Node what the lock engine reads to judge a holder pod by its node
// (holderNodeLossSeconds): its name, its resourceVersion and its Ready condition's status, reason
// and transition time. The condition's heartbeat time and message are dropped: the heartbeat time
// changes at every status report of the kubelet, and nothing reads either.
func trimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		// A tombstone (DeletedFinalStateUnknown) or another type: leave it as it is.
		return obj, nil
	}
	var conditions []corev1.NodeCondition
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return &corev1.Node{
		TypeMeta:   node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, ResourceVersion: node.ResourceVersion},
		Status:     corev1.NodeStatus{Conditions: conditions},
	}, nil
}

// trimWorkload keeps of a workload object, of kind k, what the lock engine and the workload
// controller read: its identity, resourceVersion, creation and deletion (and whether it is a
// foreground one), owners, its lockwarden annotations, and the fields that the rules of
// internal/workloads read of an object of its kind (k.Fields: its suspended state, its service
// account, the status that says how far it has run), no more. Like a trimmed Pod, a trimmed object
// is only ever patched with a patch that names what it changes, never updated.
func trimWorkload(k workloads.Kind, obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	trimmed := &unstructured.Unstructured{Object: map[string]any{}}
	trimmed.SetAPIVersion(u.GetAPIVersion())
	trimmed.SetKind(u.GetKind())
	trimmed.SetName(u.GetName())
	trimmed.SetNamespace(u.GetNamespace())
	trimmed.SetUID(u.GetUID())
	trimmed.SetResourceVersion(u.GetResourceVersion())
	trimmed.SetGeneration(u.GetGeneration())
	trimmed.SetCreationTimestamp(u.GetCreationTimestamp())
	trimmed.SetDeletionTimestamp(u.GetDeletionTimestamp())
	trimmed.SetOwnerReferences(u.GetOwnerReferences())
	if slices.Contains(u.GetFinalizers(), metav1.FinalizerDeleteDependents) {
		// A foreground deletion deletes the object's claim before the object: its hold lasts
		// until the object is gone.
		trimmed.SetFinalizers([]string{metav1.FinalizerDeleteDependents})
	}
	trimmed.SetAnnotations(lockAnnotations(u.GetAnnotations()))
	trimmed.SetLabels(keptLabels(u.GetLabels()))
	for _, f := range k.Fields() {
		keepField(trimmed.Object, u.Object, f)
	}
	return trimmed, nil
}

// keptLabels are the labels of labels that the workload rules read (workloads.KeptLabels); nil
// when there are none.
func keptLabels(labels map[string]string) map[string]string {
	var kept map[string]string
	for _, key := range workloads.KeptLabels {
		if v, ok := labels[key]; ok {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[key] = v
		}
	}
	return kept
}

// lockAnnotations are the lockwarden annotations of annotations; nil when there are none.
func lockAnnotations(annotations map[string]string) map[string]string {
	var kept map[string]string
	for k, v := range annotations {
		if strings.HasPrefix(k, lockAnnotationPrefix) {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[k] = v
		}
	}
	return kept
}

// keepField copies field f from the object src into dst: all of its value or, for a list of
// objects with f.Keys, only those keys of each item.
func keepField(dst, src map[string]any, f workloads.Field) {
	v, found, _ := unstructured.NestedFieldNoCopy(src, f.Path...)
	if !found {
		return
	}
	items, isList := v.([]any)
	if len(f.Keys) == 0 || !isList {
		_ = unstructured.SetNestedField(dst, runtime.DeepCopyJSONValue(v), f.Path...)
		return
	}
	kept := make([]any, 0, len(items))
	for _, item := range items {
		if m, ok := item.(map[string]any); ok {
			c := map[string]any{}
			for _, key := range f.Keys {
				if v, ok := m[key]; ok {
					c[key] = runtime.DeepCopyJSONValue(v)
				}
			}
			kept = append(kept, c)
		}
	}
	_ = unstructured.SetNestedField(dst, kept, f.Path...)
}
