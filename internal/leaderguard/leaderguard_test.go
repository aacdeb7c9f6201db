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

package leaderguard

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestStalled(t *testing.T) {
	for _, c := range []struct {
		last, now, limit time.Duration
		want             bool
	}{
		{0, 100 * time.Millisecond, time.Second, false},
		{0, time.Second, time.Second, false},
		{0, time.Second + 1, time.Second, true},
		{10 * time.Second, 27 * time.Second, 5 * time.Second, true}, // a 17 s SIGSTOP
	} {
		if got := Stalled(c.last, c.now, c.limit); got != c.want {
			t.Errorf("Stalled(%s, %s, %s) = %v, want %v", c.last, c.now, c.limit, got, c.want)
		}
	}
}

// A beating guard passes; a guard whose heartbeat did not run for longer than the limit trips,
// stays tripped after the heartbeat resumes, and stops its Start with ErrStalled.
func TestGuardTripsOnAStallAndStaysTripped(t *testing.T) {
	g := New(300 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Start(ctx) }()
	time.Sleep(500 * time.Millisecond)
	if err := g.Check(); err != nil {
		t.Fatalf("a beating guard: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start after cancel: %v", err)
	}

	// The heartbeat stopped (as the whole process would under SIGSTOP).
	time.Sleep(400 * time.Millisecond)
	if err := g.Check(); !errors.Is(err, ErrStalled) {
		t.Fatalf("after a 400 ms gap with a 300 ms limit: %v, want ErrStalled", err)
	}
	go func() { done <- g.Start(context.Background()) }()
	if err := <-done; !errors.Is(err, ErrStalled) {
		t.Fatalf("Start of a tripped guard: %v, want ErrStalled", err)
	}
	if err := g.Check(); !errors.Is(err, ErrStalled) {
		t.Fatalf("a tripped guard recovered: %v", err)
	}
}
