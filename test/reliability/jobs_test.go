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
	"strings"
	"testing"
	"time"
)

// jobHistory is a correct history of four Jobs on lock ns/l with a lock delay of 2 s: a completes
// while b, c and d wait, and b is granted at once; b has a pod killed mid-run, keeps its hold,
// then fails, and c is granted 2.1 s later; c is deleted, and d is granted 2.1 s later; d
// completes with nobody waiting. Times are ms after t0; revisions follow the writes.
func jobHistory() ([]JobRun, []Grant) {
	grant := func(name string, created, acquired, released int, token, held, releasedRev int64, reason, message string) Grant {
		return Grant{Lock: "ns/l", Claim: "claim-" + name, Created: at(created), Acquired: at(acquired), Token: token,
			HeldRevision: held, Exclusive: true, Released: at(released), ReleasedRevision: releasedRev,
			Phase: "Released", Reason: reason, Message: message}
	}
	run := func(name string, resumed int, resumedRev, token int64, end EndKind, endAt int, endRev int64) JobRun {
		return JobRun{Lock: "ns/l", Job: name, Claim: "claim-" + name, Resumed: at(resumed), ResumedRevision: resumedRev,
			Token: token, TemplateToken: token, End: end, EndAt: at(endAt), EndRevision: endRev}
	}
	runs := []JobRun{
		run("a", 12, 11, 5, EndJobComplete, 1000, 100),
		run("b", 1022, 103, 6, EndJobFailed, 2000, 200),
		run("c", 4102, 301, 7, EndJobDeleted, 5000, 400),
		run("d", 7102, 501, 8, EndJobComplete, 8000, 600),
	}
	runs[1].PodKilled = at(1500)
	grants := []Grant{
		grant("a", 0, 10, 1010, 5, 10, 101, "HolderTerminated", "Released: Job a succeeded: its condition Complete is True"),
		grant("b", 5, 1020, 2010, 6, 102, 201, "HolderTerminated", "Released: Job b failed: its condition Failed is True"),
		grant("c", 6, 4100, 5010, 7, 300, 401, "", ""),
		grant("d", 7, 7100, 8010, 8, 500, 601, "HolderTerminated", "Released: Job d succeeded: its condition Complete is True"),
	}
	grants[2].Phase = "" // deleted (garbage collection) while the controller ended it
	return runs, grants
}

func TestJobCheckersPassACorrectHistory(t *testing.T) {
	runs, grants := jobHistory()
	if v := CheckJobRuns(runs, grants); len(v) != 0 {
		t.Errorf("job-runs: %v", v)
	}
	if v := CheckJobResumes(runs, grants); len(v) != 0 {
		t.Errorf("job-resume: %v", v)
	}
	holds := CheckJobHolds(runs, grants)
	if len(holds.Violations) != 0 || holds.PodKills != 1 || holds.HeldThrough != 1 {
		t.Errorf("job-hold: %+v, want no violation and the one pod kill held through", holds)
	}
	delay := CheckJobLockDelay(runs, grants, 2*time.Second)
	if len(delay.Violations) != 0 || delay.Checked != 2 || delay.Shortest != 2100*time.Millisecond {
		t.Errorf("job-lock-delay: %+v, want the grants after b and c checked, the shortest 2.1s", delay)
	}
	handoffs := CheckJobHandoffs(runs, grants, 2*time.Second, nil)
	if len(handoffs.Violations) != 0 || handoffs.Checked != 1 || handoffs.Longest != 20*time.Millisecond {
		t.Errorf("job-handoff: %+v, want a's completion checked (d's had no waiter), 20ms", handoffs)
	}
}

func TestCheckJobRuns(t *testing.T) {
	// A lost hold ends the Job's turn: the next Job may run while it goes on as a stale writer.
	runs, grants := jobHistory()
	grants[0].Lost, grants[0].Released, grants[0].ReleasedRevision = true, at(500), 60
	runs[1].ResumedRevision = 70
	if v := CheckJobRuns(runs, grants); len(v) != 0 {
		t.Errorf("a Job resumed after the previous one's hold was Lost: %v", v)
	}
	for name, c := range map[string]struct {
		change func(runs []JobRun, grants []Grant)
		want   string
	}{
		"resumed while the previous Job runs": {func(runs []JobRun, _ []Grant) { runs[1].ResumedRevision = 50 },
			"Job b (token 6) resumed at revision 50"},
		"resumed while a Job whose end was never seen runs": {func(runs []JobRun, grants []Grant) {
			runs[2].EndRevision, grants[2].ReleasedRevision = 0, 0
		}, "Job d (token 8) resumed at revision 501 ("},
	} {
		runs, grants := jobHistory()
		c.change(runs, grants)
		v := CheckJobRuns(runs, grants)
		if len(v) != 1 || !strings.Contains(v[0], c.want) {
			t.Errorf("%s: got %v, want one violation containing %q", name, v, c.want)
			continue
		}
		t.Logf("%s: %s", name, v[0])
	}
}

