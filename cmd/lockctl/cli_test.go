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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// Unit tests: argument parsing, exit codes and messages, the token file, and the supervision of a
// command in `run`. The commands against a real API server are in the envtest suite.

func TestParseArgs(t *testing.T) {
	cases := []struct {
		name        string
		args        []string
		stopAtFirst bool
		wantLock    string
		wantPos     []string
		wantErr     bool
	}{
		{name: "flags only", args: []string{"--lock", "db"}, wantLock: "db"},
		{name: "single dash and =", args: []string{"-lock=db"}, wantLock: "db"},
		{name: "flags after a positional", args: []string{"claim-1", "--lock", "db"}, wantLock: "db", wantPos: []string{"claim-1"}},
		{name: "positionals around flags", args: []string{"a", "--lock", "db", "b"}, wantLock: "db", wantPos: []string{"a", "b"}},
		{name: "-- ends the flags", args: []string{"--lock", "db", "--", "sh", "-c", "exit 7"}, wantLock: "db", wantPos: []string{"sh", "-c", "exit 7"}},
		{name: "run: the command starts at the first positional", args: []string{"--lock", "db", "sh", "-c", "exit 7"}, stopAtFirst: true, wantLock: "db", wantPos: []string{"sh", "-c", "exit 7"}},
		{name: "run: -- is optional", args: []string{"--lock", "db", "--", "env"}, stopAtFirst: true, wantLock: "db", wantPos: []string{"env"}},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: true},
		{name: "missing value", args: []string{"--lock"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			a := &app{stdout: &bytes.Buffer{}, stderr: &stderr, getenv: func(string) string { return "" }}
			var lock string
			var pos []string
			test := &cobra.Command{Use: "test", RunE: func(_ *cobra.Command, args []string) error { pos = args; return nil }}
			test.Flags().StringVar(&lock, "lock", "", "")
			if tc.stopAtFirst {
				argsAreCommand(test)
			}
			root := &cobra.Command{Use: "lockctl"}
			root.AddCommand(test)
			code := a.execute(root, append([]string{"test"}, tc.args...))
			if tc.wantErr {
				if code != exitUsage {
					t.Fatalf("want a usage error, got exit code %d (stderr %q)", code, stderr.String())
				}
				return
			}
			if code != exitOK {
				t.Fatalf("exit code %d (stderr %q)", code, stderr.String())
			}
			if lock != tc.wantLock || fmt.Sprint(pos) != fmt.Sprint(tc.wantPos) {
				t.Fatalf("got lock %q positionals %q, want %q %q", lock, pos, tc.wantLock, tc.wantPos)
			}
		})
	}
}

