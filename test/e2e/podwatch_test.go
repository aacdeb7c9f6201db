//go:build e2e

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

package e2e

import (
	"context"
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podWatch follows a namespace's pods through a watch of the API server until stopped: after
// every change it calls check with every pod as the API server has it then, keeps the first
// thing check reports wrong, and remembers which pods it has seen on a node. A watch, not a
// poll: it sees every state the pods pass through, so an overlap shorter than any polling
// period is caught too. A spec waits in each round until the watch has seen that round's pod on
// its node (sawOnNode), so that the watch has caught up with the round before the spec moves on.
type podWatch struct {
	cancel  context.CancelFunc
	stopped chan struct{}
	mu      sync.Mutex
	events  int
	wrong   string
	onNode  map[string]bool
}

func watchPods(ns string, check func(pods []corev1.Pod) string) *podWatch {
	watchCtx, cancel := context.WithCancel(ctx())
	w := &podWatch{cancel: cancel, stopped: make(chan struct{}), onNode: map[string]bool{}}
	go func() {
		defer GinkgoRecover()
		defer close(w.stopped)
		pods := map[string]corev1.Pod{}
		// Without a resourceVersion the watch starts with an ADDED event for every pod that
		// exists; a watch the API server ends is resumed from the last version seen, so that no
		// change is skipped.
		resume := ""
		for watchCtx.Err() == nil {
			events, err := k8sClient.Watch(watchCtx, &corev1.PodList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: resume}})
			if err != nil {
				w.report(fmt.Sprintf("watching the pods of %s: %v", ns, err))
				return
			}
			for e := range events.ResultChan() {
				p, ok := e.Object.(*corev1.Pod)
				if !ok {
					if watchCtx.Err() != nil {
						events.Stop()
						return // halted: the watch ends with an error event of its own
					}
					w.report(fmt.Sprintf("the watch of the pods of %s ended with %v", ns, e.Object))
					events.Stop()
					return
				}
				resume = p.ResourceVersion
				if e.Type == apiwatch.Deleted {
					delete(pods, p.Name)
				} else {
					pods[p.Name] = *p
				}
				w.observe(pods, check)
			}
			events.Stop()
		}
	}()
	return w
}

// observe checks the pods as they are after one change.
func (w *podWatch) observe(pods map[string]corev1.Pod, check func(pods []corev1.Pod) string) {
	all := make([]corev1.Pod, 0, len(pods))
	for _, p := range pods {
		all = append(all, p)
	}
	wrong := check(all)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if wrong != "" && w.wrong == "" {
		w.wrong = wrong
	}
	for _, p := range all {
		if p.Spec.NodeName != "" {
			w.onNode[p.Name] = true
		}
	}
}

// report keeps what went wrong with the watch itself, as check's findings are kept.
func (w *podWatch) report(wrong string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wrong == "" {
		w.wrong = wrong
	}
}

// sawOnNode says whether the watch has seen the named pod bound to a node.
func (w *podWatch) sawOnNode(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.onNode[name]
}

// halt ends the watch and waits for it; it may be called more than once.
func (w *podWatch) halt() {
	w.cancel()
	<-w.stopped
}

// stop ends the watch and fails the spec if it saw something wrong.
func (w *podWatch) stop() {
	GinkgoHelper()
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	Expect(w.events).To(BeNumerically(">", 0))
	Expect(w.wrong).To(BeEmpty())
}
