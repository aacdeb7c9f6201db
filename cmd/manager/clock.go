//go:build !testclock

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

import "k8s.io/utils/clock"

// managerClock is the real clock. Fault tests build the manager with the testclock tag, which
// swaps in a clock they can step (clock_testclock.go).
func managerClock() (clock.Clock, error) { return clock.RealClock{}, nil }
