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
	"strings"
	"testing"
)

// Unit tests of the command tree: the name lockctl goes by (kubectl plugin or not) in help and
// messages, shell completion, and cobra's complaints as usage errors. The plugin run by kubectl
// and the connection flags against a real API server are in the envtest suite.

// invoke runs lockctl as prog with args and returns the exit code, stdout and stderr.
func invoke(prog string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }, prog: prog}
	code := a.main(args)
	return code, stdout.String(), stderr.String()
}

func TestProgramName(t *testing.T) {
	cases := map[string]string{
		"lockctl":                         "lockctl",
		"/lockctl":                        "lockctl",
		"./bin/lockctl":                   "lockctl",
		"/usr/local/bin/kubectl-lock":     "kubectl lock",
		"kubectl-lock":                    "kubectl lock",
		"/home/me/.krew/bin/kubectl-lock": "kubectl lock",
		"kubectl-":                        "lockctl",
		"/tmp/lockctl.test":               "lockctl",
	}
	for argv0, want := range cases {
		if got := programName(argv0); got != want {
			t.Errorf("programName(%q) = %q, want %q", argv0, got, want)
		}
	}
}

func TestHelpNamesThePlugin(t *testing.T) {
	cases := []struct {
		prog    string
		args    []string
		want    []string
		notWant string
	}{
		{"kubectl lock", []string{"--help"}, []string{"kubectl lock [command]", "acquire", "status", "wait", "--context", "--namespace", "--server"}, "lockctl ["},
		{"kubectl lock", []string{"acquire", "-h"}, []string{"Usage:\n  kubectl lock acquire --lock NAME", "  kubectl lock acquire --lock db-migrate"}, "lockctl acquire"},
		{"kubectl lock", []string{"help", "status"}, []string{"kubectl lock status [LOCK]", "-o, --output"}, "lockctl status"},
		{"lockctl", []string{"run", "--help"}, []string{"Usage:\n  lockctl run --lock NAME", "--grace"}, "kubectl"},
	}
	for _, tc := range cases {
		code, stdout, stderr := invoke(tc.prog, tc.args...)
		if code != exitOK || stderr != "" {
			t.Errorf("%s %v: exit %d, stderr %q", tc.prog, tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%s %v: help lacks %q:\n%s", tc.prog, tc.args, w, stdout)
			}
		}
		if strings.Contains(stdout, tc.notWant) {
			t.Errorf("%s %v: help says %q:\n%s", tc.prog, tc.args, tc.notWant, stdout)
		}
	}
}

func TestUsageErrorsNameTheProgram(t *testing.T) {
	cases := []struct {
		prog string
		args []string
		want string
	}{
		{"lockctl", []string{"acquire", "--nope"}, "lockctl: acquire: unknown flag: --nope; see lockctl acquire -h"},
		{"lockctl", []string{"--nope"}, "lockctl: unknown flag: --nope; run lockctl --help"},
		{"lockctl", []string{"status", "-x"}, `lockctl: status: unknown shorthand flag: 'x' in -x; see lockctl status -h`},
		{"lockctl", []string{"stauts"}, `lockctl: unknown command "stauts" (did you mean status?); run lockctl --help`},
		{"lockctl", []string{"wait", "--timeout", "5"}, `lockctl: wait: invalid value "5" for flag -timeout: time: missing unit in duration "5"; see lockctl wait -h`},
		{"kubectl lock", []string{"frobnicate"}, `kubectl lock: unknown command "frobnicate"; run kubectl lock --help`},
		{"kubectl lock", []string{"acquire"}, "kubectl lock: --lock is required; see kubectl lock acquire -h"},
		{"kubectl lock", []string{"run", "--lock", "db"}, "kubectl lock: run needs a command: kubectl lock run --lock NAME -- COMMAND [ARG...]; see kubectl lock run -h"},
		{"kubectl lock", []string{"completion"}, "kubectl lock: completion takes one shell: bash, zsh, fish or powershell; see kubectl lock completion -h"},
		{"kubectl lock", []string{"completion", "tcsh"}, `kubectl lock: unknown shell "tcsh": completion supports bash, zsh, fish and powershell; see kubectl lock completion -h`},
	}
	for _, tc := range cases {
		want := exitUsage
		if tc.args[0] == "run" {
			want = runUsage
		}
		code, stdout, stderr := invoke(tc.prog, tc.args...)
		if code != want || stderr != tc.want+"\n" || stdout != "" {
			t.Errorf("%s %v: exit %d, stderr %q, stdout %q; want exit %d and stderr %q", tc.prog, tc.args, code, stderr, stdout, want, tc.want)
		}
	}

	// The list of commands grows; what is said around it does not.
	code, stdout, stderr := invoke("kubectl lock")
	if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.HasPrefix(stderr, "kubectl lock: missing command (acquire, completion, release, run, ") ||
		!strings.HasSuffix(stderr, " or wait); run kubectl lock --help\n") {
		t.Errorf("kubectl lock: exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
}

func TestCompletionScripts(t *testing.T) {
	cases := []struct {
		prog, shell, want string
	}{
		{"lockctl", "bash", "complete -o default -F __start_lockctl lockctl"},
		{"lockctl", "zsh", "#compdef lockctl"},
		{"lockctl", "fish", "complete -c lockctl -e"},
		{"lockctl", "powershell", "Register-ArgumentCompleter -CommandName 'lockctl'"},
		{"kubectl lock", "bash", "complete -o default -F __start_kubectl-lock kubectl-lock"},
		{"kubectl lock", "zsh", "#compdef kubectl-lock"},
	}
	for _, tc := range cases {
		code, stdout, stderr := invoke(tc.prog, "completion", tc.shell)
		if code != exitOK || stderr != "" || !strings.Contains(stdout, tc.want) {
			t.Errorf("%s completion %s: exit %d, stderr %q; want a script with %q, got %d bytes", tc.prog, tc.shell, code, stderr, tc.want, len(stdout))
		}
	}

	// The scripts ask lockctl itself (__complete) for commands, flags and values.
	code, stdout, _ := invoke("lockctl", "__complete", "")
	if code != exitOK || !hasLines(stdout, "acquire\t", "run\t", "wait\t", "release\t", "status\t", "completion\t") {
		t.Errorf("__complete '': exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = invoke("lockctl", "__complete", "status", "-o", "")
	if code != exitOK || !strings.HasPrefix(stdout, "text\njson\nyaml\n:4\n") {
		t.Errorf("__complete status -o '': exit %d, stdout %q", code, stdout)
	}
	for _, cmd := range []string{"acquire", "run"} {
		code, stdout, _ = invoke("lockctl", "__complete", cmd, "--mode", "")
		if code != exitOK || !strings.HasPrefix(stdout, "Shared\nExclusive\n:4\n") {
			t.Errorf("__complete %s --mode '': exit %d, stdout %q", cmd, code, stdout)
		}
	}
	code, stdout, _ = invoke("kubectl lock", "__complete", "status", "--cont")
	if code != exitOK || !hasLines(stdout, "--context\t") {
		t.Errorf("__complete status --cont: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = invoke("kubectl lock", "__complete", "completion", "")
	if code != exitOK || !strings.HasPrefix(stdout, "bash\nzsh\nfish\npowershell\n") {
		t.Errorf("__complete completion '': exit %d, stdout %q", code, stdout)
	}
}

// hasLines says whether each of prefixes starts a line of s.
func hasLines(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if !strings.HasPrefix(s, p) && !strings.Contains(s, "\n"+p) {
			return false
		}
	}
	return true
}
