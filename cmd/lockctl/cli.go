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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// app is one lockctl invocation.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// prog is what lockctl was invoked as, for help and messages: "lockctl", or "kubectl lock"
	// as a kubectl plugin (programName). Empty means "lockctl".
	prog string
}

// programName is the name to show for a binary invoked as argv0: "kubectl lock" for the kubectl
// plugin kubectl-lock (kubectl runs a plugin kubectl-a-b for `kubectl a b`), else "lockctl".
func programName(argv0 string) string {
	if plugin, ok := strings.CutPrefix(filepath.Base(argv0), "kubectl-"); ok && plugin != "" {
		return "kubectl " + strings.ReplaceAll(plugin, "-", " ")
	}
	return "lockctl"
}

// name is what lockctl was invoked as.
func (a *app) name() string {
	if a.prog == "" {
		return "lockctl"
	}
	return a.prog
}

// main runs the command in args and returns the exit code.
func (a *app) main(args []string) int {
	if len(args) > 0 && args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...) // as kubectl and most tools answer it
	}
	return a.execute(a.rootCommand(), args)
}

// execute runs the command tree root with args, prints a failure as one line on stderr, and
// returns the exit code.
func (a *app) execute(root *cobra.Command, args []string) int {
	// Until a command runs, every error is cobra's complaint about the command line.
	parsed := false
	root.PersistentPreRun = func(*cobra.Command, []string) { parsed = true }
	root.SetArgs(goFlagStyle(root, args))
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SilenceErrors, root.SilenceUsage = true, true
	cmd, err := root.ExecuteC()

	var code exitStatus
	var usage *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code) // run: the command's own exit code
	case !parsed && !errors.As(err, &usage):
		err = &usageError{msg: err.Error()}
	}
	sub := subcommand(root, cmd)
	fmt.Fprintln(a.stderr, errorLine(a.name(), sub, err))
	return exitCode(sub, err)
}

// subcommand is cmd's path below root ("acquire", "completion"); "" for root itself.
func subcommand(root, cmd *cobra.Command) string {
	if cmd == nil {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(cmd.CommandPath(), root.CommandPath()))
}

// exitStatus is an exit code to return as is (run's command's).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// podFromEnv is lockctl's own pod, from the downward API environment; nil outside a pod.
func (a *app) podFromEnv() *lockclient.Pod {
	name := a.getenv("POD_NAME")
	if name == "" {
		return nil
	}
	return &lockclient.Pod{Name: name, UID: types.UID(a.getenv("POD_UID"))}
}

// checkPodNamespace rejects a --namespace other than the pod's: a claim for a pod lives in the
// pod's namespace.
func (a *app) checkPodNamespace(k *kubeFlags) error {
	ns, podNS := *k.Namespace, a.getenv("POD_NAMESPACE")
	if ns != "" && podNS != "" && ns != podNS {
		return usagef("--namespace %s differs from POD_NAMESPACE %s: a claim for a pod lives in the pod's namespace", ns, podNS)
	}
	return nil
}

// stopSignals are the signals that stop lockctl while it waits (a claim it made is withdrawn
// first) and that run passes on to its command. SIGHUP is among them: a terminal that closes
// while lockctl waits must not leave a claim queued, to be granted later to no one.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// signalContext is cancelled by one of stopSignals.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), stopSignals...)
}

// withTimeout bounds ctx by d when d > 0.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// acquiredLine describes a granted claim on one line.
func acquiredLine(r *lockclient.Result) string {
	var b strings.Builder
	token := fmt.Sprintf("token=%d", r.FencingToken)
	if len(r.Locks) > 0 {
		parts := make([]string, len(r.Locks))
		for i, l := range r.Locks {
			parts[i] = fmt.Sprintf("%s:%d", l.Lock, l.FencingToken)
		}
		token = "tokens=" + strings.Join(parts, ",")
	}
	fmt.Fprintf(&b, "acquired lock %q in namespace %q: holder=%s %s waited=%s claim=%s",
		r.Lock, r.Namespace, r.Holder(), token, r.Waited.Round(time.Millisecond), r.Claim)
	if !r.ExpireTime.IsZero() {
		fmt.Fprintf(&b, " expires=%s", r.ExpireTime.UTC().Format(time.RFC3339))
	}
	if r.Mode == locksv1alpha1.LockModeExclusive {
		// Shared, the default, goes without saying (and on a lock of one place it holds alone).
		fmt.Fprintf(&b, " mode=%s", r.Mode)
	}
	if r.Reattached {
		b.WriteString(" reattached=true")
	}
	return b.String()
}
