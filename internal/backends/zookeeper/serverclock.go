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
	"sync"
	"time"
)

// A record's TTL is judged by the ensemble's clock, never by the controller's: every write
// stamps the node's mtime with the leader's time, so a record expires at mtime + TTL whoever
// wrote it and however wrong the writer's clock was. A controller whose wall clock was stepped
// forward would otherwise take over holds that are still valid (the reliability harness found
// exactly that: zookeeper/clock-jumps, seed 69699).
//
// ZooKeeper has no "what time is it" request, so the session estimates the ensemble's time from
// its own writes: a write's answer carries the mtime the leader gave it, and the local monotonic
// clock measures how long ago that answer came. The estimate mtime + elapsed is never ahead of
// the ensemble's real time (the mtime was stamped before the answer arrived), so a lock is never
// judged expired early; it may be judged expired a round trip late.

// sampleMaxAge is how old the latest sample may be before a decision that needs the ensemble's
// time writes a probe node to get a new one. Monotonic time does not drift enough in a minute to
// matter; the refresh follows a stepped server clock or a new leader's clock.
const sampleMaxAge = time.Minute

// serverClock estimates the ensemble's current time from the latest sample. It is safe for
// concurrent use.
type serverClock struct {
	mu sync.Mutex
	// mtime is the ensemble's time stamped on the latest sampled write.
	mtime time.Time
	// at is when its answer arrived, by the local clock with a monotonic reading.
	at time.Time
}

// observe records that a write answered at local time at (from time.Now) was stamped mtimeMillis
// (milliseconds since the epoch, as in zk.Stat). An older answer than the latest sample is
// ignored.
func (s *serverClock) observe(mtimeMillis int64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && at.Before(s.at) {
		return
	}
	s.mtime, s.at = time.UnixMilli(mtimeMillis), at
}

// now estimates the ensemble's time at local time localNow (from time.Now). ok is false when
// there is no sample, or it is older than sampleMaxAge.
func (s *serverClock) now(localNow time.Time) (now time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return estimate(s.mtime, s.at, localNow)
}

// estimate is the ensemble's time at localNow given a write stamped mtime whose answer arrived at
// local time at.
func estimate(mtime, at, localNow time.Time) (time.Time, bool) {
	elapsed := localNow.Sub(at)
	if at.IsZero() || elapsed < 0 || elapsed > sampleMaxAge {
		return time.Time{}, false
	}
	return mtime.Add(elapsed), true
}

// recordExpiry is when a record written at mtimeMillis (the node's Stat.Mtime) with ttlMillis
// stops holding its lock, by the ensemble's clock. A record without a positive TTL (not one we
// wrote) expires at once.
func recordExpiry(mtimeMillis, ttlMillis int64) time.Time {
	return time.UnixMilli(mtimeMillis).Add(time.Duration(max(ttlMillis, 0)) * time.Millisecond)
}

// localExpiry translates a record's expiry by the ensemble's clock into the controller's clock,
// for callers that schedule by it (LockedError.ExpireTime, Inspect): the time left by the
// ensemble's clock, from the controller's now.
func localExpiry(expiry, serverNow, localNow time.Time) time.Time {
	return localNow.Add(expiry.Sub(serverNow))
}
