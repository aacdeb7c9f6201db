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
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

const usage = `lockctl asks lockwarden for distributed locks (docs/lockctl.md).

Usage:
  lockctl acquire --lock NAME [--timeout D] [--token-file PATH]   take a lock for this pod (init container)
  lockctl run --lock NAME [--timeout D] [--grace D] [--token-file PATH] -- COMMAND [ARG...]
                                                                  hold a lock while COMMAND runs
  lockctl wait CLAIM [--timeout D] [--token-file PATH]            wait until a LockClaim holds its lock
  lockctl release CLAIM | --lock NAME [--timeout D]               delete a claim, releasing its lock
  lockctl status [LOCK] [-o text|json|yaml]                       holder, token, expiry and queue
  lockctl version [-o text|json|yaml]                             lockctl's version, commit and Go version

Every command but version takes -n/--namespace, --kubeconfig, --context and --as.
Exit codes: 0 ok, 1 error, 2 usage, 3 timed out, 4 claim failed (lock, pod or claim missing,
forbidden), 5 lock lost during run; run otherwise exits with its command's code.
`

// app is one lockctl invocation.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// synopsis is the running command's usage line.
	synopsis string
}

// main runs the command in args and returns the exit code.
func (a *app) main(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(a.stderr, "lockctl: missing command (acquire, run, wait, release, status or version); run lockctl --help")
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	commands := map[string]func([]string) error{
		"acquire": a.acquire,
		"run":     a.run,
		"wait":    a.wait,
		"release": a.release,
		"status":  a.status,
		"version": a.version,
	}
	switch cmd {
	case "-h", "--help", "help":
		fmt.Fprint(a.stdout, usage)
		return exitOK
	case "--version":
		cmd = "version"
	}
	run, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(a.stderr, "lockctl: unknown command %q; run lockctl --help\n", cmd)
		return exitUsage
	}
	err := run(rest)
	var code exitStatus
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &code):
		return int(code) // run: the command's own exit code
	case err != nil:
		fmt.Fprintln(a.stderr, errorLine(cmd, err))
	}
	return exitCode(err)
}

// exitStatus is an exit code to return as is (run's command's).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// kubeFlags are the connection flags every command takes.
type kubeFlags struct {
	namespace, kubeconfig, context, as string
}

func (k *kubeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.namespace, "namespace", "", "Namespace of the lock and claims (default: POD_NAMESPACE, else the kubeconfig's, else the pod's)")
	fs.StringVar(&k.namespace, "n", "", "Shorthand for --namespace")
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "Path to a kubeconfig (default: KUBECONFIG, else in-cluster, else ~/.kube/config)")
	fs.StringVar(&k.context, "context", "", "The kubeconfig context to use")
	fs.StringVar(&k.as, "as", "", "User to impersonate, e.g. system:serviceaccount:NS:NAME")
}

// newFlagSet returns a flag set whose errors and help lockctl prints itself; synopsis is the
// usage line for -h.
func (a *app) newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	a.synopsis = synopsis
	return fs
}

// parseArgs parses args with fs and returns the positional arguments. Flags may follow positional
// arguments unless stopAtFirst is set (run: the command starts at the first positional argument);
// everything after "--" is positional. -h prints the usage and returns flag.ErrHelp.
func (a *app) parseArgs(fs *flag.FlagSet, args []string, stopAtFirst bool) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(a.stdout, "Usage: lockctl %s\n\nFlags:\n", a.synopsis)
				fs.SetOutput(a.stdout)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if len(rest) == 0 || stopAtFirst || (consumed > 0 && args[consumed-1] == "--") {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// connect builds a lockclient for the flags: a kubeconfig when one is named (--kubeconfig,
// --context or KUBECONFIG), else the in-cluster config, else ~/.kube/config. It also works out the
// namespace.
func (a *app) connect(k *kubeFlags) (*lockclient.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)

	var cfg *rest.Config
	var err error
	named := k.kubeconfig != "" || k.context != "" || a.getenv("KUBECONFIG") != ""
	if !named {
		cfg, err = rest.InClusterConfig()
	}
	if named || err != nil {
		if cfg, err = loader.ClientConfig(); err != nil {
			return nil, "", fmt.Errorf("no Kubernetes config (run in a pod, or set --kubeconfig or KUBECONFIG): %w", err)
		}
	}
	if k.as != "" {
		cfg.Impersonate.UserName = k.as
	}
	cfg.UserAgent = "lockctl"

	ns := k.namespace
	if ns == "" {
		ns = a.getenv("POD_NAMESPACE")
	}
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	c, err := lockclient.New(cfg)
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}

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
	podNS := a.getenv("POD_NAMESPACE")
	if k.namespace != "" && podNS != "" && k.namespace != podNS {
		return usagef("--namespace %s differs from POD_NAMESPACE %s: a claim for a pod lives in the pod's namespace", k.namespace, podNS)
	}
	return nil
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
	fmt.Fprintf(&b, "acquired lock %q in namespace %q: holder=%s token=%d waited=%s claim=%s",
		r.Lock, r.Namespace, r.Holder(), r.FencingToken, r.Waited.Round(time.Millisecond), r.Claim)
	if !r.ExpireTime.IsZero() {
		fmt.Fprintf(&b, " expires=%s", r.ExpireTime.UTC().Format(time.RFC3339))
	}
	if r.Reattached {
		b.WriteString(" reattached=true")
	}
	return b.String()
}
