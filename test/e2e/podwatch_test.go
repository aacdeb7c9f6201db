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
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podWatch looks at a namespace's pods every 50 ms until stopped, keeps the first thing that
// check reports wrong with them, and remembers which pods it has seen on a node. A spec that
// relies on the watch to catch two pods running at once waits, in each round, until the watch has
// seen that round's pod on its node (sawOnNode): a handoff faster than the watch's period is then
// still looked at, and the spec cannot pass for a watch that never looked.
type podWatch struct {
	done, stopped chan struct{}
	once          sync.Once
	mu            sync.Mutex
	looks         int
	wrong         string
	onNode        map[string]bool
}

func watchPods(ns string, check func(pods []corev1.Pod) string) *podWatch {
	w := &podWatch{done: make(chan struct{}), stopped: make(chan struct{}), onNode: map[string]bool{}}
	go func() {
		defer GinkgoRecover()
		defer close(w.stopped)
		for {
			select {
			case <-w.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			list := &corev1.PodList{}
			if err := k8sClient.List(ctx(), list, client.InNamespace(ns)); err != nil {
				continue
			}
			wrong := check(list.Items)
			w.mu.Lock()
			w.looks++
			if wrong != "" && w.wrong == "" {
				w.wrong = wrong
			}
			for _, p := range list.Items {
				if p.Spec.NodeName != "" {
					w.onNode[p.Name] = true
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// sawOnNode says whether the watch has seen the named pod bound to a node.
func (w *podWatch) sawOnNode(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.onNode[name]
}

// halt ends the watch and waits for it; it may be called more than once.
func (w *podWatch) halt() {
	w.once.Do(func() { close(w.done) })
	<-w.stopped
}

// stop ends the watch and fails the spec if it saw something wrong.
func (w *podWatch) stop() {
	GinkgoHelper()
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	Expect(w.looks).To(BeNumerically(">", 0))
	Expect(w.wrong).To(BeEmpty())
}
