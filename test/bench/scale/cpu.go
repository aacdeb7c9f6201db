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
	"runtime"

	"github.com/lockwarden/lockwarden/test/bench/proccpu"
)

// watchedProcs is every process a window accounts for: the cluster's, both managers (labelled
// by their role at that moment) and this harness.
func (r *runner) watchedProcs(leader *replica) []proccpu.Proc {
	procs := proccpu.ClusterProcs(r.cfg.clusterDir)
	for _, rep := range r.m.replicas {
		role := "manager (standby)"
		if rep == leader {
			role = "manager (leader)"
		}
		if pid := pidOf(rep); pid > 0 {
			procs = append(procs, proccpu.Proc{Label: role, PID: pid})
		}
	}
	return append(procs, proccpu.Proc{Label: "bench-scale (this harness)", PID: os.Getpid()})
}

// numCPU is the machine's core count for the CPU figures.
func numCPU() int { return runtime.NumCPU() }
