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

package podcache

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// fakeCluster is a cache fed by a fake list and watch: the pods listed first, then events.
type fakeCluster struct {
	cache  *Cache
	events *watch.FakeWatcher
}

func startFake(t *testing.T, listed ...corev1.Pod) *fakeCluster {
	t.Helper()
	events := watch.NewFakeWithChanSize(16, false)
	lw := listThenWatch{&toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: listed}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return events, nil },
	}}
	f := &fakeCluster{cache: newCache(lw), events: events}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.cache.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// listThenWatch tells the reflector to list, then watch: a fake watch cannot stream the initial
// list as the API server's watch-list does.
type listThenWatch struct{ *toolscache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

func podNamed(namespace, name, node, role string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name), ResourceVersion: "1"},
		Spec: corev1.PodSpec{NodeName: node}}
	if role != "" {
		p.Labels = map[string]string{locksv1alpha1.PodRoleLabel: role}
	}
	return p
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

func TestCacheReads(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := startFake(t,
		podNamed("apps", "web-0", "node-1", locksv1alpha1.PodRoleHolder),
		podNamed("apps", "web-1", "node-1", locksv1alpha1.PodRoleStandby),
		podNamed("other", "web-0", "node-2", locksv1alpha1.PodRoleHolder),
		podNamed("apps", "batch", "", ""))
	g.Eventually(f.cache.HasSynced).Should(BeTrue())

	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "left over"}}}}
	g.Expect(f.cache.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "web-0"}, pod)).To(Succeed())
	g.Expect(pod.UID).To(Equal(types.UID("web-0")))
	g.Expect(pod.Spec.Containers).To(BeEmpty(), "Get overwrites the whole pod it is given")
	err := f.cache.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "gone"}, pod)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a pod the cache does not hold is NotFound, as the API server says: %v", err)

	onNode, err := f.cache.ListOnNode("node-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(onNode)).To(ConsistOf("apps/web-0", "apps/web-1"))
	holders, err := f.cache.ListWithRole("apps", locksv1alpha1.PodRoleHolder)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(holders)).To(ConsistOf("apps/web-0"), "only the namespace's pods with that role")

	// A watch event moves a pod to another node and role; the indexes follow.
	moved := podNamed("apps", "web-0", "node-2", locksv1alpha1.PodRoleStandby)
	moved.ResourceVersion = "2"
	f.events.Modify(&moved)
	g.Eventually(func() ([]string, error) {
		pods, err := f.cache.ListOnNode("node-2")
		return names(pods), err
	}).Should(ConsistOf("apps/web-0", "other/web-0"))
	holders, err = f.cache.ListWithRole("apps", locksv1alpha1.PodRoleHolder)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders).To(BeEmpty())
}

func TestCacheRefusesReadsBeforeItHasListed(t *testing.T) {
	g := NewWithT(t)
	c := newCache(&toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.PodList{}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	})
	// Not started: a holder's pod must not be taken for gone because the list is not in yet.
	g.Expect(c.Get(context.Background(), types.NamespacedName{Namespace: "apps", Name: "web-0"}, &corev1.Pod{})).To(MatchError(ErrNotSynced))
	_, err := c.ListOnNode("node-1")
	g.Expect(err).To(MatchError(ErrNotSynced))
	_, err = c.ListWithRole("apps", locksv1alpha1.PodRoleHolder)
	g.Expect(err).To(MatchError(ErrNotSynced))
}

// seen records what an event handler is given.
type seen struct {
	mu     sync.Mutex
	events []string
	types  []any
}

func (s *seen) add(kind string, objs ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, kind)
	s.types = append(s.types, objs...)
}

func (s *seen) get() ([]string, []any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...), append([]any(nil), s.types...)
}

func TestInformerHandlersSeePods(t *testing.T) {
	g := NewWithT(t)
	f := startFake(t, podNamed("apps", "web-0", "node-1", ""))
	s := &seen{}
	_, err := f.cache.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.add("add", obj) },
		UpdateFunc: func(old, obj any) { s.add("update", old, obj) },
		DeleteFunc: func(obj any) { s.add("delete", obj) },
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.cache.HasSynced).Should(BeTrue())

	updated := podNamed("apps", "web-0", "node-1", locksv1alpha1.PodRoleHolder)
	updated.ResourceVersion = "2"
	f.events.Modify(&updated)
	f.events.Delete(&updated)
	g.Eventually(func() []string { e, _ := s.get(); return e }, 5*time.Second).Should(Equal([]string{"add", "update", "delete"}))

	_, objs := s.get()
	for _, obj := range objs {
		g.Expect(obj).To(BeAssignableToTypeOf(&corev1.Pod{}), "handlers see pods, never the cache's records")
	}
	g.Expect(objs[2].(*corev1.Pod).Labels).To(HaveKeyWithValue(locksv1alpha1.PodRoleLabel, locksv1alpha1.PodRoleHolder))
}
