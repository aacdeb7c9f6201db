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

// Package proccpu accounts for CPU by process on one machine (from /proc), for the benchmarks
// (test/bench and test/bench/scale), which run the API server, etcd and the manager side by side.
package proccpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CPU accounting: which process of the machine used the CPU in a window. Everything runs on one
// machine (the API server, etcd, the cluster's controllers, kwok, both managers and this harness),
// so a figure the manager misses is explained only by who else was busy: a manager that waits on
// a saturated API server shows little CPU of its own while the machine has none to spare.

// clockTicks is the kernel's USER_HZ, the unit of the CPU times in /proc: 100 on every Linux
// architecture Go supports (the kernel fixes it for user space whatever its internal HZ).
const clockTicks = 100

// Snapshot is the CPU time each watched process and the whole machine had used at one moment.
type Snapshot struct {
	at time.Time
	// procs is CPU seconds (user + system) by process label.
	procs map[string]float64
	// busy and total are the machine's CPU seconds over all cores since boot: busy excludes
	// idle and iowait.
	busy, total float64
}

// Usage is what a window cost: average cores busy, by process and for the machine.
type Usage struct {
	Window time.Duration
	// Cores is the average cores busy, by process label.
	Cores map[string]float64
	// Machine is the cores busy over the window, of NCPU.
	Machine float64
	NCPU    int
}

// Proc is one process to account for.
type Proc struct {
	Label string
	PID   int
}

// parseProcStat returns the CPU seconds (utime + stime) from the contents of /proc/<pid>/stat.
// The command name (field 2) is in parentheses and may hold spaces or parentheses itself, so
// fields are counted from the last closing parenthesis: utime and stime are fields 14 and 15.
func parseProcStat(s string) (float64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("no command name in /proc stat line")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat line has %d fields after the command, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return float64(utime+stime) / clockTicks, nil
}

// parseMachineStat returns the machine's busy and total CPU seconds from the contents of
// /proc/stat (its first line sums every core: user nice system idle iowait irq softirq steal ...;
// guest time is already counted in user and nice).
func parseMachineStat(s string) (busy, total float64, err error) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat does not start with the cpu line: %q", line)
	}
	var ticks []uint64
	for _, v := range f[1:min(len(f), 9)] { // up to steal
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks = append(ticks, n)
	}
	var sum uint64
	for _, n := range ticks {
		sum += n
	}
	idle := ticks[3]
	if len(ticks) > 4 {
		idle += ticks[4] // iowait
	}
	return float64(sum-idle) / clockTicks, float64(sum) / clockTicks, nil
}

// Take reads the CPU time of procs and of the machine now. A process that is gone or cannot be
// read is left out of the snapshot (and so of the window).
func Take(procs []Proc) Snapshot {
	s := Snapshot{at: time.Now(), procs: map[string]float64{}}
	for _, p := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
		if err != nil {
			continue
		}
		if secs, err := parseProcStat(string(b)); err == nil {
			s.procs[p.Label] += secs
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		s.busy, s.total, _ = parseMachineStat(string(b))
	}
	return s
}

// Between is the usage from a to b: processes in both snapshots only (a process that
// restarted in between is left out rather than counted from zero).
func Between(a, b Snapshot, ncpu int) Usage {
	u := Usage{Window: b.at.Sub(a.at), Cores: map[string]float64{}, NCPU: ncpu}
	secs := u.Window.Seconds()
	if secs <= 0 {
		return u
	}
	for label, end := range b.procs {
		if start, ok := a.procs[label]; ok && end >= start {
			u.Cores[label] = (end - start) / secs
		}
	}
	if dt := b.total - a.total; dt > 0 {
		// The machine's share busy, scaled to cores: independent of the wall clock.
		u.Machine = (b.busy - a.busy) / dt * float64(ncpu)
	}
	return u
}

// Cell renders the usage in one line: the machine first, then each process, busiest first.
func (u Usage) Cell() string {
	if u.Window <= 0 {
		return "not measured"
	}
	labels := make([]string, 0, len(u.Cores))
	for l := range u.Cores {
		labels = append(labels, l)
	}
	slices.SortFunc(labels, func(a, b string) int {
		if u.Cores[a] != u.Cores[b] {
			if u.Cores[a] > u.Cores[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, fmt.Sprintf("%s %.2f", l, u.Cores[l]))
	}
	return fmt.Sprintf("machine %.2f of %d cores busy; %s", u.Machine, u.NCPU, strings.Join(parts, ", "))
}

// ClusterProcs lists the local cluster's processes from the pid files kwokctl's binary runtime
// keeps in the cluster's directory (pids/<component>.pid).
func ClusterProcs(clusterDir string) []Proc {
	if clusterDir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(clusterDir, "pids", "*.pid"))
	var out []Proc
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		out = append(out, Proc{Label: strings.TrimSuffix(filepath.Base(f), ".pid"), PID: pid})
	}
	return out
}
