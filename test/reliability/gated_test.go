//go:build reliability

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

package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// Gated scenarios: claimants that behave like pods which wait for their lock before they are
// scheduled (docs/design.md §3, Waiting for a lock). Each creates a pod annotated with its lock and
// carrying lockwarden's scheduling gate, with no node; the controller makes its claim and lifts
// the gate once the claim holds, and the real kube-scheduler binds the pod to one of the run's
// Nodes. The claimant then plays the kubelet and the pod's process: it reads the fencing token
// annotation (as the process would through the downward API), marks the pod Running, writes with
// that token, and ends by exiting (Succeeded, or Failed after a silent death) or by the pod's
// deletion, at once or gracefully. The gates checker judges, in the API server's order, that no
// two pods of a mutex were ever admitted at once; the admissions checker that each scheduled pod
// read the token its claim was Held with.

// defaultGatedEnds are the ways a gated pod's hold ends, taken in turn: its process exits 0 or
// dies, or its pod is deleted, at once or gracefully.
var defaultGatedEnds = []EndKind{EndSucceeded, EndPodDelete, EndSilentDeath, EndGracefulDelete}

// gatedEnds are the ways the scenario's gated pods' holds end: its ends, by default
// defaultGatedEnds.
func (s scenario) gatedEnds() []EndKind {
	if len(s.ends) > 0 {
		return s.ends
	}
	return defaultGatedEnds
}

// gated is the gated workload on the built-in backend with a fault of kind ("" for none), with
// two replicas when the fault hits the managers.
func gated(kind faultKind) scenario {
	// Without a fault every hold ends by the pod's end: none may be lost.
	return withFault(scenario{name: "gated", backend: "kubernetes", replicas: 1, gated: true, noLoss: kind == "", workload: 30 * time.Second}, kind)
}

// scheduler is the real kube-scheduler of gated runs, started on first use with the envtest
// admin's credentials and no leader election, and stopped with the env. The harness's other
// pods are created bound to a node, so it schedules only gated pods.
type scheduler struct {
	once sync.Once
	cmd  *exec.Cmd
	err  error
}

// startScheduler starts the env's kube-scheduler unless it runs already.
func (e *env) startScheduler() error {
	e.sched.once.Do(func() {
		kc := clientcmdapi.NewConfig()
		kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: e.cfg.Host, CertificateAuthorityData: e.cfg.CAData}
		kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.cfg.CertData, ClientKeyData: e.cfg.KeyData, Token: e.cfg.BearerToken}
		kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
		kc.CurrentContext = "envtest"
		path := filepath.Join(e.dir, "scheduler.kubeconfig")
		if e.sched.err = clientcmd.WriteToFile(*kc, path); e.sched.err != nil {
			return
		}
		log, err := os.Create(filepath.Join(e.dir, "kube-scheduler.log"))
		if err != nil {
			e.sched.err = err
			return
		}
		// KUBEBUILDER_ASSETS is the directory of the built Kubernetes binaries
		// (hack/k8s-binaries.sh), kube-scheduler among them.
		cmd := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-scheduler"),
			"--kubeconfig", path, "--leader-elect=false", "--secure-port=0", "-v=2")
		cmd.Stdout, cmd.Stderr = log, log
		if e.sched.err = cmd.Start(); e.sched.err != nil {
			e.sched.err = fmt.Errorf("starting kube-scheduler: %w", e.sched.err)
			return
		}
		e.sched.cmd = cmd
	})
	return e.sched.err
}

// stop kills the scheduler, if it was started, by its process id.
func (s *scheduler) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// createGated creates the pod of one gated claimant run, named name: annotated with its lock,
// carrying lockwarden's scheduling gate, with no node, and a nodeSelector that keeps it on the
// run's Nodes. The controller makes its claim, named after the pod's UID; the recorder expects
// that name from the pod's creation on. It returns the pod, the claim (name only) and the claim's
// record, or nil pod on failure.
func (cl *claimant) createGated(ctx context.Context, name string) (*corev1.Pod, *locksv1alpha1.LockClaim, *claimRec) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name, Annotations: map[string]string{
		locksv1alpha1.PodLockAnnotation: cl.lock, locksv1alpha1.PodLockWaitAnnotation: locksv1alpha1.PodLockWaitGated}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{nodeRunLabel: cl.ns},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}},
			Containers:      []corev1.Container{{Name: "app", Image: "app"}}}}
	return cl.createPodOfClaim(ctx, pod)
}

// awaitScheduled waits until the gated pod is bound to a node, polling it every 50 ms as a
// kubelet would notice it, and returns the fencing token its annotation carries then (0 when it
// carries none: the admissions checker reports that). It gives up, returning false, when the
// claim ends without the pod being scheduled (final without ever holding) or at the drain; a pod
// still gated then is left waiting, reported stuck if its claim is still Pending.
func (cl *claimant) awaitScheduled(ctx context.Context, pod *corev1.Pod, rec *claimRec) (int64, bool) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		p := &corev1.Pod{}
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(pod), p); err == nil && p.Spec.NodeName != "" {
			token, _ := strconv.ParseInt(p.Annotations[locksv1alpha1.PodFencingTokenAnnotation], 10, 64)
			cl.admitted(Admission{Pod: p.Name, Claim: locksv1alpha1.PodClaimName(p.Name, p.UID, cl.lock), Token: token, At: time.Now()})
			*pod = *p
			return token, true
		}
		select {
		case <-tick.C:
		case <-rec.ended:
			return 0, false
		case <-cl.drain:
			return 0, false
		}
	}
}

// admissionLog collects what the gated pods read when they were scheduled.
type admissionLog struct {
	mu  sync.Mutex
	all []Admission
}

func (l *admissionLog) add(a Admission) {
	l.mu.Lock()
	l.all = append(l.all, a)
	l.mu.Unlock()
}

func (l *admissionLog) results() []Admission {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Admission(nil), l.all...)
}

// checkGates runs the gates and admissions checkers (gated runs).
func (r *run) checkGates(res *Result, pods []PodRole) {
	lostAt := map[string]int64{}
	for _, g := range r.grants {
		if g.Lost {
			lostAt[g.Claim] = g.ReleasedRevision
		}
	}
	gates, admitted := CheckGates(pods, r.placesOf, lostAt)
	res.GatesLifted = admitted
	res.Violations = append(res.Violations, findings("gates", gates)...)
	admissions := r.admissions.results()
	res.Violations = append(res.Violations, findings("admissions", CheckAdmissions(admissions, r.grants))...)
	r.t.Logf("gated pods: %d admitted (gate lifted) in the pod watch, %d scheduled by kube-scheduler", admitted, len(admissions))
}
