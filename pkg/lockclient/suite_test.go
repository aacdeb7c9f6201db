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
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	kubernetesbackend "github.com/lockwarden/lockwarden/internal/backends/kubernetes"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/controller"
	"github.com/lockwarden/lockwarden/internal/metrics"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// The lockclient suite runs the real controller (controller.Setup on a manager, locks on the
// built-in kubernetes backend) against a real API server (envtest) and asks it for locks through
// lockclient. There is no kubelet: tests create Pod objects by hand.

const controllerNamespace = "lockwarden-system"

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	locks     *lockclient.Client
	stopMgr   context.CancelFunc
	mgrDone   chan struct{}
)

func TestLockclient(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "lockclient suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred(), "starting envtest; run via make test-unit so that KUBEBUILDER_ASSETS is set")

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(locksv1alpha1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8sClient.Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}})).To(Succeed())

	locks, err = lockclient.New(cfg)
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	builtin, err := kubernetesbackend.New(kubernetesbackend.Config{Client: k8sClient, Namespace: controllerNamespace})
	Expect(err).NotTo(HaveOccurred())
	m := metrics.New(func(ctx context.Context) (map[locksv1alpha1.ClaimPhase]int, error) {
		return controller.CountClaimsByPhase(ctx, mgr.GetClient())
	})
	Expect(m.Register(prometheus.NewRegistry())).To(Succeed())
	reg := registry.New(builtin, registry.WithWrapper(m.Instrument))
	Expect(controller.Setup(mgr, controller.Options{Registry: reg, Metrics: m, ProbeInterval: time.Second})).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	stopMgr, mgrDone = cancel, make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
		<-mgrDone
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
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

// claimExists says whether a claim exists, for Eventually.
func claimExists(ns, name string) func() bool {
	return func() bool {
		return k8sClient.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &locksv1alpha1.LockClaim{}) == nil
	}
}

// acquisition is the outcome of an Acquire that runs in the background.
type acquisition struct {
	res *lockclient.Result
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
