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

package skewclock_test

import (
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/internal/testutil/skewclock"
)

func TestJumps(t *testing.T) {
	var c skewclock.Clock
	before := c.Now()
	c.Set(time.Hour)
	if got := c.Since(before); got < time.Hour || got > time.Hour+time.Second {
		t.Fatalf("after a one-hour jump forward, Since = %s", got)
	}
	c.Set(-time.Hour)
	if !c.Now().Before(before) {
		t.Fatalf("after a jump back, Now %s is not before %s", c.Now(), before)
	}
	start := time.Now()
	<-c.After(20 * time.Millisecond)
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("timers run on real durations whatever the shift; waited %s", waited)
	}
}
