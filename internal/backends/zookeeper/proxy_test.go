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

package zookeeper_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy forwards loopback TCP connections to a server; cut closes them and refuses new ones
// (a network partition between client and server) until heal.
type proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &proxy{l: l, target: target}
	t.Cleanup(func() {
		_ = l.Close()
		p.cut()
	})
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
