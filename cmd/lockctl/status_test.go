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
	"time"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// The text of lockctl status, from a LockStatus; the same against a real API server is in the
// envtest suite.

var statusNow = time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)

func holderAt(claim, pod string, mode locksv1alpha1.LockMode, token int64, ago time.Duration) lockclient.HolderStatus {
	expire := statusNow.Add(30*time.Second - ago)
	return lockclient.HolderStatus{Claim: claim, Pod: pod, Mode: mode, Identity: "id-" + claim, FencingToken: token,
		AcquireTime: statusNow.Add(-ago), ExpireTime: &expire}
}

// withRole gives a holder the role label of its pod.
func withRole(h lockclient.HolderStatus, role string) lockclient.HolderStatus {
	h.Role = role
	return h
}

func TestPrintLock(t *testing.T) {
	shared, exclusive := locksv1alpha1.LockModeShared, locksv1alpha1.LockModeExclusive
	cases := []struct {
		name   string
		status lockclient.LockStatus
		want   string
	}{
		{
			name: "a semaphore with two of three places taken and a writer waiting",
			status: lockclient.LockStatus{Namespace: "team-a", Lock: "reports", Backend: "kubernetes", Ready: true, MaxHolders: 3,
				LastFencingToken: 12,
				Holders: []lockclient.HolderStatus{
					holderAt("report-0-reports-1a", "report-0", shared, 11, 5*time.Second),
					holderAt("adhoc-x7", "", shared, 12, 2*time.Second),
				},
				Queue: []lockclient.QueuedClaim{
					{Position: 1, Claim: "migrate-reports-9f", Pod: "migrate", Mode: exclusive, Created: statusNow.Add(-time.Second), Reason: "Queued"},
					{Position: 2, Claim: "report-3-reports-2b", Pod: "report-3", Mode: shared, Created: statusNow, Reason: "Queued"},
					{Position: 3, Claim: "nightly-reports-3c", Object: "Job/nightly", Mode: shared, Created: statusNow, Reason: "Queued"},
				}},
			want: `Lock:        team-a/reports
Backend:     kubernetes (ready)
Places:      3, 2 held, 1 free
Holders:     2 (last token 12)
  1. pod report-0 (claim report-0-reports-1a), Shared, token 11, acquired 2026-12-01T05:59:55Z (5s ago), expires 2026-12-01T06:00:25Z (in 25s)
  2. claim adhoc-x7 (detached), Shared, token 12, acquired 2026-12-01T05:59:58Z (2s ago), expires 2026-12-01T06:00:28Z (in 28s)
Queue:       3 waiting
  1. pod migrate (claim migrate-reports-9f), Exclusive, waiting 1s (Queued)
  2. pod report-3 (claim report-3-reports-2b), Shared, waiting 0s (Queued)
  3. Job nightly (claim nightly-reports-3c), Shared, waiting 0s (Queued)
`,
		},
		{
			name: "a hotfix migration of a higher priority, first in line although it came last",
			status: lockclient.LockStatus{Namespace: "team-a", Lock: "db", Backend: "kubernetes", Ready: true, MaxHolders: 1,
				LastFencingToken: 7,
				Holders:          []lockclient.HolderStatus{holderAt("deploy-1", "", exclusive, 7, 5*time.Second)},
				Queue: []lockclient.QueuedClaim{
					{Position: 1, Claim: "hotfix", Mode: exclusive, Priority: 100, Created: statusNow, Reason: "Queued"},
					{Position: 2, Claim: "deploy-2", Mode: exclusive, Created: statusNow.Add(-time.Minute), Reason: "Queued"},
				}},
			want: `Lock:        team-a/db
Backend:     kubernetes (ready)
Places:      1 (a mutex), held
Holders:     1 (last token 7)
  1. claim deploy-1 (detached), Exclusive, token 7, acquired 2026-12-01T05:59:55Z (5s ago), expires 2026-12-01T06:00:25Z (in 25s)
Queue:       2 waiting
  1. claim hotfix (detached), Exclusive, waiting 0s (Queued), priority 100
  2. claim deploy-2 (detached), Exclusive, waiting 1m (Queued)
`,
		},
		{
			name: "a writer holding a read/write lock",
			status: lockclient.LockStatus{Namespace: "team-a", Lock: "reports", Backend: "kubernetes", Ready: true, MaxHolders: 10,
				LastFencingToken: 13, Holders: []lockclient.HolderStatus{holderAt("migrate-reports-9f", "migrate", exclusive, 13, time.Minute)},
				Queue: []lockclient.QueuedClaim{}},
			want: `Lock:        team-a/reports
Backend:     kubernetes (ready)
Places:      10, 1 held, 0 free (an Exclusive holder holds the lock alone)
Holders:     1 (last token 13)
  1. pod migrate (claim migrate-reports-9f), Exclusive, token 13, acquired 2026-12-01T05:59:00Z (1m ago), expires 2026-12-01T05:59:30Z (in 0s)
Queue:       0 waiting
`,
		},
		{
			name: "a lowered maxHolders",
			status: lockclient.LockStatus{Namespace: "team-a", Lock: "pool", Backend: "redis", Ready: true, MaxHolders: 1,
				LastFencingToken: 3, Holders: []lockclient.HolderStatus{
					holderAt("a", "", shared, 2, time.Second), holderAt("b", "", shared, 3, time.Second),
				}},
			want: `Lock:        team-a/pool
Backend:     redis (ready)
Places:      1, 2 held, 0 free (maxHolders was lowered: nothing is granted until fewer hold it)
Holders:     2 (last token 3)
  1. claim a (detached), Shared, token 2, acquired 2026-12-01T05:59:59Z (1s ago), expires 2026-12-01T06:00:29Z (in 29s)
  2. claim b (detached), Shared, token 3, acquired 2026-12-01T05:59:59Z (1s ago), expires 2026-12-01T06:00:29Z (in 29s)
Queue:       0 waiting
`,
		},
		{
			name: "leader election: a terminating holder and pods standing by",
			status: lockclient.LockStatus{Namespace: "team-a", Lock: "leader", Backend: "kubernetes", Ready: true, MaxHolders: 1,
				LastFencingToken: 4, Holders: []lockclient.HolderStatus{withRole(holderAt("web-a-leader-1", "web-a", exclusive, 4, time.Minute), "standby")},
				Queue: []lockclient.QueuedClaim{
					{Position: 1, Claim: "web-b-leader-2", Pod: "web-b", Mode: exclusive, Created: statusNow.Add(-2 * time.Minute), Reason: "Queued", Wait: "Standby"},
					{Position: 2, Claim: "web-c-leader-3", Pod: "web-c", Mode: exclusive, Created: statusNow.Add(-time.Minute), Reason: "Queued", Wait: "Standby"},
					{Position: 3, Claim: "job-leader-4", Pod: "job", Mode: exclusive, Created: statusNow, Reason: "Queued", Wait: "Gated"},
				}},
			want: `Lock:        team-a/leader
Backend:     kubernetes (ready)
Places:      1 (a mutex), held
Holders:     1 (last token 4)
  1. pod web-a (claim web-a-leader-1), Exclusive, token 4, acquired 2026-12-01T05:59:00Z (1m ago), expires 2026-12-01T05:59:30Z (in 0s), labelled standby (terminating: no new traffic)
Queue:       3 waiting, 2 standing by
  1. pod web-b (claim web-b-leader-2), Exclusive, waiting 2m (Queued), standing by (running)
  2. pod web-c (claim web-c-leader-3), Exclusive, waiting 1m (Queued), standing by (running)
  3. pod job (claim job-leader-4), Exclusive, waiting 0s (Queued), gated (not scheduled until it holds)
`,
		},
		{
			name: "a free mutex whose backend is not ready",
			status: lockclient.LockStatus{Namespace: "team-a", Lock: "db", Backend: "redis", Message: "dial tcp: connection refused",
				MaxHolders: 1, LastFencingToken: 7, Holders: []lockclient.HolderStatus{}, Queue: []lockclient.QueuedClaim{}},
			want: `Lock:        team-a/db
Backend:     redis (not ready: dial tcp: connection refused)
Places:      1 (a mutex), free
Holders:     none (last token 7)
Queue:       0 waiting
`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printLock(&b, &tc.status, statusNow)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestPrintLocks(t *testing.T) {
	locks := []lockclient.LockStatus{
		{Lock: "db", MaxHolders: 1, Ready: true, Holders: []lockclient.HolderStatus{
			holderAt("web-0-db-1a", "web-0", locksv1alpha1.LockModeExclusive, 7, 10*time.Second)},
			Queue: []lockclient.QueuedClaim{{Position: 1}, {Position: 2}}},
		{Lock: "reports", MaxHolders: 3, Ready: true, Holders: []lockclient.HolderStatus{
			holderAt("r0", "report-0", locksv1alpha1.LockModeShared, 11, 5*time.Second),
			holderAt("r1", "report-1", locksv1alpha1.LockModeShared, 12, 5*time.Second),
			holderAt("r2", "report-2", locksv1alpha1.LockModeShared, 13, 5*time.Second)}},
		{Lock: "schema", MaxHolders: 10, Ready: true, Holders: []lockclient.HolderStatus{
			holderAt("m", "migrate", locksv1alpha1.LockModeExclusive, 20, time.Second)}},
		{Lock: "spare", MaxHolders: 2, Ready: false},
	}
	var b bytes.Buffer
	printLocks(&b, "team-a", locks, statusNow)
	want := []string{
		"LOCK     HELD  HOLDER                              TOKEN  EXPIRES  WAITING  READY",
		"db       1/1   pod web-0 (claim web-0-db-1a)       7      in 20s   2        true",
		"reports  3/3   pod report-0 (claim r0) and 2 more  11     in 25s   0        true",
		"schema   1/10  pod migrate (claim m) Exclusive     20     in 29s   0        true",
		"spare    0/2   <none>                              -      -        0        false",
	}
	if got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAcquiredLineNamesAnExclusiveMode(t *testing.T) {
	r := &lockclient.Result{Namespace: "team-a", Lock: "reports", Claim: "migrate-reports-9f", Pod: "migrate", FencingToken: 13,
		Mode: locksv1alpha1.LockModeExclusive, Waited: 1500 * time.Millisecond}
	if got, want := acquiredLine(r), `acquired lock "reports" in namespace "team-a": holder=migrate token=13 waited=1.5s claim=migrate-reports-9f mode=Exclusive`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	r.Mode = locksv1alpha1.LockModeShared
	if got := acquiredLine(r); strings.Contains(got, "mode=") {
		t.Errorf("the default mode is not worth a word: %s", got)
	}
}

func TestSince(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 400 * time.Millisecond: "0s", 20 * time.Second: "20s", time.Minute: "1m",
		90 * time.Second: "1m30s", 10 * time.Minute: "10m", time.Hour: "1h", time.Hour + 2*time.Minute: "1h2m",
		time.Hour + 30*time.Second: "1h0m30s",
	} {
		if got := since(statusNow.Add(d), statusNow); got != want {
			t.Errorf("since(%s) = %q, want %q", d, got, want)
		}
	}
}
