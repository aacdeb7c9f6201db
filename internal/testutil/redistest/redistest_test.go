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

package redistest_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/testutil/listeners"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

// The helper's promises: a server on its port, killed and restarted empty on the same port,
// paused and resumed, and gone after the test.
func TestServerLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	var pid int
	t.Run("Lifecycle", func(t *testing.T) {
		s := redistest.Start(t, redistest.Options{})
		c := s.Client()
		g.Expect(c.Set(ctx, "k", "v", 0).Err()).To(Succeed())
		port, first := s.Port, s.PID()
		g.Expect(first).To(BeNumerically(">", 0))
		g.Expect(listeners.LoopbackOnly("redis-server", first)).To(Succeed())

		s.Kill()
		g.Expect(s.PID()).To(BeZero())
		s.Restart()
		g.Expect(s.Port).To(Equal(port))
		g.Expect(s.PID()).NotTo(Equal(first))
		g.Eventually(func() error { return c.Ping(ctx).Err() }, 30*time.Second, 50*time.Millisecond).Should(Succeed())
		g.Expect(c.Exists(ctx, "k").Val()).To(BeZero(), "no persistence: the restart lost the key")

		s.Pause()
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		g.Expect(c.Ping(short).Err()).To(HaveOccurred(), "a paused server does not answer")
		cancel()
		s.Resume()
		g.Eventually(func() error { return c.Ping(ctx).Err() }, 30*time.Second, 50*time.Millisecond).Should(Succeed())
		s.Pause() // cleanup must kill a paused server too
		pid = s.PID()
	})
	g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "the server is gone after its test")
}
