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
	"sync"
	"time"
)

// Write is one write attempt at a protected resource, as the resource logged it.
type Write struct {
	// Writer is the claimant (claim name) that wrote.
	Writer string
	// Token is the fencing token the writer presented.
	Token int64
	// Accepted says whether the fenced register took the write.
	Accepted bool
	// Call and Return bound the attempt on the harness clock.
	Call, Return time.Time
}

// FencedRegister is the resource a lock protects, checking fencing tokens the way an app's
// database would (`UPDATE … WHERE fence <= $token`): it accepts a write iff its token is at least
// the highest token it accepted so far, and logs every accept and reject. It is safe for
// concurrent use.
type FencedRegister struct {
	mu      sync.Mutex
	highest int64
	log     []Write
}

// Write presents a write with token; it returns whether the register accepted it.
func (r *FencedRegister) Write(writer string, token int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := time.Now()
	ok := token >= r.highest
	if ok {
		r.highest = token
	}
	r.log = append(r.log, Write{Writer: writer, Token: token, Accepted: ok, Call: call, Return: time.Now()})
	return ok
}

// Highest is the highest token the register accepted so far.
func (r *FencedRegister) Highest() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.highest
}

// Log returns a copy of every write attempt, in the order the register served them.
func (r *FencedRegister) Log() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.log...)
}

// Shadow is the same resource without fencing: it accepts every write, and counts what that
// costs. A write is stale when a write with a higher token was accepted before it (fencing
// would have rejected it); a critical section overlaps when a writer writes again after another
// writer wrote since its own previous write (two sections interleaved: a lost update for a
// read-modify-write resource). It is safe for concurrent use.
type Shadow struct {
	mu       sync.Mutex
	highest  int64
	last     string          // the writer of the latest write
	wrote    map[string]bool // writers seen (one writer per claim, so per critical section)
	writes   int
	stale    int
	overlaps int
}

// Write accepts a write.
func (s *Shadow) Write(writer string, token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrote == nil {
		s.wrote = map[string]bool{}
	}
	s.writes++
	if token < s.highest {
		s.stale++
	}
	s.highest = max(s.highest, token)
	if s.last != "" && s.last != writer && s.wrote[writer] {
		s.overlaps++ // this writer wrote before, another wrote since, and it writes again
	}
	s.wrote[writer] = true
	s.last = writer
}

// Counts returns the writes accepted, the stale ones among them and the interleaved sections.
func (s *Shadow) Counts() (writes, stale, overlaps int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, s.stale, s.overlaps
}

// CheckRegisterLog checks a fenced register's log (S1): the accepted tokens never go down, every
// rejected write carried a token below one accepted before it, and one token is only ever
// accepted from one writer (a token issued twice would let two writers in). It returns one line
// per violation.
func CheckRegisterLog(log []Write) []string {
	var out []string
	var highest int64
	owner := map[int64]string{}
	for i, w := range log {
		if !w.Accepted {
			if w.Token >= highest {
				out = append(out, fmt.Sprintf("write %d: %s with token %d rejected although the highest accepted was %d", i, w.Writer, w.Token, highest))
			}
			continue
		}
		if w.Token < highest {
			out = append(out, fmt.Sprintf("write %d: %s with token %d accepted after token %d (stale writer let through)", i, w.Writer, w.Token, highest))
		}
		if o, ok := owner[w.Token]; ok && o != w.Writer {
			out = append(out, fmt.Sprintf("write %d: token %d accepted from %s and from %s (token issued twice)", i, w.Token, o, w.Writer))
		}
		owner[w.Token] = w.Writer
		highest = max(highest, w.Token)
	}
	return out
}
