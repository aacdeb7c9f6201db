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

package zktest_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/lockwarden/lockwarden/internal/testutil/listeners"
	"github.com/lockwarden/lockwarden/internal/testutil/zktest"
)

// A server answers srvr on loopback, dies with Kill and comes back with Restart on its port.
func TestStartKillRestart(t *testing.T) {
	s := zktest.Start(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr = %q, want loopback", s.Addr())
	}
	answer, err := s.Srvr()
	if err != nil || !strings.Contains(answer, "Mode: standalone") {
		t.Fatalf("srvr = %q, %v; want a standalone server", answer, err)
	}
	pid := s.PID()
	// clientPortAddress keeps the client port on loopback (ZooKeeper binds every interface
	// without it), and the AdminServer (port 8080) is off.
	if err := listeners.LoopbackOnly("ZooKeeper", pid); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if s.PID() != 0 {
		t.Fatalf("PID after Kill = %d, want 0", s.PID())
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d still exists after Kill", pid)
	}
	if _, err := s.Srvr(); err == nil {
		t.Fatal("a killed server answered srvr")
	}
	s.Restart()
	if s.PID() == 0 || s.PID() == pid {
		t.Fatalf("PID after Restart = %d (before %d)", s.PID(), pid)
	}
	if _, err := s.Srvr(); err != nil {
		t.Fatalf("srvr after Restart: %v", err)
	}
}
