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

// Package podcache keeps every Pod of the cluster in the few fields lockwarden reads (record),
// outside the manager's cache. Two controllers watch every pod: the lock engine (a holder's pod
// that dies releases its hold) and the pod lock controller (annotated and gated pods). A pod in
// the manager's cache is a full corev1.Pod, about 2 KB even trimmed by a transform; here it is
// about 400 bytes, which at 10,000 pods is most of the difference between a manager that fits
// in 64 MiB and one that does not.
//
// Readers get a *corev1.Pod expanded from the record, which they own; event handlers registered
// through Informer see the same. The manager's cache refuses Pods (controller.NewCache), so that
// no reconciler can bring back a full Pod informer by reading a pod through the manager's client.
package podcache

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/lockwarden/lockwarden/internal/intern"
)

// ErrNotSynced is returned by reads before the cache has listed every pod: a pod missing then
// may exist, and a holder's pod taken for gone would have its hold released.
var ErrNotSynced = errors.New("the pod cache has not listed the cluster's pods yet")

// Index names of the informer's indexers.
const (
	byNode = "node"
	byRole = "namespace/role"
)

// maxInterned bounds the strings the records share (namespaces, node names, lock names): a
// cluster has far fewer distinct ones; a table this size takes at most about a megabyte.
const maxInterned = 16384

// Cache is the compact pod cache. It is a manager Runnable that runs on every replica, as the
// manager's own cache does, so that a standby that becomes leader starts with every pod known.
type Cache struct {
	informer toolscache.SharedIndexInformer
}

// New returns a cache of every Pod the API server at cfg serves, read as protobuf (cheaper for
// the API server to encode than JSON). Start runs it.
func New(cfg *rest.Config) (*Cache, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	clients, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the pod cache's client: %w", err)
	}
	return newCache(toolscache.NewListWatchFromClient(clients.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.Everything())), nil
}

// newCache returns a cache fed by lw (the tests' is a fake).
func newCache(lw toolscache.ListerWatcher) *Cache {
	strs := intern.New(maxInterned)
	informer := toolscache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, toolscache.SharedIndexInformerOptions{
		ObjectDescription: "pods (compact)",
		Indexers: toolscache.Indexers{
			byNode: func(obj any) ([]string, error) {
				if r, ok := obj.(*record); ok && r.node != "" {
					return []string{r.node}, nil
				}
				return nil, nil
			},
			byRole: func(obj any) ([]string, error) {
				if r, ok := obj.(*record); ok && r.role != "" {
					return []string{roleKey(r.Namespace, r.role)}, nil
				}
				return nil, nil
			},
		},
	})
	// The transform runs before the store keeps an object: the decoded Pod is dropped at once.
	if err := informer.SetTransform(func(obj any) (any, error) { return compactAny(obj, strs), nil }); err != nil {
		panic(err) // only once the informer has started
	}
	return &Cache{informer: informer}
}

// compactAny compacts a Pod, also inside a tombstone; anything else passes as it is.
func compactAny(obj any, strs *intern.Table) any {
	switch o := obj.(type) {
	case *corev1.Pod:
		return compact(o, strs)
	case toolscache.DeletedFinalStateUnknown:
		if pod, ok := o.Obj.(*corev1.Pod); ok {
			o.Obj = compact(pod, strs)
		}
		return o
	}
	return obj
}

func roleKey(namespace, role string) string { return namespace + "/" + role }

// Start runs the informer until ctx ends.
func (c *Cache) Start(ctx context.Context) error {
	c.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: every replica keeps its pods warm.
func (c *Cache) NeedLeaderElection() bool { return false }

// HasSynced says whether the first list of pods is in.
func (c *Cache) HasSynced() bool { return c.informer.HasSynced() }

// Get writes the pod named key into pod; a pod not in the cache is a NotFound error, as the
// API server's.
func (c *Cache) Get(_ context.Context, key types.NamespacedName, pod *corev1.Pod) error {
	if !c.HasSynced() {
		return ErrNotSynced
	}
	obj, ok, err := c.informer.GetIndexer().GetByKey(key.String())
	if err != nil {
		return err
	}
	r, isRecord := obj.(*record)
	if !ok || !isRecord {
		return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
	}
	r.expand(pod)
	return nil
}

// ListOnNode returns the pods bound to node.
func (c *Cache) ListOnNode(node string) ([]corev1.Pod, error) {
	return c.list(byNode, node)
}

// ListWithRole returns the pods of namespace whose role label (locks.lockwarden.io/role) is role.
func (c *Cache) ListWithRole(namespace, role string) ([]corev1.Pod, error) {
	return c.list(byRole, roleKey(namespace, role))
}

func (c *Cache) list(index, value string) ([]corev1.Pod, error) {
	if !c.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := c.informer.GetIndexer().ByIndex(index, value)
	if err != nil {
		return nil, err
	}
	pods := make([]corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if r, ok := obj.(*record); ok {
			pods = append(pods, corev1.Pod{})
			r.expand(&pods[len(pods)-1])
		}
	}
	return pods, nil
}

// Informer is the informer as controller-runtime's sources take it (source.Informer): the event
// handlers added through it see each pod as a new *corev1.Pod expanded from its record.
func (c *Cache) Informer() crcache.Informer { return expandingInformer{c.informer} }

// expandingInformer hands its handlers pods, not records.
type expandingInformer struct{ toolscache.SharedIndexInformer }

func (i expandingInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(expanding{h})
}

func (i expandingInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(expanding{h}, resync)
}

func (i expandingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(expanding{h}, o)
}

// expanding passes each event on with its records expanded into pods.
type expanding struct {
	next toolscache.ResourceEventHandler
}

func (e expanding) OnAdd(obj any, isInInitialList bool) {
	e.next.OnAdd(expandAny(obj), isInInitialList)
}
func (e expanding) OnUpdate(old, obj any) { e.next.OnUpdate(expandAny(old), expandAny(obj)) }
func (e expanding) OnDelete(obj any)      { e.next.OnDelete(expandAny(obj)) }

// expandAny expands a record, also inside a tombstone; anything else passes as it is.
func expandAny(obj any) any {
	switch o := obj.(type) {
	case *record:
		return o.pod()
	case toolscache.DeletedFinalStateUnknown:
		if r, ok := o.Obj.(*record); ok {
			o.Obj = r.pod()
		}
		return o
	}
	return obj
}
