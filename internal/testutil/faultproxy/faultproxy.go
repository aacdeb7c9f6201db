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

// Package faultproxy is a user-space TCP proxy on loopback in front of one upstream address, for
// injecting network faults into a link between two real processes (this kernel has no tc netem):
//
//   - Partition(Refuse): every live connection is cut (reset) and new ones are reset as soon as
//     they are accepted, as when the peer's host is up but its port is closed or a firewall
//     rejects;
//   - Partition(Blackhole): nothing is forwarded in either direction on live connections, and new
//     connections are accepted but never reach the upstream, as when packets are dropped. TCP
//     keeps the bytes (the proxy stops reading, so the senders' windows fill), so after Heal they
//     flow again, in order, as after a real partition that TCP retransmission outlived;
//   - SetLatency: bytes are delayed by a fixed time per direction;
//   - Heal: back to forwarding at once; CutAll resets every live connection.
//
// The proxy never changes, drops or reorders bytes inside a connection, so protocols (TLS,
// HTTP/2, RESP) keep their framing across faults. It is safe for concurrent use.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Mode is how a partition treats connections.
type Mode int

const (
	// Refuse resets every connection, live and new.
	Refuse Mode = iota + 1
	// Blackhole stalls every connection, live and new, without closing any.
	Blackhole
	// BlackholeUpstream stalls what clients send, live connections and new ones alike, while
	// what the server sends on them still arrives: an asymmetric partition in which a client
	// hears the server (a watch goes on) but is not heard.
	BlackholeUpstream
	// BlackholeDownstream stalls what the server sends while what clients send still arrives:
	// a client is heard (its writes are applied) but hears nothing back.
	BlackholeDownstream
)

func (m Mode) String() string {
	switch m {
	case Refuse:
		return "refuse"
	case Blackhole:
		return "blackhole"
	case BlackholeUpstream:
		return "blackhole-upstream"
	case BlackholeDownstream:
		return "blackhole-downstream"
	}
	return "none"
}

// stalls says whether a partition of mode m holds back bytes going in direction d.
func (m Mode) stalls(d Direction) bool {
	return m == Blackhole || m == BlackholeUpstream && d == Upstream || m == BlackholeDownstream && d == Downstream
}

// Direction is one way through the proxy.
type Direction int

const (
	// Upstream is from the client to the upstream server.
	Upstream Direction = iota
	// Downstream is from the upstream server back to the client.
	Downstream
)

// chunkSize is the largest piece read from a socket at once.
const chunkSize = 32 << 10

// dialTimeout bounds the dial of the upstream server.
const dialTimeout = 5 * time.Second

// Proxy forwards TCP connections from a loopback listener to one upstream address.
type Proxy struct {
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	mode    Mode               // 0 when healed
	latency [2]time.Duration   // by Direction
	changed chan struct{}      // closed and replaced on every change of mode or latency
	conns   map[*link]struct{} // live connections
	total   int                // connections accepted so far
	closed  bool

	wg sync.WaitGroup
}

// New listens on a free loopback port and forwards every connection to upstream.
func New(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listening: %w", err)
	}
	p := &Proxy{upstream: upstream, ln: ln, changed: make(chan struct{}), conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, 127.0.0.1:port: what clients dial instead of the upstream.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Upstream is the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// Partition starts a partition of the given mode; Refuse also cuts every live connection.
func (p *Proxy) Partition(m Mode) {
	p.mu.Lock()
	p.mode = m
	p.notifyLocked()
	var cut []*link
	if m == Refuse {
		cut = p.linksLocked()
	}
	p.mu.Unlock()
	for _, l := range cut {
		l.reset()
	}
}

// SetLatency delays every byte going in direction d by lat from now on (0 removes the delay).
func (p *Proxy) SetLatency(d Direction, lat time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency[d] = lat
	p.notifyLocked()
}

// Heal ends a partition and removes every added latency. Connections that survived a blackhole
// carry on.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = 0
	p.latency = [2]time.Duration{}
	p.notifyLocked()
}

// CutAll resets every live connection and returns how many there were.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	cut := p.linksLocked()
	p.mu.Unlock()
	for _, l := range cut {
		l.reset()
	}
	return len(cut)
}