func TestUsageErrorsExit2WithOneLine(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: nil, want: "lockctl: missing command"},
		{args: []string{"frobnicate"}, want: `lockctl: unknown command "frobnicate"; run lockctl --help`},
		{args: []string{"acquire"}, want: "lockctl: --lock is required; see lockctl acquire -h"},
		{args: []string{"acquire", "--lock", "db"}, want: "lockctl: POD_NAME is not set"},
		{args: []string{"acquire", "--lock", "db", "extra"}, want: `lockctl: acquire takes no arguments, got ["extra"]`},
		{args: []string{"acquire", "--lock", "db", "--timeout", "soon"}, want: `lockctl: acquire: invalid value "soon" for flag -timeout`},
		{args: []string{"acquire", "--lock", "db", "-n", "b"}, env: map[string]string{"POD_NAME": "p", "POD_NAMESPACE": "a"},
			want: "lockctl: --namespace b differs from POD_NAMESPACE a"},
		{args: []string{"run", "--lock", "db"}, want: "lockctl: run needs a command"},
		{args: []string{"run", "--", "true"}, want: "lockctl: --lock is required"},
		{args: []string{"run", "--lock", "db", "--grace", "-1s", "--", "true"}, want: "lockctl: --timeout, --grace, --heartbeat and --clock-skew must not be negative"},
		{args: []string{"run", "--lock", "db", "--heartbeat", "-1s", "--", "true"}, want: "lockctl: --timeout, --grace, --heartbeat and --clock-skew must not be negative"},
		{args: []string{"run", "--lock", "db", "--clock-skew", "-1s", "--", "true"}, want: "lockctl: --timeout, --grace, --heartbeat and --clock-skew must not be negative"},
		{args: []string{"run", "--bogus", "--", "true"}, want: "lockctl: run: unknown flag: --bogus"},
		{args: []string{"acquire", "--lock", "db", "--try=maybe"}, want: `lockctl: acquire: invalid value "maybe" for flag -try`},
		{args: []string{"acquire", "--lock", "db", "--mode", "exclusive"}, env: map[string]string{"POD_NAME": "p"},
			want: `lockctl: --mode must be Shared or Exclusive, not "exclusive"; see lockctl acquire -h`},
		{args: []string{"acquire", "--lock", "db", "--mode="}, want: "lockctl: POD_NAME is not set"},
		{args: []string{"run", "--lock", "db", "--mode", "Read", "--", "true"}, want: `lockctl: --mode must be Shared or Exclusive, not "Read"; see lockctl run -h`},
		{args: []string{"run", "--lock", "db", "--mode"}, want: "lockctl: run: flag needs an argument: --mode"},
		{args: []string{"wait"}, want: "lockctl: wait takes one LockClaim name"},
		{args: []string{"release"}, want: "lockctl: release takes either one LockClaim name or --lock"},
		{args: []string{"release", "c", "--lock", "db"}, want: "lockctl: release takes either one LockClaim name or --lock"},
		{args: []string{"release", "--lock", "db"}, want: "lockctl: --lock releases this pod's claim, but POD_NAME is not set"},
		{args: []string{"status", "a", "b"}, want: "lockctl: status takes at most one lock name"},
		{args: []string{"status", "-o", "xml"}, want: `lockctl: --output must be text, json or yaml, not "xml"`},
		{args: []string{"version", "extra"}, want: `lockctl: version takes no arguments, got ["extra"]; see lockctl version -h`},
		{args: []string{"version", "-o", "xml"}, want: `lockctl: --output must be text, json or yaml, not "xml"`},
		{args: []string{"version", "--lock", "db"}, want: "lockctl: version: unknown flag: --lock"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			a := &app{stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return tc.env[k] }}
			want := exitUsage
			if len(tc.args) > 0 && tc.args[0] == "run" {
				want = runUsage // run's own codes stay out of its command's way
			}
			if code := a.main(tc.args); code != want {
				t.Fatalf("exit code %d, want %d (stderr %q)", code, want, stderr.String())
			}
			if !strings.HasPrefix(stderr.String(), tc.want) {
				t.Fatalf("stderr %q, want it to start with %q", stderr.String(), tc.want)
			}
			if strings.Count(stderr.String(), "\n") != 1 {
				t.Fatalf("stderr %q is not one line", stderr.String())
			}
		})
	}
}

