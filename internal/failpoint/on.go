//go:build failpoints

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

package failpoint

import (
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// FileEnv names the file through which the harness arms a point: the file holds the point's
// name. When the process reaches an armed point it replaces the content with
// "stopped <point> <detail>" (which disarms it) and stops itself with SIGSTOP; the harness reads
// the file to learn where it stopped and sends SIGCONT when it is time to go on.
const FileEnv = "LOCKWARDEN_FAILPOINT_FILE"

// mu makes one goroutine at a time test and disarm the point, so that the process stops once.
var mu sync.Mutex

// Pause stops the process at p if the harness armed p; detail (e.g. the claim) is reported.
func Pause(p Point, detail string) {
	path := os.Getenv(FileEnv)
	if path == "" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	armed, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(armed)) != string(p) {
		return
	}
	if err := os.WriteFile(path, []byte("stopped "+string(p)+" "+detail+"\n"), 0o644); err != nil {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	// The stop reaches every thread of the process soon, but not at once: the calling thread
	// may run on for a moment (long enough to send a request). Wait here until it has surely
	// been stopped; after SIGCONT the wait ends.
	time.Sleep(100 * time.Millisecond)
}
