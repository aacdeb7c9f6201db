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

package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// session returns the session's connection, connecting and authenticating on first use.
func (b *Backend) session(ctx context.Context) (*zk.Conn, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("zookeeper backend: session is closed")
	}
	if b.conn == nil {
		c, events, err := zk.Connect(b.cfg.Servers, b.cfg.SessionTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
		if err != nil {
			b.mu.Unlock()
			return nil, b.wrap("connecting", err)
		}
		b.conn, b.authed = c, b.cfg.DigestAuth == ""
		go b.watchSession(events)
	}
	c, authed := b.conn, b.authed
	b.mu.Unlock()
	if authed {
		return c, nil
	}
	b.authMu.Lock()
	defer b.authMu.Unlock()
	b.mu.Lock()
	authed = b.authed
	b.mu.Unlock()
	if authed {
		return c, nil
	}
	err := b.call(ctx, c, "authenticating with digest credentials", false, func() error {
		return c.AddAuth("digest", []byte(b.cfg.DigestAuth))
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.authed = true
	b.mu.Unlock()
	return c, nil
}

// watchSession follows the session's events until the connection is closed: it records the
// state for error messages and forgets what the session wrote when the session expired (its
// ephemeral nodes are gone).
func (b *Backend) watchSession(events <-chan zk.Event) {
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		b.mu.Lock()
		b.state = ev.State
		if ev.State == zk.StateExpired {
			b.written = map[string]written{}
			b.placesWritten = map[placeID]placeWritten{}
		}
		b.mu.Unlock()
	}
}

// call runs one request of the client library, which takes no context, bounded by the call
// timeout and ctx. On timeout the request is abandoned; the library finishes it in the background.
func (b *Backend) call(ctx context.Context, c *zk.Conn, op string, count bool, f func() error) error {
	if count {
		b.requests.Add(1)
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			return b.wrap(op, err)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		state := b.state
		b.mu.Unlock()
		if state == zk.StateUnknown {
			state = c.State()
		}
		return b.wrap(op, fmt.Errorf("no answer (session state %s): %w", state, ctx.Err()))
	}
}

// wrap makes an error name the ensemble and the operation; it never contains the credentials.
func (b *Backend) wrap(op string, err error) error {
	return fmt.Errorf("zookeeper backend: %s (servers %s): %w", op, strings.Join(b.cfg.Servers, ","), err)
}

// ensureRoot creates Root and its parents, persistently, once per Backend.
func (b *Backend) ensureRoot(ctx context.Context, c *zk.Conn, force bool) error {
	b.mu.Lock()
	ready := b.rootReady && !force
	b.mu.Unlock()
	if ready {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(b.cfg.Root, "/"), "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		err := b.call(ctx, c, "creating "+p, true, func() error {
			_, err := c.Create(p, nil, 0, b.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	b.mu.Lock()
	b.rootReady = true
	b.mu.Unlock()
	return nil
}

// serverTime estimates the ensemble's current time, writing a probe node first when the session
// has no recent sample (one round trip).
func (b *Backend) serverTime(ctx context.Context, c *zk.Conn) (time.Time, error) {
	if now, ok := b.server.now(time.Now()); ok {
		return now, nil
	}
	if err := b.probe(ctx, c); err != nil {
		return time.Time{}, err
	}
	if now, ok := b.server.now(time.Now()); ok {
		return now, nil
	}
	return time.Time{}, b.wrap("reading the ensemble's clock", errors.New("the probe write returned no time"))
}

// probe creates, writes and deletes the session's probe node under Root in one Multi, which
// proves that the ensemble has a quorum and the session may write there, and samples the
// ensemble's clock from the write.
func (b *Backend) probe(ctx context.Context, c *zk.Conn) error {
	if err := b.ensureRoot(ctx, c, false); err != nil {
		return err
	}
	var res []zk.MultiResponse
	err := b.call(ctx, c, "writing the probe node "+b.pingNode, true, func() error {
		var err error
		res, err = c.Multi(&zk.CreateRequest{Path: b.pingNode, Data: []byte("ping"), Acl: b.acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: b.pingNode, Data: []byte("ping"), Version: 0},
			&zk.DeleteRequest{Path: b.pingNode, Version: -1})
		return err
	})
	at := time.Now()
	if err == nil && len(res) == 3 && res[1].Stat != nil {
		b.server.observe(res[1].Stat.Mtime, at)
		return nil
	}
	for _, r := range res {
		// The op that failed; the ones after it answer "runtime inconsistency" (-2), which the
		// library reports as an unknown error.
		if r.Error != nil && !strings.HasPrefix(r.Error.Error(), "unknown error") {
			return b.wrap("writing the probe node "+b.pingNode, r.Error)
		}
	}
	if err != nil {
		return err
	}
	return b.wrap("writing the probe node "+b.pingNode, errors.New("the server returned no stat"))
}
