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

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/lockwarden/lockwarden/internal/testutil/faultproxy"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
)

// Commands scenarios: the holders are `lockctl run` processes outside any pod, as a user runs
// them from a laptop or a VM, each reaching the API server through a fault proxy of its own. Their
// claims carry a heartbeat Lease (--heartbeat commandHeartbeat); their COMMAND is CommandScript,
// whose stamps CheckCommands judges. A run ends as a user's would: the COMMAND finishes; the user
// interrupts lockctl (SIGTERM, passed on to the COMMAND); or the machine dies (lockctl and its
// COMMAND SIGKILLed, the heartbeat left to expire). The holder-partition fault cuts a running
// holder off from the API server: its hold's local deadline must stop its COMMAND (lockctl exits
// 123) before the controller, which sees the heartbeat stop, grants the lock to the next.

// commandHeartbeat is the holders' --heartbeat: the controller releases a silent holder's lock this
// long after its heartbeat Lease last changed. commandGrace is their --grace, and the locks'
// lockDelaySeconds, as lockctl run's help advises.
const (
	commandHeartbeat = 3 * time.Second
	commandGrace     = 2 * time.Second
)

// commandLog collects the runs of every holder of a run.
type commandLog struct {
	mu   sync.Mutex
	runs []CommandRun
	// live is each holder's COMMAND that runs now, if any.
	live map[*commandClaimant]*liveCommand
}

// liveCommand is a lockctl run whose COMMAND has started.
type liveCommand struct {
	began time.Time
	work  time.Duration
	// ends is when the harness interrupts or kills the run (zero: the COMMAND finishes its work).
	ends time.Time
	// cut is set while (and once) the holder's proxy was cut during the COMMAND.
	cut bool
}

func (l *commandLog) add(run CommandRun) {
	l.mu.Lock()
	l.runs = append(l.runs, run)
	l.mu.Unlock()
}

func (l *commandLog) setLive(c *commandClaimant, lc *liveCommand) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc == nil {
		delete(l.live, c)
		return
	}
	l.live[c] = lc
}

func (l *commandLog) results() []CommandRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]CommandRun(nil), l.runs...)
}

// commandClaimant is a holder that runs `lockctl run` again and again.
type commandClaimant struct {
	*claimant
	lockctl, kubeconfig, dir string
	env                      []string // added to lockctl's environment
	api                      *faultproxy.Proxy
	log                      *commandLog
}

// holderRBAC is the RBAC the docs give whoever runs lockctl run outside a pod (docs/lockctl.md):
// the lockctl holders run as its ServiceAccount, never as an admin, so that a request it does not
// allow is refused and the rbac checker fails the run. What is tested is the file users apply.
const holderRBAC = "../../config/samples/pods/lockctl-run-rbac.yaml"

// holderAccount is holderRBAC's ServiceAccount in namespace ns.
func holderAccount(ns string) rbacenv.Account {
	return rbacenv.Account{Name: "ci-runner", Namespace: ns}
}

// installHolderRBAC applies the RBAC sample at path (whose ServiceAccount is account's) in the
// scenario's namespace, as a user would (every object moved there, the binding's subject too),
// and waits until each of its rules is in force.
func (r *run) installHolderRBAC(path string, account rbacenv.Account) error {
	docs, err := rbacenv.YAMLDocuments(path)
	if err != nil {
		return err
	}
	var grants []rbacenv.Grant
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal(doc, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		u.SetNamespace(r.ns)
		switch u.GetKind() {
		case "RoleBinding":
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, sub := range subjects {
				sub.(map[string]any)["namespace"] = r.ns
			}
			if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
				return err
			}
		case "Role":
			var role rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				return err
			}
			for _, rule := range role.Rules {
				grants = append(grants, rbacenv.Grant{Role: "Role " + role.Name, Namespace: r.ns, Rules: []rbacv1.PolicyRule{rule}})
			}
		}
		if err := r.e.c.Create(r.ctx, u); err != nil {
			return fmt.Errorf("%s: %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
	}
	return rbacenv.WaitAuthorized(r.ctx, r.e.c, account, grants, 30*time.Second)
}

// newCommandClaimant gives cl a proxy to the API server and a kubeconfig through it.
func (r *run) newCommandClaimant(cl *claimant) (*commandClaimant, error) {
	bin, err := r.e.lockctlBinary(r.s.mutant != "")
	if err != nil {
		return nil, err
	}
	api, err := faultproxy.New(r.e.apiAddr())
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s-%s-holder-%d", r.ns, cl.lock, cl.id)
	kc, err := r.e.writeHolderKubeconfig(name, api.Addr(), holderAccount(r.ns))
	if err != nil {
		_ = api.Close()
		return nil, err
	}
	cc := &commandClaimant{claimant: cl, lockctl: bin, kubeconfig: kc, dir: filepath.Join(r.e.dir, name), api: api, log: r.commands}
	if r.s.mutant != "" {
		// The holders run with the scenario's bugs too (those of the client act there).
		cc.env = []string{"LOCKWARDEN_MUTANT=" + strings.Join(r.s.mutants(), ",")}
	}
	return cc, nil
}