func TestHelpExits0(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"acquire", "-h"}, {"run", "--help"}, {"status", "-h"}, {"version", "-h"}} {
		var stdout, stderr bytes.Buffer
		a := &app{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
		if code := a.main(args); code != exitOK || !strings.Contains(stdout.String(), "Usage") || stderr.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
}

func TestExitCodesAndMessages(t *testing.T) {
	lerr := func(kind error, detail string) error {
		return &lockclient.Error{Kind: kind, Namespace: "team-a", Lock: "db-migrate", Detail: detail}
	}
	cases := []struct {
		cmd  string
		err  error
		code int
		line string
	}{
		{"acquire", nil, 0, ""},
		{"acquire", usagef("--lock is required"), 2, "lockctl: --lock is required; see lockctl acquire -h"},
		{"acquire", lerr(lockclient.ErrTimedOut, `timed out waiting for lock "db-migrate" in namespace "team-a"`), 3,
			`lockctl: timed out waiting for lock "db-migrate" in namespace "team-a"; raise --timeout, or see who holds the lock: lockctl status db-migrate -n team-a`},
		{"acquire", lerr(lockclient.ErrLockNotFound, `lock "db-migrate" not found in namespace "team-a"`), 4,
			`lockctl: lock "db-migrate" not found in namespace "team-a"; create the DistributedLock or fix --lock`},
		{"acquire", lerr(lockclient.ErrPodNotFound, `pod "web-0" not found in namespace "team-a"`), 4,
			`lockctl: pod "web-0" not found in namespace "team-a"; set POD_NAME, POD_NAMESPACE and POD_UID from the downward API of the pod lockctl runs in (docs/lockctl.md)`},
		{"acquire", lerr(lockclient.ErrForbidden, "lockclaims is forbidden: User \"u\" cannot create resource \"lockclaims\""), 4,
			`lockctl: lockclaims is forbidden: User "u" cannot create resource "lockclaims"; give the service account the lockctl Role (config/samples/pods/lockctl-rbac.yaml) or fix --as`},
		{"run", lerr(lockclient.ErrForbidden, `leases.coordination.k8s.io is forbidden: User "u" cannot create resource "leases" in API group "coordination.k8s.io"`), 122,
			`lockctl: leases.coordination.k8s.io is forbidden: User "u" cannot create resource "leases" in API group "coordination.k8s.io"; give the account the lockctl-run Role (config/samples/pods/lockctl-run-rbac.yaml), or pass --heartbeat 0`},
		{"acquire", lerr(lockclient.ErrBackendNotFound, "lock cannot be used"), 4, "lockctl: lock cannot be used; ask a cluster admin"},
		{"acquire", lerr(lockclient.ErrKeyConflict, "lock cannot be granted"), 4, "lockctl: lock cannot be granted; give the DistributedLock another spec.key"},
		{"wait", lerr(lockclient.ErrClaimNotFound, `claim "c" not found in namespace "team-a"`), 4,
			`lockctl: claim "c" not found in namespace "team-a"; list the claims with: kubectl get lockclaims -n team-a`},
		{"wait", lerr(lockclient.ErrClaimEnded, "claim ended in phase Lost"), 4, "lockctl: claim ended in phase Lost; run lockctl again to queue a new claim"},
		{"acquire", lerr(lockclient.ErrModeConflict, "pod web-0 already has LockClaim c for lock \"db-migrate\" in mode Shared, not Exclusive"), 4,
			`lockctl: pod web-0 already has LockClaim c for lock "db-migrate" in mode Shared, not Exclusive; give --mode the claim's mode (the pod's locks.lockwarden.io/lock-mode annotation sets it) or leave --mode out`},
		{"run", lerr(lockclient.ErrModeConflict, "in mode Shared, not Exclusive"), 122, "lockctl: in mode Shared, not Exclusive; give --mode the claim's mode"},
		{"acquire", lerr(lockclient.ErrPriorityConflict, "pod web-0 already has LockClaim c for lock \"db-migrate\" at priority 0, not 10"), 4,
			`lockctl: pod web-0 already has LockClaim c for lock "db-migrate" at priority 0, not 10; give --priority the claim's priority (the pod's locks.lockwarden.io/lock-priority annotation sets it) or leave --priority out`},
		{"acquire", lerr(lockclient.ErrLockBusy, `lock "db-migrate" in namespace "team-a" is busy (held by claim web-0-db-migrate-1a2b3c4d5e)`), 5,
			`lockctl: lock "db-migrate" in namespace "team-a" is busy (held by claim web-0-db-migrate-1a2b3c4d5e); try again later, or see who holds it: lockctl status db-migrate -n team-a`},
		{"run", lerr(lockclient.ErrLost, "lost lock \"db-migrate\"\nsomething"), 123, `lockctl: lost lock "db-migrate" something; its fencing token is stale; the command was stopped`},
		{"run", &lockclient.Error{Kind: lockclient.ErrLost, Err: lockclient.ErrExpired, Detail: `lost lock "db-migrate": no renewal seen`}, 123,
			`lockctl: lost lock "db-migrate": no renewal seen; its fencing token may be stale; the command was stopped (is the API server reachable from here?)`},
		{"run", lerr(lockclient.ErrLockBusy, "lock is busy"), 121, "lockctl: lock is busy; try again later, or see who holds it: lockctl status db-migrate -n team-a"},
		{"run", lerr(lockclient.ErrTimedOut, "timed out waiting"), 124, "lockctl: timed out waiting; raise --timeout"},
		{"run", lerr(lockclient.ErrLockNotFound, "gone"), 122, "lockctl: gone; create the DistributedLock or fix --lock"},
		{"run", usagef("--lock is required"), 125, "lockctl: --lock is required; see lockctl run -h"},
		{"run", &commandError{command: "nope", missing: true, err: exec.ErrNotFound}, 127, `lockctl: command "nope" not found in PATH; check the command's name and PATH`},
		{"run", &commandError{command: "./x", err: fs.ErrPermission}, 126, `lockctl: cannot execute "./x": permission denied; check the file's permissions and interpreter line`},
		{"run", &interrupted{signal: syscall.SIGHUP, lock: "db-migrate"}, 129, `lockctl: interrupted by SIGHUP while waiting for lock "db-migrate"; the claim was withdrawn`},
		{"run", errors.New("dial tcp: connection refused"), 120, "lockctl: dial tcp: connection refused"},
		{"run", exitStatus(7), 7, "lockctl: exit status 7"},
		{"release", lerr(lockclient.ErrTimedOut, "not released yet"), 3, "lockctl: not released yet; check that the lockwarden controller is running"},
		{"status", errors.New("Get \"https://x\": dial tcp: connection refused"), 1, `lockctl: Get "https://x": dial tcp: connection refused`},
		{"acquire", fmt.Errorf("wrapped: %w", lerr(lockclient.ErrLockNotFound, "gone")), 4, "lockctl: wrapped: gone; create the DistributedLock or fix --lock"},
		{"acquire", fmt.Errorf("reading LockClaim x: %w", context.Canceled), 1, "lockctl: interrupted by a signal"},
	}
	for _, tc := range cases {
		if got := exitCode(tc.cmd, tc.err); got != tc.code {
			t.Errorf("exitCode(%s, %v) = %d, want %d", tc.cmd, tc.err, got, tc.code)
		}
		if tc.err == nil {
			continue
		}
		if got := errorLine("lockctl", tc.cmd, tc.err); !strings.HasPrefix(got, tc.line) || strings.Contains(got, "\n") {
			t.Errorf("errorLine(%s, %v) =\n  %q\nwant prefix\n  %q", tc.cmd, tc.err, got, tc.line)
		}
	}
}

func TestWriteTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if err := writeTokenFile(path, "1764480000000001"); err != nil {
		t.Fatal(err)
	}
	// Overwriting replaces the token (a re-attach after a restart).
	if err := writeTokenFile(path, "1764480000000002"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "1764480000000002" {
		t.Fatalf("token file holds %q", b)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("token file mode %v, want 0644", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}

	err = writeTokenFile(filepath.Join(dir, "missing", "token"), "1")
	if err == nil || !strings.Contains(err.Error(), "mount a writable volume") {
		t.Fatalf("want an error that says what to do, got %v", err)
	}
}

func TestTokensOfSeveralLocks(t *testing.T) {
	one := &lockclient.Result{Lock: "db", FencingToken: 7}
	several := &lockclient.Result{Lock: "prod,staging", Locks: []lockclient.HeldLock{{Lock: "prod", FencingToken: 12}, {Lock: "staging", FencingToken: 40}}}
	for _, tc := range []struct {
		res        *lockclient.Result
		file, env  string
		lineTokens string
	}{
		{one, "7", "LOCKWARDEN_FENCING_TOKEN=7", " token=7 "},
		{several, "prod=12\nstaging=40\n", "LOCKWARDEN_FENCING_TOKENS=prod=12,staging=40", " tokens=prod:12,staging:40 "},
	} {
		if got := tokenFileContent(tc.res); got != tc.file {
			t.Errorf("token file of %s: %q, want %q", tc.res.Lock, got, tc.file)
		}
		if got := tokenEnv(tc.res); got != tc.env {
			t.Errorf("run's variable for %s: %q, want %q", tc.res.Lock, got, tc.env)
		}
		if got := acquiredLine(tc.res); !strings.Contains(got, tc.lineTokens) {
			t.Errorf("acquired line for %s: %q, want %q in it", tc.res.Lock, got, tc.lineTokens)
		}
	}
}

func TestLockNames(t *testing.T) {
	for _, tc := range []struct {
		flags   []string
		lock    string
		several []string
		err     string
	}{
		{[]string{"db"}, "db", nil, ""},
		{[]string{"staging", "prod"}, "", []string{"staging", "prod"}, ""},
		{[]string{"staging,prod"}, "", []string{"staging", "prod"}, ""},
		{nil, "", nil, "--lock is required"},
		{[]string{"a", "a"}, "", nil, `--lock names "a" twice`},
		{[]string{"a,"}, "", nil, `--lock "a," names no lock`},
		{[]string{"a,b,c,d,e,f,g,h,i"}, "", nil, "--lock names 9 locks; a claim holds at most 8 together"},
	} {
		lock, several, err := lockNames(tc.flags)
		switch {
		case tc.err != "":
			if err == nil || err.Error() != tc.err {
				t.Errorf("lockNames(%q) error %v, want %q", tc.flags, err, tc.err)
			}
		case err != nil || lock != tc.lock || !slices.Equal(several, tc.several):
			t.Errorf("lockNames(%q) = %q, %q, %v; want %q, %q", tc.flags, lock, several, err, tc.lock, tc.several)
		}
	}
}

func TestCommandExitCode(t *testing.T) {
	cases := map[string]int{"exit 0": 0, "exit 7": 7, "kill -TERM $$": 128 + int(syscall.SIGTERM)}
	for script, want := range cases {
		err := exec.Command("sh", "-c", script).Run()
		if got := commandExitCode(err); got != want {
			t.Errorf("%s: exit code %d, want %d", script, got, want)
		}
	}
}

func TestSuperviseStopsTheCommandWhenTheLockIsLost(t *testing.T) {
	cases := []struct {
		name   string
		script string
		want   int
	}{
		// The shell traps TERM and exits on its own.
		{"TERM", `trap 'exit 0' TERM; while :; do sleep 0.05; done`, 0},
		// The shell ignores TERM: KILL after the grace period.
		{"KILL after grace", `trap '' TERM; while :; do sleep 0.05; done`, 128 + int(syscall.SIGKILL)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lostErr := &lockclient.Error{Kind: lockclient.ErrLost, Detail: "lost"}
			start := time.Now()
			child := &target{pid: cmd.Process.Pid, ownGroup: true, foreground: func() bool { return false }}
			code, err := supervise(cmd, child, nil, 300*time.Millisecond, func(context.Context) error {
				time.Sleep(100 * time.Millisecond)
				return lostErr
			})
			if !errors.Is(err, lockclient.ErrLost) || code != tc.want {
				t.Fatalf("supervise = %d, %v; want %d and the loss", code, err, tc.want)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %s", time.Since(start))
			}
		})
	}

	// No loss: the command's own code, and a signal to lockctl reaches the command.
	cmd := exec.Command("sh", "-c", `trap 'exit 9' INT; while :; do sleep 0.05; done`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	signals := make(chan os.Signal, 1)
	go func() { time.Sleep(100 * time.Millisecond); signals <- os.Interrupt }()
	child := &target{pid: cmd.Process.Pid, ownGroup: true, foreground: func() bool { return false }}
	code, err := supervise(cmd, child, signals, time.Second, func(ctx context.Context) error { <-ctx.Done(); return nil })
	if err != nil || code != 9 {
		t.Fatalf("supervise = %d, %v; want 9 and no loss", code, err)
	}
}

// In lockctl's own process group, in the foreground of a terminal, the command got the
// terminal's SIGINT itself: lockctl must not send it a second one. Other signals, and SIGINT
// when lockctl is not in the foreground, are passed on.
func TestForwardSkipsTheTerminalsSignalsInTheForeground(t *testing.T) {
	cases := []struct {
		name       string
		foreground bool
		want       string
	}{
		{"foreground: INT came from the terminal", true, "term\n"},
		{"background: INT is passed on", false, "int\nterm\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, ready := filepath.Join(dir, "out"), filepath.Join(dir, "ready")
			cmd := exec.Command("sh", "-c", `trap 'echo int >> `+out+`' INT; trap 'echo term >> `+out+`; exit 0' TERM; touch `+ready+`; while :; do sleep 0.05; done`)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill() }()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				} else if time.Now().After(deadline) {
					t.Fatal("the command did not start")
				}
			}
			child := &target{pid: cmd.Process.Pid, foreground: func() bool { return tc.foreground }}
			child.forward(syscall.SIGINT)
			time.Sleep(300 * time.Millisecond) // the shell runs a trap between two sleeps
			child.forward(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("the command saw %q, want %q", got, tc.want)
			}
		})
	}
}

