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
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// statusCommand prints who holds a lock (or every lock of the namespace) and who waits for it.
func (a *app) statusCommand(k *kubeFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status [LOCK] [-o text|json|yaml]",
		Short: "Show who holds a lock and who waits for it",
		Long: `Show a lock's backend, places (spec.maxHolders), every holder with its mode, fencing token and
expiry, and the queue in grant order, with how each pod that asks by annotation waits (standing
by as a running hot standby, or gated) and a holder pod that terminates (labelled standby, no new
traffic) when pods can be listed; without LOCK, a table of every lock in the namespace (this
needs list on distributedlocks). With -o json or yaml, "holders" lists every holder; "holder", the
first of them, is kept for scripts written before shared locks.`,
		Example: fmt.Sprintf(`  %[1]s status db-migrate -n team-a
  %[1]s status -n team-a -o yaml`, a.name()),
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: firstArg(a.completeNames(k, "DistributedLock")),
		RunE: func(_ *cobra.Command, args []string) error {
			return a.status(k, output, args)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]cobra.Completion{"text", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// status prints the status of the lock in args, or of every lock of the namespace.
func (a *app) status(k *kubeFlags, output string, rest []string) error {
	switch {
	case len(rest) > 1:
		return usagef("status takes at most one lock name")
	case output != "text" && output != "json" && output != "yaml":
		return usagef("--output must be text, json or yaml, not %q", output)
	}
	c, ns, err := a.connect(k)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()

	var report any
	var all []lockclient.LockStatus
	var one *lockclient.LockStatus
	if len(rest) == 1 {
		if one, err = c.Status(ctx, ns, rest[0]); err != nil {
			return err
		}
		report = one
	} else {
		if all, err = c.StatusAll(ctx, ns); err != nil {
			return err
		}
		report = map[string]any{"namespace": ns, "locks": all}
	}
	now := time.Now()
	switch {
	case output == "json":
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	case output == "yaml":
		b, err := yaml.Marshal(report)
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(b)
		return err
	case one != nil:
		printLock(a.stdout, one, now)
	default:
		printLocks(a.stdout, ns, all, now)
	}
	return nil
}

// printLock describes one lock for humans: its places, every holder and the queue.
func printLock(w io.Writer, s *lockclient.LockStatus, now time.Time) {
	ready := "ready"
	if !s.Ready {
		ready = "not ready: " + s.Message
	}
	fmt.Fprintf(w, "Lock:        %s/%s\n", s.Namespace, s.Lock)
	fmt.Fprintf(w, "Backend:     %s (%s)\n", s.Backend, ready)
	fmt.Fprintf(w, "Places:      %s\n", places(s))
	if len(s.Holders) == 0 {
		fmt.Fprintf(w, "Holders:     none (last token %d)\n", s.LastFencingToken)
	} else {
		fmt.Fprintf(w, "Holders:     %d (last token %d)\n", len(s.Holders), s.LastFencingToken)
	}
	for i, h := range s.Holders {
		fmt.Fprintf(w, "  %d. %s, %s, token %d, acquired %s (%s ago)", i+1, holderName(h.Claim, h.Pod, h.Object), h.Mode, h.FencingToken,
			h.AcquireTime.UTC().Format(time.RFC3339), since(now, h.AcquireTime))
		if h.ExpireTime != nil {
			fmt.Fprintf(w, ", expires %s (in %s)", h.ExpireTime.UTC().Format(time.RFC3339), since(*h.ExpireTime, now))
		}
		if len(h.Together) > 0 {
			fmt.Fprintf(w, ", together with %s", strings.Join(h.Together, ", "))
		}
		if h.Role == locksv1alpha1.PodRoleStandby {
			fmt.Fprint(w, ", labelled standby (terminating: no new traffic)")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Queue:       %d waiting%s\n", len(s.Queue), standingBy(s.Queue))
	for _, q := range s.Queue {
		fmt.Fprintf(w, "  %d. %s, %s, waiting %s (%s)", q.Position, holderName(q.Claim, q.Pod, q.Object), q.Mode, since(now, q.Created), q.Reason)
		if q.Priority != 0 {
			fmt.Fprintf(w, ", priority %d", q.Priority)
		}
		if len(q.Together) > 0 {
			fmt.Fprintf(w, ", together with %s", strings.Join(q.Together, ", "))
		}
		switch q.Wait {
		case locksv1alpha1.PodLockWaitStandby:
			fmt.Fprint(w, ", standing by (running)")
		case locksv1alpha1.PodLockWaitGated:
			fmt.Fprint(w, ", gated (not scheduled until it holds)")
		}
		fmt.Fprintln(w)
	}
}

// standingBy counts the queued pods that run as hot standbys: ", 2 standing by", or "" for none.
func standingBy(queue []lockclient.QueuedClaim) string {
	n := 0
	for _, q := range queue {
		if q.Wait == locksv1alpha1.PodLockWaitStandby {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d standing by", n)
}

// places describes a lock's places and how they are taken: "1 (a mutex), held",
// "3, 2 held, 1 free".
func places(s *lockclient.LockStatus) string {
	n, held := int(max(s.MaxHolders, 1)), len(s.Holders)
	if n == 1 && held <= 1 {
		if held == 0 {
			return "1 (a mutex), free"
		}
		return "1 (a mutex), held"
	}
	exclusive := slices.ContainsFunc(s.Holders, func(h lockclient.HolderStatus) bool { return h.Mode == locksv1alpha1.LockModeExclusive })
	free := max(n-held, 0)
	if exclusive {
		free = 0
	}
	desc := fmt.Sprintf("%d, %d held, %d free", n, held, free)
	switch {
	case exclusive:
		desc += " (an Exclusive holder holds the lock alone)"
	case held > n:
		desc += " (maxHolders was lowered: nothing is granted until fewer hold it)"
	}
	return desc
}

// printLocks lists every lock of a namespace as a table: one line per lock, with its first
// holder and how many more hold it.
func printLocks(w io.Writer, ns string, locks []lockclient.LockStatus, now time.Time) {
	if len(locks) == 0 {
		fmt.Fprintf(w, "No DistributedLocks in namespace %s.\n", ns)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tHELD\tHOLDER\tTOKEN\tEXPIRES\tWAITING\tREADY")
	for _, s := range locks {
		holder, token, expires := "<none>", "-", "-"
		if len(s.Holders) > 0 {
			h := s.Holders[0]
			holder, token = holderName(h.Claim, h.Pod, h.Object), fmt.Sprint(h.FencingToken)
			if h.Mode == locksv1alpha1.LockModeExclusive && s.MaxHolders > 1 {
				holder += " Exclusive"
			}
			if more := len(s.Holders) - 1; more > 0 {
				holder += fmt.Sprintf(" and %d more", more)
			}
			if h.ExpireTime != nil {
				expires = "in " + since(*h.ExpireTime, now)
			}
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\t%d\t%t\n", s.Lock, len(s.Holders), max(s.MaxHolders, 1), holder, token, expires, len(s.Queue), s.Ready)
	}
	_ = tw.Flush()
}

func holderName(claim, pod, object string) string {
	switch {
	case object != "":
		kind, name, _ := strings.Cut(object, "/")
		return kind + " " + name + " (claim " + claim + ")"
	case pod == "":
		return "claim " + claim + " (detached)"
	}
	return "pod " + pod + " (claim " + claim + ")"
}

// since is later-earlier, rounded to the second for humans: "0s", "20s", "1m", "1h2m".
func since(later, earlier time.Time) string {
	d := max(later.Sub(earlier), 0)
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
