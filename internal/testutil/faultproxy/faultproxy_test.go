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

package faultproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer is a real TCP echo server on loopback: it answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatalf("dialling the proxy: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and waits up to timeout for its echo; it returns the echo and the error.
func (c *client) roundTrip(line string, timeout time.Duration) (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c.c, line+"\n"); err != nil {
		return "", err
	}
	got, err := c.r.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

// dialAndEcho opens a connection and makes one round trip; it returns the first error.
func dialAndEcho(p *Proxy, line string) error {
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	cl := &client{c: c, r: bufio.NewReader(c)}
	got, err := cl.roundTrip(line, 2*time.Second)
	if err == nil && got != line {
		return fmt.Errorf("echo %q, want %q", got, line)
	}
	return err
}

func mustEcho(t *testing.T, c *client, line string) {
	t.Helper()
	got, err := c.roundTrip(line, 5*time.Second)
	if err != nil || got != line {
		t.Fatalf("round trip %q: got %q, %v", line, got, err)
	}
}

func waitConns(t *testing.T, p *Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Conns() != n {
		if time.Now().After(deadline) {
			t.Fatalf("live connections: got %d, want %d", p.Conns(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestForwards(t *testing.T) {
	p := newProxy(t)
	a, b := dial(t, p), dial(t, p)
	mustEcho(t, a, "hello")
	mustEcho(t, b, "world")
	waitConns(t, p, 2)
	if p.Accepted() != 2 {
		t.Fatalf("accepted: got %d, want 2", p.Accepted())
	}
	a.c.Close()
	waitConns(t, p, 1)
}

func TestRefuseCutsLiveAndNewConnections(t *testing.T) {
	p := newProxy(t)
	live := dial(t, p)
	mustEcho(t, live, "before")

	p.Partition(Refuse)
	if _, err := live.roundTrip("during", time.Second); err == nil {
		t.Fatal("a live connection still echoed during a Refuse partition")
	}
	waitConns(t, p, 0)
	// The listener accepts, then resets at once: the dial or the first read fails.
	if err := dialAndEcho(p, "during"); err == nil {
		t.Fatal("a new connection echoed during a Refuse partition")
	}

	p.Heal()
	mustEcho(t, dial(t, p), "after")
}

func TestBlackholeStallsThenDeliversAfterHeal(t *testing.T) {
	p := newProxy(t)
	live := dial(t, p)
	mustEcho(t, live, "before")

	p.Partition(Blackhole)
	if got, err := live.roundTrip("held", 300*time.Millisecond); err == nil {
		t.Fatalf("a live connection echoed %q during a Blackhole partition", got)
	}
	fresh := dial(t, p)
	if got, err := fresh.roundTrip("new", 300*time.Millisecond); err == nil {
		t.Fatalf("a new connection echoed %q during a Blackhole partition", got)
	}
	if p.Conns() != 2 {
		t.Fatalf("a blackhole must keep connections open: %d live, want 2", p.Conns())
	}

	p.Heal()
	// The bytes written during the partition arrive, in order, after it.
	_ = live.c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := live.r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after heal the held bytes: got %q, %v", got, err)
	}
	_ = fresh.c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := fresh.r.ReadString('\n'); err != nil || got != "new\n" {
		t.Fatalf("after heal the new connection's bytes: got %q, %v", got, err)
	}
	mustEcho(t, live, "after")
}

func TestLatencyPerDirection(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	mustEcho(t, c, "warm")

	measure := func() time.Duration {
		start := time.Now()
		mustEcho(t, c, "x")
		return time.Since(start)
	}
	if d := measure(); d > 100*time.Millisecond {
		t.Fatalf("round trip without latency took %s", d)
	}
	p.SetLatency(Upstream, 150*time.Millisecond)
	if d := measure(); d < 150*time.Millisecond || d > 2*time.Second {
		t.Fatalf("round trip with 150ms upstream latency took %s", d)
	}
	p.SetLatency(Downstream, 200*time.Millisecond)
	if d := measure(); d < 350*time.Millisecond || d > 3*time.Second {
		t.Fatalf("round trip with 150ms+200ms latency took %s", d)
	}
	p.Heal()
	if d := measure(); d > 100*time.Millisecond {
		t.Fatalf("round trip after heal took %s", d)
	}
}

func TestCutAll(t *testing.T) {
	p := newProxy(t)
	a, b := dial(t, p), dial(t, p)
	mustEcho(t, a, "a")
	mustEcho(t, b, "b")
	if n := p.CutAll(); n != 2 {
		t.Fatalf("CutAll cut %d connections, want 2", n)
	}
	if _, err := a.roundTrip("a", time.Second); err == nil {
		t.Fatal("a cut connection still echoed")
	}
	waitConns(t, p, 0)
	mustEcho(t, dial(t, p), "new") // no partition: new connections work
}

func TestUpstreamDownResetsClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p, err := New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := dialAndEcho(p, "x"); err == nil {
		t.Fatal("echo through a proxy whose upstream is down")
	}
}

func TestClose(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	mustEcho(t, c, "x")
	p.Partition(Blackhole)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.roundTrip("y", time.Second); err == nil {
		t.Fatal("echo after Close")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
}

// tickServer is a real TCP server on loopback that, on every connection, sends "tick" every
// 50 ms of its own accord and answers each line it reads with "echo:<line>"; got receives the
// lines it read.
func tickServer(t *testing.T) (addr string, got <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	lines := make(chan string, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var mu sync.Mutex
			send := func(s string) error {
				mu.Lock()
				defer mu.Unlock()
				_, err := io.WriteString(c, s+"\n")
				return err
			}
			go func() {
				defer c.Close()
				for {
					if send("tick") != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			go func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					line = strings.TrimSuffix(line, "\n")
					lines <- line
					_ = send("echo:" + line)
				}
			}()
		}
	}()
	return ln.Addr().String(), lines
}

// readUntil reads lines from c until one equals want, for at most timeout.
func (c *client) readUntil(want string, timeout time.Duration) error {
	_ = c.c.SetReadDeadline(time.Now().Add(timeout))
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.TrimSuffix(line, "\n") == want {
			return nil
		}
	}
}

func receivedWithin(got <-chan string, want string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		select {
		case line := <-got:
			if line == want {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

func TestOneWayBlackholes(t *testing.T) {
	addr, got := tickServer(t)
	p, err := New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := dial(t, p)
	if err := c.readUntil("tick", 2*time.Second); err != nil {
		t.Fatalf("no tick before any partition: %v", err)
	}

	// Heard but deaf: what the client sends arrives, nothing comes back until the heal.
	p.Partition(BlackholeDownstream)
	time.Sleep(100 * time.Millisecond) // let bytes already in flight through
	_ = c.c.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, c.r) // drain what came before the partition, until the deadline
	c.r.Reset(c.c)
	if _, err := io.WriteString(c.c, "x\n"); err != nil {
		t.Fatal(err)
	}
	if !receivedWithin(got, "x", 2*time.Second) {
		t.Fatal("BlackholeDownstream held back what the client sent")
	}
	if err := c.readUntil("tick", 300*time.Millisecond); err == nil {
		t.Fatal("BlackholeDownstream let the server's bytes through")
	}
	p.Heal()
	c.r.Reset(c.c)
	if err := c.readUntil("echo:x", 5*time.Second); err != nil {
		t.Fatalf("after the heal, the echo held back: %v", err)
	}

	// Hearing but unheard: the server's bytes arrive, what the client sends waits for the heal.
	p.Partition(BlackholeUpstream)
	time.Sleep(100 * time.Millisecond)
	if _, err := io.WriteString(c.c, "y\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.readUntil("tick", 2*time.Second); err != nil {
		t.Fatalf("BlackholeUpstream held back the server's bytes: %v", err)
	}
	if receivedWithin(got, "y", 300*time.Millisecond) {
		t.Fatal("BlackholeUpstream let what the client sent through")
	}
	p.Heal()
	if !receivedWithin(got, "y", 5*time.Second) {
		t.Fatal("after the heal, what the client sent never arrived")
	}
	if p.Conns() != 1 {
		t.Fatalf("one-way partitions must keep connections open: %d live, want 1", p.Conns())
	}
}
