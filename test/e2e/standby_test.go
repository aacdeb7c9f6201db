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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// roleWatch follows the sample's pods through a watch while a spec runs and remembers what a
// Service that selects role: holder would have seen: the most pods labelled holder at once, every
// pod that was labelled holder in turn, and the longest stretch with none. A watch delivers every
// change in the order the API server made them, so the count after each event is the cluster's
// state at that revision: two holders in it were two at once.
type roleWatch struct {
	mu        sync.Mutex
	roles     map[string]string
	most      int
	holders   []string // in the order they were first seen labelled holder
	noneSince time.Time
	longest   time.Duration
	err       error // why the watch failed, if it did
	stop      context.CancelFunc
	done      chan struct{}
}

func watchRoles(ns string, selector client.MatchingLabels) *roleWatch {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &roleWatch{roles: map[string]string{}, stop: cancel, done: make(chan struct{})}
	watcher, err := k8sClient.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), selector)
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(w.done)
		defer watcher.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-watcher.ResultChan():
				if !ok {
					w.failed(errors.New("the pod watch ended early"))
					return
				}
				pod, isPod := e.Object.(*corev1.Pod)
				if !isPod {
					w.failed(fmt.Errorf("the pod watch sent %s %T", e.Type, e.Object))
					return
				}
				w.see(pod, e.Type == watch.Deleted, time.Now())
			}
		}
	}()
	DeferCleanup(w.finish)
	return w
}

func (w *roleWatch) see(pod *corev1.Pod, deleted bool, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if deleted {
		delete(w.roles, pod.Name)
	} else {
		w.roles[pod.Name] = pod.Labels[locksv1alpha1.PodRoleLabel]
	}
	if w.roles[pod.Name] == locksv1alpha1.PodRoleHolder && !slices.Contains(w.holders, pod.Name) {
		w.holders = append(w.holders, pod.Name)
	}
	n := 0
	for _, role := range w.roles {
		if role == locksv1alpha1.PodRoleHolder {
			n++
		}
	}
	w.most = max(w.most, n)
	switch {
	case n == 0 && w.noneSince.IsZero():
		w.noneSince = now
	case n > 0 && !w.noneSince.IsZero():
		w.longest = max(w.longest, now.Sub(w.noneSince))
		w.noneSince = time.Time{}
	}
}

func (w *roleWatch) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *roleWatch) finish() {
	w.stop()
	<-w.done
}

// report returns what the watch saw so far: the most holders at once, the pods labelled holder in
// turn, and the longest time without one.
func (w *roleWatch) report() (most int, holders []string, longest time.Duration) {
	GinkgoHelper()
	w.mu.Lock()
	defer w.mu.Unlock()
	Expect(w.err).NotTo(HaveOccurred(), "watching the pods")
	return w.most, slices.Clone(w.holders), w.longest
}

// servedBy lists the pods behind a Service's EndpointSlices that are ready to take traffic.
func servedBy(g Gomega, ns, service string) []string {
	list := &discoveryv1.EndpointSliceList{}
	g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns),
		client.MatchingLabels{discoveryv1.LabelServiceName: service})).To(Succeed())
	var pods []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				pods = append(pods, e.TargetRef.Name)
			}
		}
	}
	slices.Sort(pods)
	return pods
}

