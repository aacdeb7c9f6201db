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
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// argsAreCommandAnnotation marks a command whose arguments are a command line to run (run): its
// flags end at its first argument.
const argsAreCommandAnnotation = "lockctl.lockwarden.io/args-are-a-command"

// argsAreCommand makes cmd's flags end at its first argument, which starts a command line.
func argsAreCommand(cmd *cobra.Command) {
	cmd.Flags().SetInterspersed(false)
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[argsAreCommandAnnotation] = "true"
}

// rootCommand is lockctl's command tree. Every command takes kubectl's connection flags; a new
// command is one more constructor in the AddCommand list.
func (a *app) rootCommand() *cobra.Command {
	prog := a.name()
	root := &cobra.Command{
		// The binary's name (kubectl-lock for the plugin); help shows prog ("kubectl lock").
		Use:   strings.ReplaceAll(prog, " ", "-"),
		Short: "Take, hold, wait for, release and inspect lockwarden locks",
		Long: fmt.Sprintf(`%[1]s asks lockwarden for distributed locks: from init containers, CronJobs, scripts and
terminals (docs/lockctl.md).

Exit codes: 0 ok, 1 error, 2 usage, 3 timed out, 4 claim failed (lock, pod or claim missing,
key conflict, forbidden), 5 busy (acquire --try). run exits with its command's code, or with one
of its own from 120 to 127 (see run --help).`, prog),
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: prog},
		Args:        cobra.ArbitraryArgs,
		// Runs only without a known command: lockctl's usage errors, not cobra's help.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing command (%s)", commandList(cmd))
			}
			msg := fmt.Sprintf("unknown command %q", args[0])
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
			}
			return usagef("%s", msg)
		},
		ValidArgsFunction:          cobra.NoFileCompletions,
		SuggestionsMinimumDistance: 2,
		CompletionOptions:          cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	k := newKubeFlags()
	root.PersistentFlags().AddFlagSet(k.flags)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		a.acquireCommand(k),
		a.runCommand(k),
		a.waitCommand(k),
		a.releaseCommand(k),
		a.statusCommand(k),
		a.versionCommand(),
		a.completionCommand(),
	)
	return root
}

// commandList lists root's commands: "acquire, run or status".
func commandList(root *cobra.Command) string {
	var names []string
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// flagError turns pflag's complaint into a usage error that names the command. An invalid value
// is reported in the words lockctl has always used.
func flagError(cmd *cobra.Command, err error) error {
	var invalid *pflag.InvalidValueError
	if errors.As(err, &invalid) {
		err = fmt.Errorf("invalid value %q for flag -%s: %w", invalid.GetValue(), invalid.GetFlag().Name, errors.Unwrap(invalid))
	}
	if !cmd.HasParent() {
		return usagef("%v", err)
	}
	return usagef("%s: %v", cmd.Name(), err)
}

// completionCommand prints cobra's shell completion scripts.
func (a *app) completionCommand() *cobra.Command {
	prog := a.name()
	bin := strings.ReplaceAll(prog, " ", "-")
	long := fmt.Sprintf(`Print a script that completes %[1]s's commands, flags, and lock and claim names.

  source <(%[1]s completion bash)                 # bash (needs bash-completion)
  %[1]s completion zsh > "${fpath[1]}/_%[2]s"     # zsh
  %[1]s completion fish | source                  # fish`, prog, bin)
	if bin != prog {
		long += fmt.Sprintf(`

kubectl (1.26 and later) completes "%[1]s" through an executable named
kubectl_complete-%[3]s on the PATH, beside %[2]s:

  printf '#!/bin/sh\nexec %[2]s __complete "$@"\n' > kubectl_complete-%[3]s
  chmod +x kubectl_complete-%[3]s`, prog, bin, strings.TrimPrefix(bin, "kubectl-"))
	}
	return &cobra.Command{
		Use:       "completion bash|zsh|fish|powershell",
		Short:     "Print a shell completion script",
		Long:      long,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args:      cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("completion takes one shell: bash, zsh, fish or powershell")
			}
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(out)
			}
			return usagef("unknown shell %q: completion supports bash, zsh, fish and powershell", args[0])
		},
	}
}

// completeNames completes the names of the objects of kind (DistributedLock, LockClaim) in the
// namespace that the connection flags name. It lists metadata only.
func (a *app) completeNames(k *kubeFlags, kind string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cfg, ns, err := a.restConfig(k)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		c, err := client.New(cfg, client.Options{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind(kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, item := range list.Items {
			if strings.HasPrefix(item.Name, toComplete) {
				names = append(names, item.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// firstArg completes a command's first argument with complete, and nothing after it.
func firstArg(complete cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, args, toComplete)
	}
}
