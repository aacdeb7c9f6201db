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

package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts the server in its own process group, so that Kill reaches the workers it
// forks, and makes the kernel kill it if the test process dies without cleaning up (a test binary
// killed by its timeout), so that no server outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// process is one running process of the process table.
type process struct{ pid, ppid, pgid int }

// running lists the processes that run (zombies, which hold no resources, are left out).
func running() []process {
	var out []process
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so parse
		// after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:])
		if len(fields) < 3 || string(fields[0]) == "Z" {
			continue
		}
		pid, err1 := strconv.Atoi(string(bytes.Fields(b[:i])[0]))
		ppid, err2 := strconv.Atoi(string(fields[1]))
		pgid, err3 := strconv.Atoi(string(fields[2]))
		if err1 == nil && err2 == nil && err3 == nil {
			out = append(out, process{pid, ppid, pgid})
		}
	}
	return out
}

// groupAlive tells whether a process of group pgid is still running. A killed server's workers
// die a moment after it: a PostgreSQL restarted before its old backends are gone refuses to
// start, their shared memory still attached.
func groupAlive(pgid int) bool {
	for _, p := range running() {
		if p.pgid == pgid {
			return true
		}
	}
	return false
}

// descendants lists the running descendants of pid, whatever their process group: PostgreSQL's
// backends call setsid() and so leave the server's group, where a signal to the group does not
// reach them. Read before the server is killed, since its orphans are then adopted by init.
func descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range running() {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []int
	for next := []int{pid}; len(next) > 0; {
		parent := next[0]
		next = next[1:]
		for _, c := range children[parent] {
			out = append(out, c)
			next = append(next, c)
		}
	}
	return out
}

// alive tells whether any of pids still runs.
func alive(pids []int) bool {
	if len(pids) == 0 {
		return false
	}
	set := map[int]bool{}
	for _, p := range pids {
		set[p] = true
	}
	for _, p := range running() {
		if set[p.pid] {
			return true
		}
	}
	return false
}

// ChildrenNamed lists the running children of this process whose command name (as the kernel
// keeps it, the first 15 bytes of the executable's name) is name: the servers a library started
// for the test without handing out their process, e.g. envtest's kube-apiserver and etcd.
func ChildrenNamed(name string) []int {
	self := os.Getpid()
	var out []int
	for _, p := range running() {
		if p.ppid != self {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == name {
			out = append(out, p.pid)
		}
	}
	return out
}
