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
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lockwarden/lockwarden/internal/testutil/skewclock"
)

// clockOffsetFileEnv names the file whose content (a Go duration, e.g. "-45s") is the offset of
// the manager's clock from real time. The reliability harness writes it to jump the clock of a
// running manager. Only a manager built with the testclock tag reads it.
const clockOffsetFileEnv = "LOCKWARDEN_TEST_CLOCK_OFFSET_FILE"

// managerClock is a clock that follows the offset in $LOCKWARDEN_TEST_CLOCK_OFFSET_FILE, read
// every 50 ms; a missing file means no offset.
func managerClock() (clock.Clock, error) {
	path := os.Getenv(clockOffsetFileEnv)
	if path == "" {
		return nil, errors.New("this manager was built with the testclock tag for fault tests; set " + clockOffsetFileEnv)
	}
	c := &skewclock.Clock{}
	read := func() error {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			c.Set(0)
			return nil
		}
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(strings.TrimSpace(string(b)))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if d != c.Offset() {
			ctrl.Log.WithName("testclock").Info("Clock jumped", "offset", d.String())
		}
		c.Set(d)
		return nil
	}
	if err := read(); err != nil {
		return nil, err
	}
	go func() {
		for range time.Tick(50 * time.Millisecond) {
			if err := read(); err != nil {
				ctrl.Log.WithName("testclock").Error(err, "Reading the clock offset")
			}
		}
	}()
	return c, nil
}
