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

// Package skewclock is a clock whose wall time can be moved while the program runs, for fault
// tests that jump a controller's clock (Go reads the time through the vDSO, so libfaketime and
// its kind do not reach it). It is compiled into the manager only with the testclock build tag.
package skewclock

import (
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Clock is the real clock shifted by an offset that can change at any moment. Like a wall clock
// stepped by an administrator, the shift shows in Now and Since, not in how long timers and
// sleeps last.
type Clock struct {
	clock.RealClock
	offset atomic.Int64 // nanoseconds
}

var _ clock.Clock = (*Clock)(nil)

// Set moves the clock to real time + offset.
func (c *Clock) Set(offset time.Duration) { c.offset.Store(int64(offset)) }

// Offset returns the current shift.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Now returns the shifted wall time. The monotonic reading is stripped, so that comparisons
// between readings see the jumps, as they would with a stepped wall clock.
func (c *Clock) Now() time.Time { return time.Now().Round(0).Add(c.Offset()) }

// Monotonic returns a time that the shift does not move, for measuring durations: what Go's
// monotonic clock reading gives a program whose wall clock an administrator steps.
func (c *Clock) Monotonic() time.Time { return time.Now() }

// Since returns the shifted time elapsed since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
