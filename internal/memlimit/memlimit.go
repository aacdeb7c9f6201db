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

// Package memlimit sets Go's soft memory limit from the container's memory limit.
//
// Without a soft limit the Go collector lets the heap grow to about twice the live heap before it
// collects (GOGC=100), whatever the container's limit: a manager whose live heap is half its
// limit can be killed by the kernel for garbage it would have collected. With the soft limit set
// below the container's limit, the collector runs more often as memory nears it. The share left
// above the soft limit is for memory Go does not count against it and for the kernel's own
// accounting of the process.
package memlimit

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupFiles are where a process finds its memory limit: cgroup v2's memory.max, then cgroup
// v1's memory.limit_in_bytes (both as seen inside the container's cgroup namespace).
var cgroupFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

// unlimitedV1 is where cgroup v1 values start to mean "no limit": v1 reports an unlimited cgroup
// as the largest page-aligned int64 (9223372036854771712), not as a word.
const unlimitedV1 = int64(1) << 60

// parseLimit reads a cgroup memory limit file's contents: bytes, or "max" (v2, no limit). It
// returns false for no limit or for something it cannot read.
func parseLimit(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= unlimitedV1 {
		return 0, false
	}
	return n, true
}

// containerLimit is the memory limit of the cgroup this process runs in, read with readFile;
// false when there is none.
func containerLimit(readFile func(string) ([]byte, error)) (int64, bool) {
	for _, f := range cgroupFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		return parseLimit(string(b))
	}
	return 0, false
}

// softLimit is ratio of limit, in bytes; false when ratio is not in (0, 1].
func softLimit(limit int64, ratio float64) (int64, bool) {
	if ratio <= 0 || ratio > 1 || limit <= 0 {
		return 0, false
	}
	return int64(math.Floor(float64(limit) * ratio)), true
}

// Apply sets Go's soft memory limit to ratio of the container's memory limit, unless GOMEMLIMIT
// is set (Go already applied it) or ratio is 0. It says what it did, for the manager's start log.
func Apply(ratio float64) string {
	switch {
	case os.Getenv("GOMEMLIMIT") != "":
		return "GOMEMLIMIT=" + os.Getenv("GOMEMLIMIT") + " from the environment"
	case ratio == 0:
		return "no Go memory limit (--memory-limit-ratio=0)"
	}
	limit, ok := containerLimit(os.ReadFile)
	if !ok {
		return "no Go memory limit: the container has no memory limit"
	}
	soft, ok := softLimit(limit, ratio)
	if !ok {
		return fmt.Sprintf("no Go memory limit: ratio %v is not in (0, 1]", ratio)
	}
	debug.SetMemoryLimit(soft)
	return fmt.Sprintf("Go memory limit %d bytes (%v of the container's %d)", soft, ratio, limit)
}

// SetGCPercent sets the collector's target (what GOGC sets: how far the heap may grow past the
// live heap before the next collection, in percent), unless GOGC is set (Go already applied
// it). It says what it did, for the manager's start log.
//
// The manager's live heap is mostly its informers' caches, which live as long as the process;
// the garbage between collections is the objects decoded since, and Go's default of 100 lets
// the heap reach twice the caches before it collects. A lower target keeps the heap nearer to
// them at the cost of more frequent collections (docs/scale.md measures both).
func SetGCPercent(percent int) string {
	if v := os.Getenv("GOGC"); v != "" {
		return "GOGC=" + v + " from the environment"
	}
	debug.SetGCPercent(percent)
	return fmt.Sprintf("GC target %d%% (--gc-percent)", percent)
}
