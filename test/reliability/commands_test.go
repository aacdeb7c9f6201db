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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStamps(t *testing.T) {
	var run CommandRun
	if err := ParseStamps("start 41 1733400000.123456789 977\nstop 41 1733400002.5\n", &run); err != nil {
		t.Fatal(err)
	}
	if run.Token != 41 || run.PID != 977 || run.End != "stop" {
		t.Fatalf("parsed %+v", run)
	}
	if got := run.Started.UnixNano(); got != 1733400000123456789 {
		t.Errorf("start = %d", got)
	}
	if got := run.Ended.Sub(run.Started); got != 2376543211*time.Nanosecond {
		t.Errorf("section lasted %s", got)
	}
	for _, bad := range []string{"start x 1.0\n", "start 1 yesterday\n", "begin 1 1.0\n", "start\n"} {
		if err := ParseStamps(bad, &CommandRun{}); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
}

// TestCommandScript runs the COMMAND the holders run, as lockctl would: it must stamp its start
// and end, and stop at once, stamping "stop", when it gets SIGTERM mid-work.
func TestCommandScript(t *testing.T) {
	dir := t.TempDir()
	run := func(work string, term bool) CommandRun {
		stamps := filepath.Join(dir, work+".stamps")
		cmd := exec.Command("sh", "-c", CommandScript)
		cmd.Env = append(os.Environ(), "STAMPS="+stamps, "WORK="+work, "LOCKWARDEN_FENCING_TOKEN=7")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if term {
			deadline := time.Now().Add(5 * time.Second)
			for fi, err := os.Stat(stamps); (err != nil || fi.Size() == 0) && time.Now().Before(deadline); fi, err = os.Stat(stamps) {
				time.Sleep(10 * time.Millisecond)
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		begun := time.Now()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the command script failed: %v", err)
		}
		if term && time.Since(begun) > 2*time.Second {
			t.Errorf("the command took %s to stop after SIGTERM", time.Since(begun))
		}
		data, err := os.ReadFile(stamps)
		if err != nil {
			t.Fatal(err)
		}
		var r CommandRun
		if err := ParseStamps(string(data), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	done := run("0.2", false)
	if done.End != "done" || done.Token != 7 || done.PID == 0 || done.Ended.Sub(done.Started) < 200*time.Millisecond {
		t.Errorf("a finished command stamped %+v", done)
	}
	stopped := run("30", true)
	if stopped.End != "stop" || stopped.Ended.IsZero() {
		t.Errorf("a signalled command stamped %+v", stopped)
	}
}

func TestCheckCommands(t *testing.T) {
	base := time.Unix(1733400000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	cmd := func(lock, who string, token int64, from, to int) CommandRun {
		r := CommandRun{Lock: lock, Claimant: who, Token: token, Started: at(from), End: "done"}
		if to >= 0 {
			r.Ended = at(to)
		}
		return r
	}
	cases := map[string]struct {
		runs []CommandRun
		want []string // substrings, one per violation
	}{
		"one after another": {runs: []CommandRun{cmd("l", "a", 1, 0, 100), cmd("l", "b", 2, 100, 200), cmd("m", "c", 1, 50, 150)}},
		"never started":     {runs: []CommandRun{cmd("l", "a", 1, 0, 100), {Lock: "l", Claimant: "b"}}},
		"overlap":           {runs: []CommandRun{cmd("l", "a", 1, 0, 100), cmd("l", "b", 2, 90, 200)}, want: []string{"ran at once for 10ms"}},
		// c overlaps a, which began first and ends last, though not b, which ended before c began.
		"overlap with an older section": {runs: []CommandRun{cmd("l", "a", 1, 0, 500), cmd("l", "b", 2, 10, 20), cmd("l", "c", 3, 30, 600)},
			want: []string{"b token 2", "c token 3"}},
		"token down":  {runs: []CommandRun{cmd("l", "a", 5, 0, 100), cmd("l", "b", 4, 200, 300)}, want: []string{"token did not increase"}},
		"never ended": {runs: []CommandRun{cmd("l", "a", 1, 0, -1), cmd("l", "b", 2, 200, 300)}, want: []string{"never ended", "ran at once"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := CheckCommands(tc.runs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d violations, want %d: %q", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCommandTokensAndGaps(t *testing.T) {
	base := time.Unix(1733400000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	runs := []CommandRun{
		{Lock: "ns/l", Claimant: "a", Token: 1, Started: at(0), Ended: at(100)},
		{Lock: "ns/l", Claimant: "b", Token: 2, Started: at(130), Ended: at(1000), CutOff: true},
		{Lock: "ns/l", Claimant: "c", Token: 3, Started: at(1600), Ended: at(1700)},
		{Lock: "ns/m", Claimant: "d", Token: 9, Started: at(0), Ended: at(10)},
		{Lock: "ns/m", Claimant: "e"}, // never started
	}
	grants := []Grant{{Lock: "ns/l", Token: 1, Acquired: at(0)}, {Lock: "ns/l", Token: 2, Acquired: at(120)},
		{Lock: "ns/l", Token: 3, Acquired: at(1590)}, {Lock: "ns/m", Token: 8, Acquired: at(0)}, {Lock: "ns/m", Token: 9}}
	got := CheckCommandTokens(runs, grants)
	if len(got) != 1 || !strings.Contains(got[0], "d token 9") {
		t.Errorf("CheckCommandTokens = %q, want d's token 9 (never seen Held) alone", got)
	}
	shortest, afterCut := CommandGaps(runs)
	if shortest != 30*time.Millisecond {
		t.Errorf("shortest gap %s, want 30ms", shortest)
	}
	if len(afterCut) != 1 || afterCut[0] != 600*time.Millisecond {
		t.Errorf("gaps after a cut-off section %v, want [600ms]", afterCut)
	}
}