// commandEnd is how the harness ends a run: it lets the COMMAND finish, interrupts lockctl, or
// kills lockctl and its COMMAND as a dying machine would.
type commandEnd int

const (
	commandFinishes commandEnd = iota
	commandInterrupted
	commandKilled
)

// run runs lockctl until the workload stops.
func (c *commandClaimant) run(ctx context.Context) {
	defer func() { _ = c.api.Close() }()
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		c.errs("%s: %v", c.dir, err)
		return
	}
	for n := 0; ; n++ {
		select {
		case <-c.stopNew:
			return
		case <-ctx.Done():
			return
		default:
		}
		c.once(ctx, n)
		select {
		case <-c.stopNew:
			return
		case <-time.After(time.Duration(c.rng.Int64N(int64(c.ttl / 5)))):
		}
	}
}

// once runs lockctl once and records what its COMMAND did.
func (c *commandClaimant) once(ctx context.Context, n int) {
	work := c.ttl/5 + time.Duration(c.rng.Int64N(int64(3*c.ttl)))
	end := commandFinishes
	switch p := c.rng.IntN(100); {
	case p < 15:
		end = commandInterrupted
	case p < 30:
		end = commandKilled
	}
	endAfter := time.Duration(c.rng.Int64N(int64(work)))

	stamps := filepath.Join(c.dir, fmt.Sprintf("run-%d.stamps", n))
	logPath := filepath.Join(c.dir, fmt.Sprintf("run-%d.log", n))
	out, err := os.Create(logPath)
	if err != nil {
		c.errs("%v", err)
		return
	}
	defer func() { _ = out.Close() }()
	cmd := exec.Command(c.lockctl, "run", "--kubeconfig", c.kubeconfig, "-n", c.ns, "--lock", c.lock,
		"--heartbeat", commandHeartbeat.String(), "--grace", commandGrace.String(), "--", "sh", "-c", CommandScript)
	cmd.Env = append(append(withoutPodEnv(os.Environ()), c.env...), "STAMPS="+stamps, "WORK="+strconv.FormatFloat(work.Seconds(), 'f', 3, 64))
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that a signal meant for the harness does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.errs("starting lockctl: %v", err)
		return
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	run := CommandRun{Lock: c.ns + "/" + c.lock, Claimant: fmt.Sprintf("%s holder %d run %d", c.lock, c.id, n)}
	var live *liveCommand
	var endAt <-chan time.Time
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var waitErr error
	drain, done := c.drain, ctx.Done()
wait:
	for {
		select {
		case waitErr = <-exited:
			break wait
		case <-drain:
			// The drain deadline: a lockctl still waiting withdraws its claim on SIGTERM; one
			// whose COMMAND runs passes it on.
			drain = nil
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-endAt:
			endAt = nil
			switch end {
			case commandInterrupted:
				_ = cmd.Process.Signal(syscall.SIGTERM)
			case commandKilled:
				// The machine dies: lockctl and the COMMAND (its own process group) at once.
				_ = cmd.Process.Kill()
				if run.PID > 0 {
					_ = syscall.Kill(-run.PID, syscall.SIGKILL)
				}
				run.Ended, run.End = time.Now(), "killed"
			}
		case <-tick.C:
			if live != nil {
				continue
			}
			if err := c.readStamps(stamps, &run); err != nil {
				c.errs("%v", err)
			}
			if !run.Started.IsZero() {
				live = &liveCommand{began: run.Started, work: work}
				if end != commandFinishes {
					live.ends = run.Started.Add(endAfter)
					endAt = time.After(time.Until(live.ends))
				}
				c.log.setLive(c, live)
			}
		case <-done:
			done = nil
			_ = cmd.Process.Kill()
		}
	}
	run.Exited = time.Now()
	c.log.setLive(c, nil)
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		run.Exit = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			run.Exit = 128 + int(ws.Signal())
		}
	default:
		c.errs("lockctl: %v", waitErr)
	}
	killed := run.End == "killed"
	if err := c.readStamps(stamps, &run); err != nil {
		c.errs("%v", err)
	}
	if killed {
		// Killed mid-work: the section ended at the kill (a "done" stamp can only be earlier).
		if run.End != "done" {
			run.End = "killed"
		}
	} else if !run.Started.IsZero() && run.Ended.IsZero() {
		// No end stamp: at the latest, the COMMAND was gone when lockctl exited.
		run.Ended, run.End = run.Exited, "exited"
	}
	if said, err := os.ReadFile(logPath); err == nil {
		run.Expired = strings.Contains(string(said), ExpiredMessage)
	}
	if live != nil {
		c.log.mu.Lock()
		run.CutOff = live.cut
		c.log.mu.Unlock()
	}
	c.log.add(run)
}