// A command that cannot run is refused before lockctl asks for the lock: no cluster is needed
// to see it (the kubeconfig here points nowhere).
func TestRunRefusesACommandThatCannotRun(t *testing.T) {
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		command string
		code    int
		line    string
	}{
		{"no-such-command-lockctl-test", runCommandMissing,
			`lockctl: command "no-such-command-lockctl-test" not found in PATH; check the command's name and PATH`},
		{filepath.Join(dir, "missing.sh"), runCommandMissing, `lockctl: command "` + filepath.Join(dir, "missing.sh") + `" not found: no such file or directory; check`},
		{notExecutable, runCannotExecute, `lockctl: cannot execute "` + notExecutable + `": permission denied; check the file's permissions and interpreter line`},
		{dir, runCannotExecute, `lockctl: cannot execute "` + dir + `": is a directory; check`},
	}
	for _, tc := range cases {
		t.Run(tc.command, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			env := map[string]string{"KUBECONFIG": filepath.Join(dir, "no-kubeconfig")}
			a := &app{stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return env[k] }}
			code := a.main([]string{"run", "--lock", "db", "--", tc.command})
			if code != tc.code {
				t.Fatalf("exit code %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if !strings.HasPrefix(stderr.String(), tc.line) || strings.Count(stderr.String(), "\n") != 1 {
				t.Fatalf("stderr %q, want one line starting with %q", stderr.String(), tc.line)
			}
		})
	}
}
