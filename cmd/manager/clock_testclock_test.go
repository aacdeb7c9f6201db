//go:build testclock

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
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The test clock follows its offset file while the manager runs.
func TestManagerClockFollowsTheOffsetFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "offset")
	t.Setenv(clockOffsetFileEnv, file)
	c, err := managerClock()
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Since(time.Now()); d < -time.Second || d > time.Second {
		t.Fatalf("without an offset file the clock is real time, off by %s", d)
	}
	if err := os.WriteFile(file, []byte("-90s"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Since(c.Now()) < 89*time.Second {
		if time.Now().After(deadline) {
			t.Fatalf("the clock did not jump back 90 s; it is off by %s", time.Since(c.Now()))
		}
		time.Sleep(10 * time.Millisecond)
	}

	t.Setenv(clockOffsetFileEnv, "")
	if _, err := managerClock(); err == nil {
		t.Fatal("a testclock manager without the offset file variable must refuse to start")
	}
}