// readStamps reads the stamps file (absent until the COMMAND starts) into run, keeping an end the
// harness set.
func (c *commandClaimant) readStamps(path string, run *CommandRun) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// Only whole lines: the script may be writing one.
	text := string(data)
	text = text[:strings.LastIndexByte(text, '\n')+1]
	ended, end := run.Ended, run.End
	if err := ParseStamps(text, run); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if end == "killed" && (run.End != "done" || run.Ended.After(ended)) {
		run.Ended, run.End = ended, end
	}
	return nil
}

// withoutPodEnv drops POD_NAME and POD_NAMESPACE, which would make lockctl claim for a pod.
func withoutPodEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "POD_NAME=") && !strings.HasPrefix(kv, "POD_NAMESPACE=") {
			out = append(out, kv)
		}
	}
	return out
}

// partitionHolder is the holder-partition fault: it waits (at most 4×TTL) for a holder whose
// COMMAND runs on (neither finishing its work nor interrupted or killed by the harness) for
// longer than the next holder could wait (a heartbeat, the lock delay and TTL/5), so that only
// its hold's end can stop it in time, cuts it off from the API server (both
// ways, or one way: mode) for dur, and heals it. It says which holder it cut, or that none was
// running.
func (r *run) partitionHolder(dur time.Duration, mode faultproxy.Mode) (string, bool) {
	deadline := time.Now().Add(4 * r.ttl)
	for time.Now().Before(deadline) {
		var target *commandClaimant
		r.commands.mu.Lock()
		for c, lc := range r.commands.live {
			// It must run on, neither done nor ended by the harness (an interrupt, a kill: the
			// first try of seed 530857084 cut off a holder the harness interrupted 0.8 s later,
			// and nothing was left for the local deadline to stop), past when it must be stopped.
			runsUntil := lc.began.Add(lc.work)
			if !lc.ends.IsZero() && lc.ends.Before(runsUntil) {
				runsUntil = lc.ends
			}
			if time.Until(runsUntil) > commandHeartbeat+r.s.lockDelay+r.ttl/5 {
				target, lc.cut = c, true
				break
			}
		}
		r.commands.mu.Unlock()
		if target != nil {
			target.api.Partition(mode)
			time.Sleep(dur)
			target.api.Heal()
			return fmt.Sprintf("%s holder %d cut off from the API server (%s) for %s", target.lock, target.id, mode, dur.Round(100*time.Millisecond)), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "no holder's command was running with work left", false
}

// readLogs returns the files that match pattern, one after another: what lockctl processes said.
func readLogs(pattern string) string {
	logs, _ := filepath.Glob(pattern)
	var said strings.Builder
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			said.Write(b)
		}
	}
	return said.String()
}

// checkCommands judges the holders' COMMANDs (commands runs).
func (r *run) checkCommands(res *Result) {
	runs := r.commands.results()
	res.Violations = append(res.Violations, findings("commands", CheckCommands(runs))...)
	// lockctl says on stderr what the API server refused it; the holders act as holderRBAC's
	// account, so a refusal is a request lockctl makes that the documented Role does not grant.
	said := readLogs(filepath.Join(r.e.dir, r.ns+"-*-holder-*", "run-*.log"))
	res.Violations = append(res.Violations, findings("rbac", prefixed("lockctl holders", RBACRefusals(said, holderAccount(r.ns).User(), nil)))...)
	res.Violations = append(res.Violations, findings("commands", CheckCommandTokens(runs, r.grants))...)
	ends := map[string]int{}
	for _, run := range runs {
		if run.Started.IsZero() {
			ends["never started"]++
			continue
		}
		ends[run.End]++
		res.Commands++
		if !run.CutOff {
			continue
		}
		res.CommandsCutOff++
		if run.End == "stop" && run.Exit == 123 && run.Expired {
			res.CommandsStoppedAtDeadline++
		}
		r.t.Logf("commands: cut off: %s", run)
	}
	shortest, afterCut := CommandGaps(runs)
	var cut []string
	for _, d := range afterCut {
		cut = append(cut, d.Round(time.Millisecond).String())
	}
	r.t.Logf("commands: %d runs; ends %v; shortest gap between sections %s; next section after a cut-off one began %v later",
		len(runs), ends, shortest.Round(time.Millisecond), cut)
}

// lockctlBinary returns lockctl, built on first use; with mutants, the build with the mutants
// tag (internal/mutant), whose bugs LOCKWARDEN_MUTANT switches on.
func (e *env) lockctlBinary(mutants bool) (string, error) {
	b := &e.lockctl
	if mutants {
		b = &e.lockctlMutants
	}
	b.once.Do(func() {
		b.path = filepath.Join(e.dir, "lockctl")
		args := []string{"build", "-o", b.path}
		if mutants {
			b.path += "-mutants"
			args = []string{"build", "-tags", "mutants", "-o", b.path}
		}
		build := exec.Command("go", append(args, "./cmd/lockctl")...)
		build.Dir = filepath.Join("..", "..")
		if msg, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building lockctl: %v\n%s", err, msg)
		}
	})
	return b.path, b.err
}

// builtOnce is a binary the harness builds on first use.
type builtOnce struct {
	once sync.Once
	path string
	err  error
}
