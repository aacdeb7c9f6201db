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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// statusCommand prints who holds a lock (or every lock of the namespace) and who waits for it.
func (a *app) statusCommand(k *kubeFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status [LOCK] [-o text|json|yaml]",
		Short: "Show who holds a lock and who waits for it",
		Long: `Show a lock's backend, holder, fencing token, expiry and queue in grant order; without LOCK, a
table of every lock in the namespace (this needs list on distributedlocks).`,
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

// printLock describes one lock for humans.
func printLock(w io.Writer, s *lockclient.LockStatus, now time.Time) {
	ready := "ready"
	if !s.Ready {
		ready = "not ready: " + s.Message
	}
	fmt.Fprintf(w, "Lock:        %s/%s\n", s.Namespace, s.Lock)
	fmt.Fprintf(w, "Backend:     %s (%s)\n", s.Backend, ready)
	if h := s.Holder; h != nil {
		fmt.Fprintf(w, "Holder:      %s\n", holderName(h.Claim, h.Pod))
		fmt.Fprintf(w, "Token:       %d\n", h.FencingToken)
		fmt.Fprintf(w, "Acquired:    %s (%s ago)\n", h.AcquireTime.UTC().Format(time.RFC3339), since(now, h.AcquireTime))
		if h.ExpireTime != nil {
			fmt.Fprintf(w, "Expires:     %s (in %s)\n", h.ExpireTime.UTC().Format(time.RFC3339), since(*h.ExpireTime, now))
		}
	} else {
		fmt.Fprintf(w, "Holder:      none (last token %d)\n", s.LastFencingToken)
	}
	fmt.Fprintf(w, "Queue:       %d waiting\n", len(s.Queue))
	for _, q := range s.Queue {
		fmt.Fprintf(w, "  %d. %s, waiting %s (%s)\n", q.Position, holderName(q.Claim, q.Pod), since(now, q.Created), q.Reason)
	}
}

// printLocks lists every lock of a namespace as a table.
func printLocks(w io.Writer, ns string, locks []lockclient.LockStatus, now time.Time) {
	if len(locks) == 0 {
		fmt.Fprintf(w, "No DistributedLocks in namespace %s.\n", ns)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tHOLDER\tTOKEN\tEXPIRES\tWAITING\tREADY")
	for _, s := range locks {
		holder, token, expires := "<none>", "-", "-"
		if h := s.Holder; h != nil {
			holder, token = holderName(h.Claim, h.Pod), fmt.Sprint(h.FencingToken)
			if h.ExpireTime != nil {
				expires = "in " + since(*h.ExpireTime, now)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%t\n", s.Lock, holder, token, expires, len(s.Queue), s.Ready)
	}
	_ = tw.Flush()
}

func holderName(claim, pod string) string {
	if pod == "" {
		return "claim " + claim + " (detached)"
	}
	return "pod " + pod + " (claim " + claim + ")"
}

// since is later-earlier, rounded for humans.
func since(later, earlier time.Time) string {
	d := later.Sub(earlier)
	if d < 0 {
		d = 0
	}
	return strings.TrimSuffix(d.Round(time.Second).String(), "0s")
}
