//go:build unix && !linux

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

import "syscall"

// sysProcAttr puts the server in its own process group, so that Kill reaches the workers it
// forks. Only Linux can tie the server's life to the test process's.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// groupAlive cannot look into other systems' process tables; Kill relies on the leader's exit.
func groupAlive(int) bool { return false }

// descendants cannot look into other systems' process tables either.
func descendants(int) []int { return nil }

// alive: see descendants.
func alive([]int) bool { return false }

// ChildrenNamed cannot look into other systems' process tables: it finds none.
func ChildrenNamed(string) []int { return nil }
