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

package etcdtest_test

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockwarden/lockwarden/internal/testutil/etcdtest"
	"github.com/lockwarden/lockwarden/internal/testutil/listeners"
)

// The helper's promises: a healthy member on its ports, killed and restarted on the same ports
// with its data, and gone after the test.
func TestMemberLifecycle(t *testing.T) {
	g := NewWithT(t)
	var pid int
	t.Run("Lifecycle", func(t *testing.T) {
		ctx := t.Context()
		m := etcdtest.Start(t)
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Endpoint()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		g.Expect(err).NotTo(HaveOccurred())
		defer c.Close()
		_, err = c.Put(ctx, "k", "v")
		g.Expect(err).NotTo(HaveOccurred())
		port, first := m.ClientPort, m.PID()
		g.Expect(first).To(BeNumerically(">", 0))
		g.Expect(listeners.LoopbackOnly("etcd", first)).To(Succeed(), "client and peer URLs on loopback alone")

		m.Kill()
		g.Expect(m.PID()).To(BeZero())
		_, err = http.Get(m.Endpoint() + "/health")
		g.Expect(err).To(HaveOccurred(), "a killed member does not answer")
		m.Restart()
		g.Expect(m.ClientPort).To(Equal(port))
		g.Expect(m.PID()).NotTo(Equal(first))
		g.Eventually(func() (string, error) {
			short, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			resp, err := c.Get(short, "k")
			if err != nil || len(resp.Kvs) == 0 {
				return "", err
			}
			return string(resp.Kvs[0].Value), nil
		}, 30*time.Second, 50*time.Millisecond).Should(Equal("v"), "the data survived the restart")
		pid = m.PID()
	})
	g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "the member is gone after its test")
}

// A three-member cluster elects a leader that every member knows.
func TestCluster(t *testing.T) {
	g := NewWithT(t)
	members := etcdtest.StartCluster(t, 3)
	c, err := clientv3.New(clientv3.Config{Endpoints: etcdtest.Endpoints(members), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	var leaders []uint64
	for _, m := range members {
		resp, err := c.Status(t.Context(), m.Endpoint())
		g.Expect(err).NotTo(HaveOccurred())
		leaders = append(leaders, resp.Leader)
	}
	g.Expect(leaders[0]).NotTo(BeZero())
	g.Expect(leaders).To(HaveEach(leaders[0]))
}
