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

// Package fencing computes fencing tokens. Tokens strictly increase per lock: across holders,
// controller restarts and leader failover (the next token is always written with a
// compare-and-swap on the DistributedLock's status), and across deletion and re-creation of the
// lock, because a lock's first token is seeded from its creation time and a lock is not let go
// before the clock has passed every token it issued.
package fencing

import (
	"time"
)

// perSecond is how many tokens fit in one second of a lock's seed: a lock created at second S
// starts above S*perSecond, so it can issue a million grants per second of its predecessor's
// lifetime before the ranges could meet.
const perSecond = 1_000_000

// Seed is the value above which a lock created at created issues its tokens. Creation times come
// from the API server's clock and have one-second precision.
func Seed(created time.Time) int64 {
	return created.Unix() * perSecond
}

// Next is the token to issue after last (the lock's status.fencingToken) for a lock created at
// created.
func Next(last int64, created time.Time) int64 {
	return max(last, Seed(created)) + 1
}

// SafeToForget is the earliest time at which a lock that issued last may disappear: a lock of the
// same name created afterwards gets a creation time, and so a seed, above last. The extra second
// covers the one-second precision of creation times and modest skew between the controller's
// clock and the API server's.
func SafeToForget(last int64) time.Time {
	return time.Unix(last/perSecond+2, 0)
}
