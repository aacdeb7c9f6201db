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

package reliability

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// The fenced-mutex model (after Hazelcast's FencedMutex Jepsen model), one per lock, with the
// lock's fenced register folded in:
//   - acquire(c) → token is legal only while the lock is free and token > every token issued;
//   - release(c) is legal only by the holder (a release, a pod's death, or a loss the controller
//     reported; for a loss the call is the last renewal the claim's status showed, since the
//     backend held the lock then and may have let it go at any moment after);
//   - write(c, t) → accepted is legal iff accepted == (t ≥ the register's highest accepted
//     token), an accepted token must have been issued (t ≤ the lock's last token), and the last
//     token issued is accepted only from the client it was issued to.
// Writes do not require holding the lock: a claimant that outlived its lease still writes, and it
// is the register's job to reject it.

type opKind int

const (
	opAcquire opKind = iota
	opRelease
	opWrite
)

// mutexInput is an operation's input; mutexOutput its output.
type mutexInput struct {
	Lock   string
	Kind   opKind
	Client string
	Token  int64 // write only
}

type mutexOutput struct {
	Token    int64 // acquire
	Accepted bool  // write
}

type mutexState struct {
	Holder     string
	Fence      int64  // the last token issued
	FenceOwner string // the client Fence was issued to
	Highest    int64  // the register's highest accepted token
}

var fencedMutexModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byLock := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			l := op.Input.(mutexInput).Lock
			if _, ok := byLock[l]; !ok {
				order = append(order, l)
			}
			byLock[l] = append(byLock[l], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, l := range order {
			out = append(out, byLock[l])
		}
		return out
	},
	Init: func() any { return mutexState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(mutexState), input.(mutexInput), output.(mutexOutput)
		switch in.Kind {
		case opAcquire:
			if s.Holder != "" || out.Token <= s.Fence {
				return false, s
			}
			s.Holder, s.Fence, s.FenceOwner = in.Client, out.Token, in.Client
			return true, s
		case opRelease:
			if s.Holder != in.Client {
				return false, s
			}
			s.Holder = ""
			return true, s
		default:
			if out.Accepted != (in.Token >= s.Highest) || (out.Accepted && in.Token > s.Fence) ||
				(out.Accepted && in.Token == s.Fence && in.Client != s.FenceOwner) {
				return false, s
			}
			if out.Accepted {
				s.Highest = in.Token
			}
			return true, s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(mutexInput), output.(mutexOutput)
		switch in.Kind {
		case opAcquire:
			return fmt.Sprintf("acquire(%s) → %d", in.Client, out.Token)
		case opRelease:
			return fmt.Sprintf("release(%s)", in.Client)
		}
		return fmt.Sprintf("write(%s, %d) → %v", in.Client, in.Token, out.Accepted)
	},
	DescribeState: func(state any) string {
		s := state.(mutexState)
		return fmt.Sprintf("holder=%q fence=%d (%s) highest=%d", s.Holder, s.Fence, s.FenceOwner, s.Highest)
	},
}

// Operations turns grants and the register logs (by lock) into a porcupine history, timed in
// nanoseconds since base. Claims never observed Held contribute nothing (an acquire that never
// returned had no effect the watch could see).
func Operations(base time.Time, grants []Grant, writes map[string][]Write) []porcupine.Operation {
	ns := func(t time.Time) int64 { return t.Sub(base).Nanoseconds() }
	clients := map[string]int{}
	id := func(c string) int {
		if i, ok := clients[c]; ok {
			return i
		}
		clients[c] = len(clients)
		return clients[c]
	}
	var ops []porcupine.Operation
	for _, g := range grants {
		if g.Acquired.IsZero() {
			continue
		}
		ops = append(ops, porcupine.Operation{ClientId: id(g.Claim),
			Input: mutexInput{Lock: g.Lock, Kind: opAcquire, Client: g.Claim}, Call: ns(g.Created),
			Output: mutexOutput{Token: g.Token}, Return: ns(g.Acquired)})
		if g.Released.IsZero() {
			continue
		}
		call := g.Acquired
		switch {
		case g.Lost && g.LastRenew.After(call) && g.LastRenew.Before(g.Released):
			call = g.LastRenew
		case !g.Lost && !g.EndAt.IsZero() && g.EndAt.Before(g.Released):
			call = g.EndAt
		}
		ops = append(ops, porcupine.Operation{ClientId: id(g.Claim),
			Input: mutexInput{Lock: g.Lock, Kind: opRelease, Client: g.Claim}, Call: ns(call),
			Output: mutexOutput{}, Return: ns(g.Released)})
	}
	for lock, ws := range writes {
		for _, w := range ws {
			ops = append(ops, porcupine.Operation{ClientId: id(w.Writer),
				Input: mutexInput{Lock: lock, Kind: opWrite, Client: w.Writer, Token: w.Token}, Call: ns(w.Call),
				Output: mutexOutput{Accepted: w.Accepted}, Return: ns(w.Return)})
		}
	}
	return ops
}

// CheckLinearizable runs porcupine over the history against the fenced-mutex model. It returns
// Ok, Illegal or Unknown (timed out), and, when Illegal and htmlPath is set, writes porcupine's
// visualization there.
func CheckLinearizable(ops []porcupine.Operation, timeout time.Duration, htmlPath string) (porcupine.CheckResult, error) {
	res, info := porcupine.CheckOperationsVerbose(fencedMutexModel, ops, timeout)
	if res == porcupine.Illegal && htmlPath != "" {
		if err := porcupine.VisualizePath(fencedMutexModel, info, htmlPath); err != nil {
			return res, err
		}
	}
	return res, nil
}
