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

package redlock

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/internal/backends"
)

// NodeError is why one node failed a call.
type NodeError struct {
	// Address is the node's host:port.
	Address string
	// Err says what went wrong; it names the node and never contains the password.
	Err error
}

// QuorumError says why a call did not get a quorum of nodes to agree: who holds the lock, which
// nodes failed and why, or that the agreement came too late. It unwraps to Locked (and so to
// backends.ErrLocked) when other holders make a quorum impossible, else to ErrUnavailable.
type QuorumError struct {
	// Op is the call: acquire, renew, release, inspect, holders or ping.
	Op string
	// Key is the lock's key; empty for renew and ping.
	Key string
	// Nodes is how many nodes there are, Quorum how many must agree.
	Nodes, Quorum int
	// Places is the number of places a shared acquire asked for (its Quorum is SharedQuorum);
	// zero for any other call.
	Places int
	// Agreed is how many nodes did what was asked (granted, answered, passed).
	Agreed int
	// Failed lists the nodes that returned an error or did not answer in time.
	Failed []NodeError
	// Locked is set when other holders have so many nodes that this identity cannot reach a
	// quorum. Its Holder is the holder with the most nodes, HolderNodes how many it has.
	Locked *backends.LockedError
	// HolderNodes is how many nodes Locked.Holder holds.
	HolderNodes int
	// Exclusive is set when a shared acquire found the key held exclusively by Locked.Holder on a
	// majority of nodes.
	Exclusive bool
	// Full is set when a shared acquire found every place held, each on Quorum nodes or more;
	// Locked.Holder's place is the first to fall below it.
	Full bool
	// Elapsed and TTL are set when a quorum agreed, but so late that no validity was left.
	Elapsed, TTL time.Duration
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString("redlock " + e.Op)
	if e.Key != "" {
		fmt.Fprintf(&b, " %q", e.Key)
	}
	b.WriteString(": ")
	verb := map[string]string{"acquire": "granted", "ping": "passed"}[e.Op]
	if verb == "" {
		verb = "answered"
	}
	switch {
	case e.Locked != nil && e.Full:
		fmt.Fprintf(&b, "all %d places are held, each on at least %d of %d nodes; %q's is the first to expire",
			e.Places, e.Quorum, e.Nodes, e.Locked.Holder)
	case e.Locked != nil && e.Exclusive:
		fmt.Fprintf(&b, "held exclusively by %q on %d of %d nodes", e.Locked.Holder, e.HolderNodes, e.Nodes)
	case e.Locked != nil && e.Places > 0:
		fmt.Fprintf(&b, "contended: a place of %d needs %d of %d nodes, and other holders (%q on %d) leave only %d granted",
			e.Places, e.Quorum, e.Nodes, e.Locked.Holder, e.HolderNodes, e.Agreed)
	case e.Locked != nil && e.HolderNodes >= e.Quorum:
		fmt.Fprintf(&b, "held by %q on %d of %d nodes", e.Locked.Holder, e.HolderNodes, e.Nodes)
	case e.Locked != nil:
		fmt.Fprintf(&b, "contended: no holder has a quorum of %d (%q has %d of %d nodes) and only %d %s, so none can",
			e.Quorum, e.Locked.Holder, e.HolderNodes, e.Nodes, e.Agreed, verb)
	case e.TTL > 0:
		fmt.Fprintf(&b, "%d of %d nodes %s, but only after %s of the %s TTL, leaving no validity (allowing %s of clock drift)",
			e.Agreed, e.Nodes, verb, e.Elapsed.Round(time.Millisecond), e.TTL, Drift(e.TTL))
	default:
		fmt.Fprintf(&b, "only %d of %d nodes %s, %d needed", e.Agreed, e.Nodes, verb, e.Quorum)
	}
	if len(e.Failed) > 0 {
		fmt.Fprintf(&b, "; %d failed: ", len(e.Failed))
		for i, f := range e.Failed {
			if i > 0 {
				b.WriteString("; ")
			}
			msg := f.Err.Error()
			if !strings.Contains(msg, f.Address) {
				msg = f.Address + ": " + msg
			}
			b.WriteString(msg)
		}
	}
	return b.String()
}

// Unwrap returns Locked when other holders prevent a quorum, else ErrUnavailable.
func (e *QuorumError) Unwrap() error {
	if e.Locked != nil {
		return e.Locked
	}
	return ErrUnavailable
}

// FailedAddresses lists the addresses of the nodes that failed.
func (e *QuorumError) FailedAddresses() []string {
	addrs := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		addrs[i] = f.Address
	}
	return addrs
}
