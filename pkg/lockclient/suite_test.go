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

package lockclient_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// The lockclient suite runs the real controller (controller.Setup on a manager, locks on the
// built-in kubernetes backend) against a real API server (envtest) and asks it for locks through
// lockclient. There is no kubelet: tests create Pod objects by hand.

const controllerNamespace = "lockwarden-system"

var (
	controlPlane *lockenv.ControlPlane
	manager      *lockenv.Manager
	cfg          *rest.Config
	k8sClient    client.Client
	locks        *lockclient.Client
)

func TestLockclient(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "lockclient suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	var err error
	controlPlane, err = lockenv.StartControlPlane(filepath.Join("..", ".."), controllerNamespace)
	Expect(err).NotTo(HaveOccurred())
	cfg, k8sClient = controlPlane.Config, controlPlane.Client
	locks, err = lockclient.New(cfg)
	Expect(err).NotTo(HaveOccurred())
	manager, err = lockenv.StartManager(cfg, lockenv.ManagerOptions{Namespace: controllerNamespace, ProbeInterval: time.Second})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if manager != nil {
		Expect(manager.Stop()).To(Succeed())
	}
	if controlPlane != nil {
		Expect(controlPlane.Stop()).To(Succeed())
	}
})

func ctx() context.Context { return context.Background() }

// newNamespace creates a namespace for one test.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lockclient-"}}
	Expect(k8sClient.Create(ctx(), ns)).To(Succeed())
	return ns.Name
}

// newLock creates a DistributedLock on the built-in backend.
func newLock(ns, name string) *locksv1alpha1.DistributedLock {
	GinkgoHelper()
	l := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: locksv1alpha1.DistributedLockSpec{LeaseDurationSeconds: 6}}
	Expect(k8sClient.Create(ctx(), l)).To(Succeed())
	return l
}

// newPod creates a Pod bound to a fictitious node and marks it Running, standing in for the
// scheduler and a kubelet.
func newPod(ns, name string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	Expect(k8sClient.Create(ctx(), p)).To(Succeed())
	setPodPhase(p, corev1.PodRunning)
	return p
}

func setPodPhase(p *corev1.Pod, phase corev1.PodPhase) {
	GinkgoHelper()
	Expect(k8sClient.Get(ctx(), client.ObjectKeyFromObject(p), p)).To(Succeed())
	p.Status.Phase = phase
	Expect(k8sClient.Status().Update(ctx(), p)).To(Succeed())
}

func podRef(p *corev1.Pod) *lockclient.Pod { return &lockclient.Pod{Name: p.Name, UID: p.UID} }

// claimsOf lists the claims of a namespace.
func claimsOf(ns string) func(g Gomega) []locksv1alpha1.LockClaim {
	return func(g Gomega) []locksv1alpha1.LockClaim {
		list := &locksv1alpha1.LockClaimList{}
		g.Expect(k8sClient.List(ctx(), list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}
}

// queueOf describes the claims of namespace ns and its lock's record, for a failure's message:
// what the controller had decided when an outcome was not the one expected.
func queueOf(ns, lock string) func() string {
	return func() string {
		var b strings.Builder
		list := &locksv1alpha1.LockClaimList{}
		if err := k8sClient.List(ctx(), list, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for _, c := range list.Items {
			acquired := meta.FindStatusCondition(c.Status.Conditions, locksv1alpha1.ConditionAcquired)
			fmt.Fprintf(&b, "claim %s (created %s, arrival %d, rv %s): phase %q, position %d", c.Name,
				c.CreationTimestamp.Format(time.RFC3339), c.Status.Arrival, c.ResourceVersion, c.Status.Phase, c.Status.QueuePosition)
			if acquired != nil {
				fmt.Fprintf(&b, ", %s/%s: %s", acquired.Status, acquired.Reason, acquired.Message)
			}
			b.WriteString("\n")
		}
		l := &locksv1alpha1.DistributedLock{}
		if err := k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: lock}, l); err == nil {
			fmt.Fprintf(&b, "lock %s: maxQueue %v, holders %d, waiting %d\n", lock, ptr.Deref(l.Spec.MaxQueue, -1), len(l.Status.Holders), l.Status.Waiting)
		}
		return b.String()
	}
}

// claimExists says whether a claim exists, for Eventually.
func claimExists(ns, name string) func() bool {
	return func() bool {
		return k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &locksv1alpha1.LockClaim{}) == nil
	}
}

// acquisition is the outcome of an Acquire that runs in the background.
type acquisition struct {
	res *lockclient.Hold
	err error
}

// acquireAsync runs Acquire in the background; the channel yields its outcome.
func acquireAsync(c context.Context, req lockclient.Request) <-chan acquisition {
	out := make(chan acquisition, 1)
	go func() {
		res, err := locks.Acquire(c, req)
		out <- acquisition{res, err}
	}()
	return out
}
