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
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// acquireCommand takes a lock for lockctl's own pod and waits for it: the init-container command.
func (a *app) acquireCommand(k *kubeFlags) *cobra.Command {
	var o acquireOptions
	cmd := &cobra.Command{
		Use:   "acquire --lock NAME [--mode Shared|Exclusive] [--try] [--timeout D] [--token-file PATH]",
		Short: "Take a lock for this pod and wait for it (init containers)",
		Long: `Take a lock for this pod and wait for it: the init-container command. The claim is the pod's,
named by the downward API (POD_NAME, POD_NAMESPACE, POD_UID); the controller releases the lock
when the pod ends. A restarted init container finds its claim again.

--mode says how the pod holds a lock of several places (spec.maxHolders): Shared, the default,
takes one place beside other Shared holders; Exclusive holds the lock alone (a writer beside
Shared readers). On a lock of one place both hold it alone.

With --try it does not queue: it takes the lock if the controller grants it at once, and
otherwise withdraws the claim and exits 5 (busy). --timeout then bounds the wait for the
controller's answer (default 30s).`,
		Example: fmt.Sprintf(`  %[1]s acquire --lock db-migrate --timeout 15m --token-file /lock/token
  %[1]s acquire --lock db-migrate --try || echo "someone else migrates"
  %[1]s acquire --lock reports --mode Exclusive --token-file /lock/token   # the writer of a read/write lock`, a.name()),
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.acquire(k, &o, args)
		},
	}
	f := cmd.Flags()
	lockFlag(cmd, &o.locks, "Name of the DistributedLock (required); repeat it, or separate names by commas, to hold 2 to 8 locks together")
	f.DurationVar(&o.timeout, "timeout", 0, "Give up after this long, exit code 3 (0 waits forever)")
	f.StringVar(&o.tokenFile, "token-file", "", "Write the fencing token to this file")
	f.BoolVar(&o.try, "try", false, "Do not queue: take the lock only if it is granted at once, else exit code 5")
	modeFlag(cmd, &o.mode)
	priorityFlag(cmd, &o.priority)
	_ = cmd.RegisterFlagCompletionFunc("lock", a.completeNames(k, "DistributedLock"))
	return cmd
}

// acquireOptions are acquire's flags.
type acquireOptions struct {
	locks           []string
	tokenFile, mode string
	timeout         time.Duration
	try             bool
	priority        int32
}

// lockFlag adds --lock, repeatable, to cmd.
func lockFlag(cmd *cobra.Command, locks *[]string, usage string) {
	cmd.Flags().StringArrayVar(locks, "lock", nil, usage)
}

// lockNames reads --lock: one lock (lock), or 2 to 8 held together (locks), given as repeated
// flags or comma-separated names (a comma cannot be in a lock's name).
func lockNames(flags []string) (lock string, locks []string, err error) {
	var names []string
	seen := map[string]bool{}
	for _, f := range flags {
		for n := range strings.SplitSeq(f, ",") {
			n = strings.TrimSpace(n)
			switch {
			case n == "":
				return "", nil, usagef("--lock %q names no lock", f)
			case seen[n]:
				return "", nil, usagef("--lock names %q twice", n)
			}
			seen[n] = true
			names = append(names, n)
		}
	}
	switch {
	case len(names) == 0:
		return "", nil, usagef("--lock is required")
	case len(names) == 1:
		return names[0], nil, nil
	case len(names) > 8:
		return "", nil, usagef("--lock names %d locks; a claim holds at most 8 together", len(names))
	}
	return "", names, nil
}

// locksLabel names the lock, or the locks, lockNames read, in messages.
func locksLabel(lock string, several []string) string {
	spec := locksv1alpha1.LockClaimSpec{LockName: lock, LockNames: several}
	return locksv1alpha1.LocksLabel(spec.Locks())
}

// priorityFlag adds --priority, the claim's spec.priority, to cmd.
func priorityFlag(cmd *cobra.Command, priority *int32) {
	cmd.Flags().Int32Var(priority, "priority", 0, "Place in the lock's queue: claims of a higher priority are granted before those of a lower one, whenever they came (it never ends a hold); 0 is the default, negative values wait behind it")
}

// modeFlag adds --mode, the claim's spec.mode, to cmd.
func modeFlag(cmd *cobra.Command, mode *string) {
	cmd.Flags().StringVar(mode, "mode", "", "How to hold a lock of several places: Shared (the default; one place beside other Shared holders) or Exclusive (alone)")
	_ = cmd.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions(
		[]cobra.Completion{string(locksv1alpha1.LockModeShared), string(locksv1alpha1.LockModeExclusive)}, cobra.ShellCompDirectiveNoFileComp))
}

// parseMode checks a --mode value: empty (the default, Shared), Shared or Exclusive.
func parseMode(mode string) (locksv1alpha1.LockMode, error) {
	m := locksv1alpha1.LockMode(mode)
	if mode != "" && !m.IsValid() {
		return "", usagef("--mode must be %s or %s, not %q", locksv1alpha1.LockModeShared, locksv1alpha1.LockModeExclusive, mode)
	}
	return m, nil
}