// oneHolder waits until the sample's Deployment has want live pods, all Running, exactly one
// labelled holder and carrying its token, and the Service serves that pod alone; it returns it.
func oneHolder(ns string, selector client.MatchingLabels, want int, timeout time.Duration) corev1.Pod {
	GinkgoHelper()
	var holder corev1.Pod
	Eventually(func(g Gomega) {
		var live, holders []corev1.Pod
		for _, p := range podsOf(g, ns, selector) {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
			if p.Labels[locksv1alpha1.PodRoleLabel] == locksv1alpha1.PodRoleHolder {
				holders = append(holders, p)
			}
		}
		g.Expect(live).To(HaveLen(want))
		for _, p := range live {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "every replica runs: pod %s", p.Name)
			g.Expect(gated(&p)).To(BeFalse(), "a Standby pod is not gated: pod %s", p.Name)
		}
		g.Expect(holders).To(HaveLen(1), "exactly one pod labelled holder")
		g.Expect(holders[0].DeletionTimestamp).To(BeNil())
		g.Expect(holders[0].Annotations).To(HaveKey(locksv1alpha1.PodFencingTokenAnnotation))
		g.Expect(servedBy(g, ns, "checkout-active")).To(Equal([]string{holders[0].Name}), "the Service serves the holder alone")
		holder = holders[0]
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return holder
}

var _ = Describe("Standby pods: leader election for a Deployment", Ordered, func() {
	BeforeAll(startManager)

	var ns string
	selector := client.MatchingLabels{"app": "checkout"}
	BeforeAll(func() {
		ns = newNamespace()
		kubectl("apply", "-n", ns, "-f", filepath.Join(repoRoot, "config", "samples", "pods", "leader-election.yaml"))
	})

	It("runs every replica, labels one holder and serves only it; the label follows a deleted holder", func() {
		w := watchRoles(ns, selector)
		first := oneHolder(ns, selector, 3, 90*time.Second)

		deleted := time.Now()
		kubectl("delete", "pod", "-n", ns, first.Name, "--wait=false")
		next := oneHolder(ns, selector, 3, 60*time.Second)
		GinkgoWriter.Printf("holder %s deleted: %s served alone after %s\n", first.Name, next.Name, time.Since(deleted).Round(time.Millisecond))
		Expect(next.Name).NotTo(Equal(first.Name))
		Expect(next.Annotations[locksv1alpha1.PodFencingTokenAnnotation]).NotTo(Equal(first.Annotations[locksv1alpha1.PodFencingTokenAnnotation]))

		most, holders, longest := w.report()
		GinkgoWriter.Printf("pods labelled holder in turn: %v; longest without a holder %s\n", holders, longest.Round(time.Millisecond))
		Expect(most).To(Equal(1), "never two pods labelled holder at once")
	})

	It("moves the lock once in a rolling update with the default strategy", func() {
		before := oneHolder(ns, selector, 3, 60*time.Second)
		w := watchRoles(ns, selector)
		kubectl("rollout", "restart", "-n", ns, "deployment/checkout")
		kubectl("rollout", "status", "-n", ns, "deployment/checkout", "--timeout=180s")
		after := oneHolder(ns, selector, 3, 60*time.Second)

		most, holders, longest := w.report()
		GinkgoWriter.Printf("rolling update: pods labelled holder in turn %v, longest without a holder %s\n", holders, longest.Round(time.Millisecond))
		Expect(most).To(Equal(1), "never two pods labelled holder at once")
		Expect(holders).To(Equal([]string{before.Name, after.Name}),
			"the old holder, removed last of its ReplicaSet (pod-deletion-cost), hands the lock to a new pod: one move")
	})

	It("hands the lock on when the holder's node fails (holderNodeLossSeconds)", func() {
		// hack/test-e2e.sh says how this cluster's nodes can be failed: kwok-label on its local
		// cluster, none on a cluster it did not make. Anything else is a run that lost the
		// setting, which must fail rather than skip.
		switch how := os.Getenv("E2E_NODE_FAILURE"); how {
		case "kwok-label":
		case "none":
			Skip("this cluster's nodes cannot be failed on purpose (E2E_NODE_FAILURE=none); make test-e2e's local cluster can (hack/kwokctl-e2e.yaml)")
		default:
			Fail(fmt.Sprintf("E2E_NODE_FAILURE=%q: run the suite through make test-e2e (hack/test-e2e.sh sets it)", how))
		}
		holder := oneHolder(ns, selector, 3, 60*time.Second)
		node := holder.Spec.NodeName
		Expect(node).NotTo(BeEmpty())
		w := watchRoles(ns, selector)

		// kwok stops renewing the node's Lease, as a kubelet that died would; the node lifecycle
		// controller then marks it Ready Unknown after its grace period.
		failed := time.Now()
		kubectl("label", "node", node, "type=failed", "--overwrite")
		DeferCleanup(func() { kubectl("label", "node", node, "type=kwok", "--overwrite") })

		Eventually(func(g Gomega) string {
			for _, p := range podsOf(g, ns, selector) {
				if p.Labels[locksv1alpha1.PodRoleLabel] == locksv1alpha1.PodRoleHolder && p.Name != holder.Name {
					return p.Name
				}
			}
			return ""
		}).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).ShouldNot(BeEmpty())
		took := time.Since(failed)
		n := &corev1.Node{}
		Expect(k8sClient.Get(ctx(), client.ObjectKey{Name: node}, n)).To(Succeed())
		var notReady time.Duration
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				Expect(c.Status).NotTo(Equal(corev1.ConditionTrue), "the node is no longer Ready")
				notReady = c.LastTransitionTime.Sub(failed)
			}
		}
		GinkgoWriter.Printf("node %s failed: not Ready after %s, next pod labelled holder after %s (holderNodeLossSeconds 15)\n",
			node, notReady.Round(time.Second), took.Round(time.Millisecond))
		Expect(took).To(BeNumerically(">=", 15*time.Second), "not before holderNodeLossSeconds")

		lost := &corev1.Pod{}
		Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(&holder), lost)).To(Succeed())
		Expect(lost.Labels[locksv1alpha1.PodRoleLabel]).To(Equal(locksv1alpha1.PodRoleStandby), "the cut-off pod, still there, is no longer labelled holder")
		Expect(lost.DeletionTimestamp).To(BeNil(), "Kubernetes has not deleted it yet: the hold ended before it would")
		most, _, _ := w.report()
		Expect(most).To(Equal(1), "never two pods labelled holder at once")
	})
})
