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

package redisnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// minRedactedLength is the shortest password that error messages are scrubbed of. Redis and
// go-redis never echo a password; the scrubbing is a second line of defence, and scrubbing
// shorter strings would garble messages without protecting anything.
const minRedactedLength = 4

// Error is a failed request to one Redis server. Its message names the server and what was
// attempted, says what went wrong in words an operator can act on, and never contains the
// password.
type Error struct {
	// Addr is the server's address.
	Addr string
	// Op is what was attempted, e.g. `acquire "app/lock"`.
	Op string
	// Timeout is set when the server did not answer in time.
	Timeout bool
	msg     string
	err     error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the driver's error.
func (e *Error) Unwrap() error { return e.err }

// fail describes err, the outcome of a request that began at start under ctx.
func (n *Node) fail(ctx context.Context, start time.Time, op string, err error) error {
	e := &Error{Addr: n.addr, Op: op, err: err}
	var why string
	e.Timeout, why = explain(ctx, start, err, n.password != "", n.tls)
	msg := fmt.Sprintf("redis %s: %s: %s", n.addr, op, why)
	if len(n.password) >= minRedactedLength {
		msg = strings.ReplaceAll(msg, n.password, "[redacted]")
	}
	e.msg = msg
	return e
}

// explain turns a driver error into a sentence and says whether it was a timeout.
func explain(ctx context.Context, start time.Time, err error, hasPassword, usesTLS bool) (bool, string) {
	var (
		netErr     net.Error
		opErr      *net.OpError
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		recordErr  tls.RecordHeaderError
		certVerify *tls.CertificateVerificationError
	)
	switch {
	case errors.Is(err, context.Canceled):
		return false, "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, goredis.ErrPoolTimeout),
		errors.As(err, &netErr) && netErr.Timeout():
		hint := "the server may be paused, overloaded or unreachable"
		if usesTLS {
			// A plain Redis takes a TLS ClientHello for an unfinished command and waits for more.
			hint += ", or not speak TLS on this port"
		}
		if deadline, ok := ctx.Deadline(); ok {
			return true, fmt.Sprintf("no answer within %s (%s)", deadline.Sub(start).Round(time.Millisecond), hint)
		}
		return true, fmt.Sprintf("no answer in time (%s)", hint)
	case goredis.HasErrorPrefix(err, "NOAUTH"):
		return false, "the server requires a password (NOAUTH); set passwordSecretRef"
	case goredis.IsAuthError(err), goredis.HasErrorPrefix(err, "ERR invalid password"),
		goredis.HasErrorPrefix(err, "ERR AUTH"):
		if !hasPassword {
			return false, fmt.Sprintf("authentication failed: %v", err)
		}
		return false, fmt.Sprintf("the server refused the password: %v", err)
	case goredis.IsReadOnlyError(err):
		return false, "the server is a read-only replica; point the LockBackend at the primary"
	case goredis.IsLoadingError(err):
		return false, "the server is still loading its data set; try again shortly"
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &certVerify):
		return false, fmt.Sprintf("TLS: the server's certificate is not trusted: %v", err)
	case errors.As(err, &recordErr):
		return false, "TLS: the server does not speak TLS on this port (turn tls off, or use its TLS port)"
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// A TLS alert from the server, e.g. "tls: certificate required" when it wants a client
		// certificate.
		return false, fmt.Sprintf("TLS: the server refused the handshake: %v", err)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return false, fmt.Sprintf("cannot connect: %v", err)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if usesTLS {
			return false, fmt.Sprintf("the server closed the connection: %v (does it require a client certificate, or has it reached maxclients?)", err)
		}
		return false, fmt.Sprintf("the server closed the connection: %v (does it expect TLS? then set tls; or has it reached maxclients?)", err)
	case errors.Is(err, goredis.ErrClosed):
		return false, "the session is closed"
	}
	return false, err.Error()
}