// acquire takes the lock for lockctl's own pod.
func (a *app) acquire(k *kubeFlags, o *acquireOptions, args []string) error {
	switch {
	case len(args) > 0:
		return usagef("acquire takes no arguments, got %q", args)
	case o.timeout < 0:
		return usagef("--timeout must not be negative")
	}
	lock, several, err := lockNames(o.locks)
	if err != nil {
		return err
	}
	mode, err := parseMode(o.mode)
	if err != nil {
		return err
	}
	pod := a.podFromEnv()
	if pod == nil {
		return usagef("POD_NAME is not set: acquire takes the lock for its own pod, named by the downward API (POD_NAME, POD_NAMESPACE, POD_UID); use %s run outside a pod", a.name())
	}
	if err := a.checkPodNamespace(k); err != nil {
		return err
	}
	c, ns, err := a.connect(k)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	acquire := c.Acquire
	if o.try {
		acquire = c.TryAcquire
	}
	hold, err := acquire(ctx, lockclient.Request{Namespace: ns, Lock: lock, Locks: several, Pod: pod, Mode: mode, Priority: o.priority, Timeout: o.timeout})
	if err != nil {
		return err
	}
	return a.acquired(&hold.Result, o.tokenFile)
}

// waitCommand waits until an existing claim holds its lock.
func (a *app) waitCommand(k *kubeFlags) *cobra.Command {
	var o waitOptions
	cmd := &cobra.Command{
		Use:   "wait CLAIM [--timeout D] [--token-file PATH]",
		Short: "Wait until a LockClaim holds its lock",
		Long: `Wait until the LockClaim CLAIM holds its lock, and print what acquire prints. It creates and
deletes nothing, and fails at once (exit code 4) when the claim cannot be granted.`,
		Example:           fmt.Sprintf("  %s wait maintenance-window -n team-a --timeout 10m", a.name()),
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: firstArg(a.completeNames(k, "LockClaim")),
		RunE: func(_ *cobra.Command, args []string) error {
			return a.wait(k, &o, args)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.timeout, "timeout", 0, "Give up after this long, exit code 3 (0 waits forever)")
	f.StringVar(&o.tokenFile, "token-file", "", "Write the fencing token to this file")
	return cmd
}

// waitOptions are wait's flags.
type waitOptions struct {
	tokenFile string
	timeout   time.Duration
}

// wait waits until the claim in args holds its lock.
func (a *app) wait(k *kubeFlags, o *waitOptions, args []string) error {
	switch {
	case len(args) != 1:
		return usagef("wait takes one LockClaim name")
	case o.timeout < 0:
		return usagef("--timeout must not be negative")
	}
	c, ns, err := a.connect(k)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	ctx, cancelTimeout := withTimeout(ctx, o.timeout)
	defer cancelTimeout()
	res, err := c.Wait(ctx, ns, args[0])
	if err != nil {
		return err
	}
	return a.acquired(res, o.tokenFile)
}

// releaseCommand deletes a claim (by name, or with --lock this pod's claim for the lock) and waits
// until the controller has released the lock.
func (a *app) releaseCommand(k *kubeFlags) *cobra.Command {
	var o releaseOptions
	cmd := &cobra.Command{
		Use:   "release CLAIM | --lock NAME [--timeout D]",
		Short: "Delete a claim, releasing its lock",
		Long: `Delete the LockClaim CLAIM, or with --lock this pod's claim for the lock (POD_NAME, POD_UID),
and wait until the controller has released the lock. A claim that is gone counts as released.`,
		Example: fmt.Sprintf(`  %[1]s release --lock db-migrate          # in a pod: its claim
  %[1]s release nightly-migration-8x2kq -n team-a`, a.name()),
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: firstArg(a.completeNames(k, "LockClaim")),
		RunE: func(_ *cobra.Command, args []string) error {
			return a.release(k, &o, args)
		},
	}
	f := cmd.Flags()
	lockFlag(cmd, &o.locks, "Release this pod's claim for this lock (POD_NAME, POD_UID) instead of a named claim; repeat it for a claim of several locks")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "How long to wait for the controller to release the lock, exit code 3 (0 waits forever)")
	_ = cmd.RegisterFlagCompletionFunc("lock", a.completeNames(k, "DistributedLock"))
	return cmd
}

// releaseOptions are release's flags.
type releaseOptions struct {
	locks   []string
	timeout time.Duration
}

// release deletes the claim in args, or this pod's claim for --lock, and waits until the
// controller has released the lock.
func (a *app) release(k *kubeFlags, o *releaseOptions, args []string) error {
	switch {
	case len(o.locks) == 0 && len(args) != 1, len(o.locks) != 0 && len(args) != 0:
		return usagef("release takes either one LockClaim name or --lock")
	case o.timeout < 0:
		return usagef("--timeout must not be negative")
	}
	var names []string
	if len(o.locks) > 0 {
		lock, several, err := lockNames(o.locks)
		if err != nil {
			return err
		}
		names = append(several, lock)
		if lock == "" {
			names = several
		}
	}
	pod := a.podFromEnv()
	if len(names) > 0 {
		if pod == nil {
			return usagef("--lock releases this pod's claim, but POD_NAME is not set; give the claim's name instead")
		}
		if err := a.checkPodNamespace(k); err != nil {
			return err
		}
	}
	c, ns, err := a.connect(k)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	ctx, cancelTimeout := withTimeout(ctx, o.timeout)
	defer cancelTimeout()
	name := ""
	if len(args) == 1 {
		name = args[0]
	} else if name, err = c.PodClaim(ctx, ns, *pod, names[0], names[1:]...); err != nil {
		return err
	}
	if err := c.Release(ctx, ns, name); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "released claim %q in namespace %q\n", name, ns)
	return nil
}

// acquired reports a granted claim: the token to tokenFile (when set) and one line to stdout.
func (a *app) acquired(res *lockclient.Result, tokenFile string) error {
	if tokenFile != "" {
		if err := writeTokenFile(tokenFile, tokenFileContent(res)); err != nil {
			return err
		}
	}
	fmt.Fprintln(a.stdout, acquiredLine(res))
	return nil
}
