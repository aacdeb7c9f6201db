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
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/podliveness"
)

// podHolder is a claim's holder pod (spec.holder.podName): it holds while the pod of the UID the
// claim recorded runs, and, for a lock that sets holderNodeLossSeconds, while its Node is Ready
// or has not been unready that long. Pods come from the compact pod cache (Reconciler.Pods).
type podHolder struct{ name string }

// load reads the pod, and its Node when the claim holds and the lock judges holders by their node.
func (p podHolder) load(ctx context.Context, r *Reconciler, s *lockScope, c *locksv1alpha1.LockClaim) error {
	if err := r.loadPod(ctx, s, p.name); err != nil {
		return err
	}
	return r.loadNode(ctx, s, c, p.name)
}

func (p podHolder) waitVerdict(s *lockScope, c *locksv1alpha1.LockClaim) waiterVerdict {
	pod, uid := s.world.pods[p.name], c.Status.PodUID
	var seen types.UID
	if pod != nil && uid == "" {
		seen, uid = pod.UID, pod.UID
	}
	v := judgeWaiter(waiterFacts{lockName: s.lock.Name, namespace: c.Namespace, podName: p.name, pod: pod, podUID: uid})
	v.seen = seen
	return v
}

func (p podHolder) holdVerdict(s *lockScope, c *locksv1alpha1.LockClaim) (podliveness.Verdict, time.Duration) {
	pod := s.world.pods[p.name]
	if v := podliveness.Check(pod, p.name, c.Status.PodUID); !v.Alive {
		return v, 0
	}
	return s.nodeVerdict(pod)
}

// deletedWith: c is owned by the pod (a claim lockctl or the pod controller made), and the pod
// terminates with the foregroundDeletion finalizer, under which Kubernetes deletes dependents
// before the pod is gone.
func (p podHolder) deletedWith(s *lockScope, c *locksv1alpha1.LockClaim) bool {
	pod := s.world.pods[p.name]
	if pod == nil || pod.DeletionTimestamp.IsZero() || !slices.Contains(pod.Finalizers, metav1.FinalizerDeleteDependents) {
		return false
	}
	owner := metav1.GetControllerOf(c)
	return owner != nil && owner.UID == pod.UID
}

func (p podHolder) uid(s *lockScope, c *locksv1alpha1.LockClaim) types.UID {
	if c.Status.PodUID != "" {
		return c.Status.PodUID
	}
	if pod := s.world.pods[p.name]; pod != nil {
		return pod.UID
	}
	return ""
}

func (p podHolder) noteUID(c *locksv1alpha1.LockClaim, uid types.UID) { c.Status.PodUID = uid }

func (p podHolder) record(uid types.UID) *locksv1alpha1.RecordedHolder {
	return &locksv1alpha1.RecordedHolder{APIVersion: "v1", Kind: "Pod", Name: p.name, UID: uid}
}

func (p podHolder) rebuild(c *locksv1alpha1.LockClaim, uid types.UID) {
	c.Spec.Holder = &locksv1alpha1.ClaimHolder{PodName: p.name}
	if uid != "" {
		c.Status.PodUID = uid
		c.OwnerReferences = []metav1.OwnerReference{controllerRef("v1", "Pod", p.name, uid)}
	}
}

func (p podHolder) indexKey() (string, string) { return indexClaimPod, p.name }

// nodeVerdict is the liveness of a live holder pod's node under the lock's holderNodeLossSeconds
// (Alive when the lock does not set it): a node not Ready that long ends the hold as the pod's
// death would. A node not Ready for less asks for a pass when it would reach the limit, since no
// event comes then.
func (s *lockScope) nodeVerdict(pod *corev1.Pod) (podliveness.Verdict, time.Duration) {
	limit := s.lock.Spec.HolderNodeLossSeconds
	node, loaded := s.world.nodes[pod.Spec.NodeName]
	if limit == nil || !loaded {
		// Not loaded: the lock did not set the limit when the pass read it, or the pod has no
		// node. Never a verdict on a node the pass did not read.
		return podliveness.Verdict{Alive: true}, 0
	}
	return podliveness.CheckNode(node, pod.Name, pod.Spec.NodeName, time.Duration(*limit)*time.Second, s.now)
}

func (r *Reconciler) loadPod(ctx context.Context, s *lockScope, name string) error {
	if _, ok := s.world.pods[name]; ok {
		return nil
	}
	pod := &corev1.Pod{}
	switch err := r.Pods.Get(ctx, client.ObjectKey{Namespace: s.name.Namespace, Name: name}, pod); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	s.world.pods[name] = pod
	return nil
}

// loadNode reads from the cache the Node of pod podName of claim c, when c holds (a held claim,
// or one the lock record names) and the lock sets holderNodeLossSeconds: only holders are judged
// by their node (nodeVerdict), and only such locks read Nodes at all. A Node that does not exist
// is recorded as nil.
func (r *Reconciler) loadNode(ctx context.Context, s *lockScope, c *locksv1alpha1.LockClaim, podName string) error {
	if s.lock == nil || s.lock.Spec.HolderNodeLossSeconds == nil || !isHeld(c) && recordIndex(s.lock.Status.Holders, c) < 0 {
		return nil
	}
	pod := s.world.pods[podName]
	if pod == nil || pod.Spec.NodeName == "" {
		return nil
	}
	if _, ok := s.world.nodes[pod.Spec.NodeName]; ok {
		return nil
	}
	node := &corev1.Node{}
	switch err := r.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return err
	}
	if s.world.nodes == nil {
		s.world.nodes = map[string]*corev1.Node{}
	}
	s.world.nodes[pod.Spec.NodeName] = node
	return nil
}