func TestCheckJobResumes(t *testing.T) {
	for name, c := range map[string]struct {
		change func(runs []JobRun, grants []Grant)
		want   string
	}{
		"resumed before its claim held": {func(runs []JobRun, _ []Grant) { runs[1].ResumedRevision = 90 },
			"Job b resumed at revision 90, before its claim claim-b was Held (revision 102)"},
		"resumed, its claim never Held": {func(_ []JobRun, grants []Grant) { grants[1].Acquired = time.Time{} },
			"its claim claim-b was never seen Held"},
		"another token": {func(runs []JobRun, _ []Grant) { runs[1].Token, runs[1].TemplateToken = 0, 0 },
			"Job b resumed with token 0, but its claim claim-b holds with token 6"},
		"another token on the pod template": {func(runs []JobRun, _ []Grant) { runs[1].TemplateToken = 5 },
			"token 6 on the Job and 5 on its pod template"},
	} {
		runs, grants := jobHistory()
		c.change(runs, grants)
		v := CheckJobResumes(runs, grants)
		if len(v) != 1 || !strings.Contains(v[0], c.want) {
			t.Errorf("%s: got %v, want one violation containing %q", name, v, c.want)
			continue
		}
		t.Logf("%s: %s", name, v[0])
	}
}

func TestCheckJobHolds(t *testing.T) {
	// The hold of b ended when its pod was killed, before the Job failed.
	runs, grants := jobHistory()
	grants[1].Released, grants[1].ReleasedRevision, grants[1].Message = at(1510), 160, "Released: pod b-p0 failed"
	holds := CheckJobHolds(runs, grants)
	if len(holds.Violations) != 1 || !strings.Contains(holds.Violations[0], "claim claim-b of Job b seen ended (Released/HolderTerminated: Released: pod b-p0 failed) at revision 160") ||
		!strings.Contains(holds.Violations[0], "a pod of the Job was killed") || holds.HeldThrough != 0 {
		t.Errorf("a hold ended by a pod's death: %+v", holds)
	} else {
		t.Logf("a hold ended by a pod's death: %s", holds.Violations[0])
	}
	// Lost under a fault: no violation, but not held through either.
	grants[1].Lost = true
	if holds := CheckJobHolds(runs, grants); len(holds.Violations) != 0 || holds.PodKills != 1 || holds.HeldThrough != 0 {
		t.Errorf("a hold Lost while its Job ran: %+v", holds)
	}
}

func TestCheckJobLockDelay(t *testing.T) {
	for name, c := range map[string]struct {
		change func(runs []JobRun, grants []Grant)
		want   string
	}{
		"granted 1.999 s after a failed Job": {func(_ []JobRun, grants []Grant) { grants[2].Acquired = at(3999) },
			"claim-c (token 7) seen Held at"},
		"granted at once after a deleted Job": {func(_ []JobRun, grants []Grant) { grants[3].Acquired = at(5020) },
			"20ms after Job c (token 7) was deleted"},
	} {
		runs, grants := jobHistory()
		c.change(runs, grants)
		v := CheckJobLockDelay(runs, grants, 2*time.Second)
		if len(v.Violations) != 1 || !strings.Contains(v.Violations[0], c.want) {
			t.Errorf("%s: got %+v, want one violation containing %q", name, v, c.want)
			continue
		}
		t.Logf("%s: %s", name, v.Violations[0])
	}
	// A Job whose hold was Lost before it failed is not judged: its delay began at the loss.
	runs, grants := jobHistory()
	grants[1].Lost, grants[2].Acquired = true, at(2500)
	if v := CheckJobLockDelay(runs, grants, 2*time.Second); len(v.Violations) != 0 || v.Checked != 1 {
		t.Errorf("a lost hold: %+v", v)
	}
}

func TestCheckJobHandoffs(t *testing.T) {
	runs, grants := jobHistory()
	grants[1].Acquired = at(3000)
	v := CheckJobHandoffs(runs, grants, 2*time.Second, nil)
	if len(v.Violations) != 1 || !strings.Contains(v.Violations[0], "claim-b (token 6) seen Held only 2s after Job a (token 5) completed") {
		t.Errorf("a completion followed by the lock delay: %+v", v)
	} else {
		t.Logf("a completion followed by the lock delay: %s", v.Violations[0])
	}
	// Not judged while a fault disturbs the managers.
	if v := CheckJobHandoffs(runs, grants, 2*time.Second, []Span{{From: at(1500), To: at(1600)}}); len(v.Violations) != 0 || v.Checked != 0 {
		t.Errorf("a completion during a fault: %+v", v)
	}
}
