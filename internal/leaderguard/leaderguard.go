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

// Package leaderguard keeps a controller that stopped running for a while from acting as leader
// when it runs again. client-go's leader election notices a lost lease only at its next renewal,
// which may come a whole renew deadline after the process woke: a leader frozen by SIGSTOP, a VM
// pause or a stop-the-world stall longer than its lease wakes up deposed and, until then, still
// grants, issues tokens and writes status (the reliability harness's deposed-leader scenario saw
// one do so for 10 s). The Guard notices the stall itself: a heartbeat ticks every Tick on the
// monotonic clock, and a gap longer than the stall limit trips it for good. From then on Check
// refuses every leader write, and the Guard's Start returns an error, which stops the manager; the
// process exits and starts again as a standby.
package leaderguard

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockwarden/lockwarden/internal/mutant"
)

// ErrStalled is what Check returns once the process has been seen stopped for longer than the
// stall limit.
var ErrStalled = errors.New("this controller stopped running for longer than its leader lease allows and may have been deposed; it stops acting as leader")

// Tick is how often the heartbeat beats.
const Tick = 100 * time.Millisecond

// Guard detects that the process was not running. The zero value is not usable; use New.
type Guard struct {
	limit time.Duration
	// start anchors the monotonic readings; last is the latest beat, in nanoseconds after start.
	start   time.Time
	last    atomic.Int64
	tripped atomic.Pointer[string]
}

// New returns a Guard that trips on a gap longer than limit. Choose limit below the time a
// standby needs to take over after the leader's last renewal (lease duration minus renew
// deadline keeps a renewal period of margin), and far above any pause a healthy process has.
func New(limit time.Duration) *Guard {
	return &Guard{limit: limit, start: time.Now()}
}

// Stalled is the decision: a beat at last (monotonic) and a look at now, with limit.
func Stalled(last, now, limit time.Duration) bool { return now-last > limit }

// now is the monotonic time since start; time.Since uses the monotonic reading, which neither
// wall-clock steps nor a test clock move.
func (g *Guard) now() time.Duration { return time.Since(g.start) }

func (g *Guard) trip(gap time.Duration) {
	msg := fmt.Sprintf("no heartbeat for %s (limit %s)", gap.Round(time.Millisecond), g.limit)
	g.tripped.CompareAndSwap(nil, &msg)
}

// Check looks at the gap since the last beat, trips on a stall, and returns an error once the
// process has stalled: call it right before every write that only the leader may make (a backend
// acquire, a token, a grant, a gate lifted). A nil Guard (no guard configured) allows every write.
func (g *Guard) Check() error {
	if g == nil {
		return nil
	}
	if mutant.Active(mutant.NoStallGuard) {
		return nil
	}
	if gap := g.now() - time.Duration(g.last.Load()); Stalled(0, gap, g.limit) {
		g.trip(gap)
	}
	if why := g.tripped.Load(); why != nil {
		return fmt.Errorf("%w: %s", ErrStalled, *why)
	}
	return nil
}

// Start beats until ctx ends; it returns an error when it trips, which stops the manager.
func (g *Guard) Start(ctx context.Context) error {
	g.last.Store(int64(g.now()))
	t := time.NewTicker(Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := g.Check(); err != nil {
			return err
		}
		g.last.Store(int64(g.now()))
	}
}

// NeedLeaderElection is false: the heartbeat runs from the process's start, so that a standby
// that becomes leader has a fresh beat.
func (g *Guard) NeedLeaderElection() bool { return false }