// Mode is the current partition mode; 0 when there is none.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Conns is the number of live connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Accepted is the number of connections accepted since the proxy started.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// Close stops listening, resets every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.notifyLocked()
	cut := p.linksLocked()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range cut {
		l.reset()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) linksLocked() []*link {
	out := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		out = append(out, l)
	}
	return out
}

// state is what a forwarding goroutine needs to know, and a channel closed when it changes.
func (p *Proxy) state(d Direction) (Mode, time.Duration, <-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.latency[d], p.changed, p.closed
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			resetConn(c)
			return
		}
		p.total++
		if p.mode == Refuse {
			p.mu.Unlock()
			resetConn(c)
			continue
		}
		l := &link{p: p, client: c, done: make(chan struct{})}
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go l.run()
	}
}

// link is one proxied connection.
type link struct {
	p      *Proxy
	client net.Conn

	mu       sync.Mutex
	upstream net.Conn // nil until dialled
	done     chan struct{}
	once     sync.Once
}

// run waits until no blackhole holds the connection back, dials the upstream and pumps bytes
// both ways until either side closes or the link is reset.
func (l *link) run() {
	defer l.p.wg.Done()
	defer l.finish()
	for {
		mode, _, changed, closed := l.p.state(Upstream)
		if closed {
			return
		}
		if mode != Blackhole {
			break
		}
		select {
		case <-changed:
		case <-l.done:
			return
		}
	}
	up, err := net.DialTimeout("tcp", l.p.upstream, dialTimeout)
	if err != nil {
		resetConn(l.client)
		return
	}
	l.mu.Lock()
	select {
	case <-l.done: // reset while dialling
		l.mu.Unlock()
		resetConn(up)
		return
	default:
	}
	l.upstream = up
	l.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pump(Upstream, l.client, up) }()
	go func() { defer wg.Done(); l.pump(Downstream, up, l.client) }()
	wg.Wait()
}

// chunk is a piece of the byte stream and when it was read.
type chunk struct {
	data []byte
	at   time.Time
	err  error // io.EOF or a read error after the last data
}

// pump copies src to dst, holding bytes back while a blackhole lasts and delaying them by the
// direction's latency.
func (l *link) pump(d Direction, src, dst net.Conn) {
	chunks := make(chan chunk, 16) // bounded: a stalled writer stops the reader, so TCP pushes back
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, chunkSize)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case chunks <- chunk{data: buf[:n], at: time.Now()}:
				case <-l.done:
					return
				}
			}
			if err != nil {
				select {
				case chunks <- chunk{err: err, at: time.Now()}:
				case <-l.done:
				}
				return
			}
		}
	}()
	for c := range chunks {
		if !l.wait(d, c.at) {
			return
		}
		if c.err != nil {
			if errors.Is(c.err, io.EOF) {
				// Half-close: the other direction may still have bytes to deliver.
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			l.reset()
			return
		}
		if _, err := dst.Write(c.data); err != nil {
			l.reset()
			return
		}
	}
}

// wait blocks until a chunk read at 'at' may be delivered: no blackhole, and its latency passed.
// It returns false when the link ends first.
func (l *link) wait(d Direction, at time.Time) bool {
	for {
		mode, lat, changed, closed := l.p.state(d)
		if closed {
			return false
		}
		if mode.stalls(d) {
			select {
			case <-changed:
				continue
			case <-l.done:
				return false
			}
		}
		delay := time.Until(at.Add(lat))
		if delay <= 0 {
			return true
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
			return true
		case <-changed:
			t.Stop()
		case <-l.done:
			t.Stop()
			return false
		}
	}
}

// reset closes both sides with a TCP reset and ends the link.
func (l *link) reset() {
	l.once.Do(func() {
		close(l.done)
		l.mu.Lock()
		up := l.upstream
		l.mu.Unlock()
		resetConn(l.client)
		if up != nil {
			resetConn(up)
		}
	})
}

// finish ends a link whose pumps are done: both sockets are closed.
func (l *link) finish() {
	l.reset()
	l.p.mu.Lock()
	delete(l.p.conns, l)
	l.p.mu.Unlock()
}

// resetConn closes c so that the peer sees a reset rather than an orderly end of stream.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
