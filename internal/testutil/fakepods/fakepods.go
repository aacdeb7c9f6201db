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

// Package fakepods stands in for the pod cache (internal/podcache) in unit tests that run
// reconciles without a manager: it reads the pods of any client.Reader (a fake client) and gives
// each as the cache would (podcache.AsRead), so that the code under test never sees a field the
// cache drops. It has no informer.
package fakepods

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/podcache"
)

// Reader reads the pods of C as the pod cache gives them.
type Reader struct{ C client.Reader }

// Get writes the pod named key into pod, or returns C's error (NotFound for a missing pod).
func (r Reader) Get(ctx context.Context, key client.ObjectKey, pod *corev1.Pod) error {
	full := &corev1.Pod{}
	if err := r.C.Get(ctx, key, full); err != nil {
		return err
	}
	*pod = *podcache.AsRead(full)
	return nil
}

// ListOnNode returns the pods bound to node.
func (r Reader) ListOnNode(node string) ([]corev1.Pod, error) {
	return r.list(func(p *corev1.Pod) bool { return p.Spec.NodeName == node })
}

// ListWithRole returns the pods of namespace whose role label is role.
func (r Reader) ListWithRole(namespace, role string) ([]corev1.Pod, error) {
	return r.list(func(p *corev1.Pod) bool {
		return p.Namespace == namespace && p.Labels[locksv1alpha1.PodRoleLabel] == role
	})
}

func (r Reader) list(keep func(*corev1.Pod) bool) ([]corev1.Pod, error) {
	all := &corev1.PodList{}
	if err := r.C.List(context.Background(), all); err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	for i := range all.Items {
		if keep(&all.Items[i]) {
			pods = append(pods, *podcache.AsRead(&all.Items[i]))
		}
	}
	return pods, nil
}

// Informer panics: a test without a manager has no watches to feed.
func (Reader) Informer() cache.Informer {
	panic("fakepods: unit tests run reconciles without a manager, so there is no pod informer")
}
