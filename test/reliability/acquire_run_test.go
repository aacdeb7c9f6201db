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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

// lockctl-acquire scenarios: claimants that behave like pods whose init container runs `lockctl
// acquire` (config/samples/pods/init-container-migration.yaml). Each creates a pod, bound to a
// node and not yet running, and runs the real lockctl binary as its init container would: with
// the downward API's POD_NAME, POD_NAMESPACE and POD_UID, as the ServiceAccount of the documented
// lockctl Role (config/samples/pods/lockctl-rbac.yaml, applied in the scenario's namespace), with
// --token-file. lockctl makes the pod's claim and exits 0 once it holds; the claimant then plays
// the kubelet starting the main container: it reads the token file, marks the pod Running, writes
// with that token, and ends as a gated pod's process does (exit 0, death, deletion at once or
// gracefully). The admissions checker judges that each token file carried the token its claim
// was Held with; an init container that exits otherwise while the run goes on (lockctl gave up
// waiting, or failed under a fault) is a finding of the lockctl-acquire checker.

// initRBAC is the RBAC the docs give a workload that runs lockctl in its pods: the init
// containers run as its ServiceAccount, never as an admin.
const initRBAC = "../../config/samples/pods/lockctl-rbac.yaml"

// initAccount is initRBAC's ServiceAccount in namespace ns.
func initAccount(ns string) rbacenv.Account { return rbacenv.Account{Name: "web", Namespace: ns} }

// initAcquire is the lockctl-acquire workload on the built-in backend with a fault of kind (""
// for none; two replicas when it hits the managers).
func initAcquire(kind faultKind) scenario {
	// Without a fault every hold ends by its pod's end: none may be lost.
	return withFault(scenario{name: "lockctl-acquire", backend: "kubernetes", replicas: 1, initAcquire: true, noLoss: kind == "", workload: 30 * time.Second}, kind)
}

// initContainers runs the init containers of a lockctl-acquire run, and keeps what each said.
type initContainers struct {
	lockctl, kubeconfig, dir string
	env                      []string // added to lockctl's environment (the scenario's mutants)

	mu       sync.Mutex
	failures []string // init containers that exited other than 0 while the run went on
}

// newInitContainers applies initRBAC in the run's namespace and writes the init containers'
// kubeconfig (straight to the API server, as initAccount).
func (r *run) newInitContainers() (*initContainers, error) {
	if err := r.installHolderRBAC(initRBAC, initAccount(r.ns)); err != nil {
		return nil, err
	}
	bin, err := r.e.lockctlBinary(r.s.mutant != "")
	if err != nil {
		return nil, err
	}
	kc, err := r.e.writeHolderKubeconfig(r.ns+"-init", r.e.apiAddr(), initAccount(r.ns))
	if err != nil {
		return nil, err
	}
	ic := &initContainers{lockctl: bin, kubeconfig: kc, dir: filepath.Join(r.e.dir, r.ns+"-init")}
	if r.s.mutant != "" {
		ic.env = []string{"LOCKWARDEN_MUTANT=" + strings.Join(r.s.mutants(), ",")}
	}
	return ic, os.MkdirAll(ic.dir, 0o755)
}

// createInitPod creates the pod of one lockctl-acquire claimant run, named name: bound to a node
// and Pending, as a pod whose init container runs. lockctl makes its claim, named after the pod's
// UID; the recorder expects that name from the pod's creation on.
func (cl *claimant) createInitPod(ctx context.Context, name string) (*corev1.Pod, *locksv1alpha1.LockClaim, *claimRec) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "node-1", ServiceAccountName: initAccount(cl.ns).Name,
			InitContainers: []corev1.Container{{Name: "lock", Image: "lockctl"}},
			Containers:     []corev1.Container{{Name: "app", Image: "app"}}}}
	return cl.createPodOfClaim(ctx, pod)
}

// acquire runs pod's init container, `lockctl acquire`, until it exits, and returns the token
// its token file carries when it exited 0. At the drain a lockctl still waiting is sent SIGTERM
// (its pod is going), which withdraws its claim.
func (ic *initContainers) acquire(ctx context.Context, cl *claimant, pod *corev1.Pod) (int64, bool) {
	tokenFile := filepath.Join(ic.dir, pod.Name+".token")
	logPath := filepath.Join(ic.dir, pod.Name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		cl.errs("%v", err)
		return 0, false
	}
	defer func() { _ = out.Close() }()
	cmd := exec.Command(ic.lockctl, "acquire", "--kubeconfig", ic.kubeconfig, "--lock", cl.lock, "--token-file", tokenFile)
	cmd.Env = append(append(withoutPodEnv(os.Environ()), ic.env...),
		"POD_NAME="+pod.Name, "POD_NAMESPACE="+pod.Namespace, "POD_UID="+string(pod.UID))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		cl.errs("starting lockctl acquire: %v", err)
		return 0, false
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitErr error
	drained := false
	select {
	case waitErr = <-exited:
	case <-cl.drain:
		drained = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waitErr = <-exited
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return 0, false
	}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
	case drained:
		return 0, false
	case errors.As(waitErr, &exitErr):
		said, _ := os.ReadFile(logPath)
		ic.fail(fmt.Sprintf("lockctl acquire in pod %s exited %d: %s", pod.Name, exitErr.ExitCode(), strings.TrimSpace(string(said))))
		return 0, false
	default:
		cl.errs("lockctl acquire: %v", waitErr)
		return 0, false
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		ic.fail(fmt.Sprintf("lockctl acquire in pod %s exited 0 without its token file: %v", pod.Name, err))
		return 0, false
	}
	token, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	cl.admitted(Admission{Pod: pod.Name, Claim: locksv1alpha1.PodClaimName(pod.Name, pod.UID, cl.lock), Token: token, At: time.Now()})
	return token, true
}

func (ic *initContainers) fail(msg string) {
	ic.mu.Lock()
	ic.failures = append(ic.failures, msg)
	ic.mu.Unlock()
}

// check judges the init containers (lockctl-acquire runs): their tokens against the claims' (the
// admissions checker), their exits, and what the API server refused them.
func (ic *initContainers) check(r *run, res *Result) {
	admissions := r.admissions.results()
	res.InitsAcquired = len(admissions)
	res.Violations = append(res.Violations, findings("admissions", CheckAdmissions(admissions, r.grants))...)
	ic.mu.Lock()
	res.Violations = append(res.Violations, findings("lockctl-acquire", ic.failures)...)
	ic.mu.Unlock()
	said := readLogs(filepath.Join(ic.dir, "*.log"))
	res.Violations = append(res.Violations, findings("rbac", prefixed("lockctl init containers", RBACRefusals(said, initAccount(r.ns).User(), nil)))...)
	r.t.Logf("lockctl acquire: %d init containers exited 0 with a token file", len(admissions))
}
