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

package zookeeper

import (
	"testing"
	"time"
)

func TestEstimate(t *testing.T) {
	mtime := time.UnixMilli(1_700_000_000_000)
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC) // the local clock: far from the server's
	for name, tc := range map[string]struct {
		localNow time.Time
		at       time.Time
		want     time.Time
		ok       bool
	}{
		"at the answer":          {localNow: at, at: at, want: mtime, ok: true},
		"elapsed is added":       {localNow: at.Add(1500 * time.Millisecond), at: at, want: mtime.Add(1500 * time.Millisecond), ok: true},
		"a minute is still fine": {localNow: at.Add(sampleMaxAge), at: at, want: mtime.Add(sampleMaxAge), ok: true},
		"older is refused":       {localNow: at.Add(sampleMaxAge + time.Millisecond), at: at},
		"no sample":              {localNow: at},
		"time went backwards":    {localNow: at.Add(-time.Millisecond), at: at},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := estimate(mtime, tc.at, tc.localNow)
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("estimate = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestServerClockKeepsTheLatestAnswer(t *testing.T) {
	var s serverClock
	at := time.Now()
	s.observe(5_000, at)
	s.observe(1_000, at.Add(-time.Second)) // an answer that arrived earlier, processed late
	got, ok := s.now(at)
	if !ok || !got.Equal(time.UnixMilli(5_000)) {
		t.Fatalf("now = %v, %v; want the later answer's mtime %v", got, ok, time.UnixMilli(5_000))
	}
	s.observe(9_000, at.Add(time.Second))
	if got, _ := s.now(at.Add(time.Second)); !got.Equal(time.UnixMilli(9_000)) {
		t.Fatalf("now = %v; want %v", got, time.UnixMilli(9_000))
	}
}

func TestRecordExpiry(t *testing.T) {
	for name, tc := range map[string]struct {
		mtime, ttl int64
		want       time.Time
	}{
		"mtime plus ttl":          {mtime: 10_000, ttl: 5_000, want: time.UnixMilli(15_000)},
		"no ttl: expired at once": {mtime: 10_000, ttl: 0, want: time.UnixMilli(10_000)},
		"negative ttl":            {mtime: 10_000, ttl: -7, want: time.UnixMilli(10_000)},
	} {
		t.Run(name, func(t *testing.T) {
			if got := recordExpiry(tc.mtime, tc.ttl); !got.Equal(tc.want) {
				t.Errorf("recordExpiry = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLocalExpiry(t *testing.T) {
	server := time.UnixMilli(1_000_000)
	local := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	if got, want := localExpiry(server.Add(7*time.Second), server, local), local.Add(7*time.Second); !got.Equal(want) {
		t.Errorf("localExpiry = %v, want %v (the time left by the ensemble's clock, on the local clock)", got, want)
	}
	if got, want := localExpiry(server.Add(-time.Second), server, local), local.Add(-time.Second); !got.Equal(want) {
		t.Errorf("localExpiry of a past expiry = %v, want %v", got, want)
	}
}
