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

package fencing

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestIssue(t *testing.T) {
	// The largest token lockwarden's clock-seeded scheme could issue by 2096.
	oldScheme := time.Date(2096, 1, 1, 0, 0, 0, 0, time.UTC).Unix()*1_000_000 + 999_999
	cases := []struct {
		name    string
		rv      string
		last    int64
		n       int
		want    []int64
		wantErr string
	}{
		{"a first grant", "1234", 0, 1, []int64{Offset + 1234*PerWrite}, ""},
		{"a write that grants three holders", "10", 0, 3, []int64{Offset + 2560, Offset + 2561, Offset + 2562}, ""},
		{"above every token of the old scheme", "1", oldScheme, 1, []int64{Offset + PerWrite}, ""},
		{"above the last token", "11", Offset + 10*PerWrite + 255, 1, []int64{Offset + 11*PerWrite}, ""},
		{"storage went back in time", "10", Offset + 11*PerWrite, 1, nil, "went back in time"},
		{"the same precondition twice", "10", Offset + 10*PerWrite, 1, nil, "not above the lock's last token"},
		{"not an integer", "abc", 0, 1, nil, "not a positive integer"},
		{"empty", "", 0, 1, nil, "not a positive integer"},
		{"zero", "0", 0, 1, nil, "not a positive integer"},
		{"too large for JSON readers", strconv.FormatInt((MaxSafe-Offset)/PerWrite+1, 10), 0, 1, nil, "too large"},
		{"the largest safe resourceVersion", strconv.FormatInt((MaxSafe-Offset)/PerWrite, 10), 0, 1, []int64{Offset + (MaxSafe-Offset)/PerWrite*PerWrite}, ""},
		{"no holders", "10", 0, 0, nil, "1 to 256 holders"},
		{"too many holders", "10", 0, PerWrite + 1, nil, "1 to 256 holders"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Issue(c.rv, c.last, c.n)
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Issue(%q, %d, %d) = %v, %v; want an error containing %q", c.rv, c.last, c.n, got, err, c.wantErr)
				}
			case err != nil:
				t.Fatalf("Issue(%q, %d, %d): %v", c.rv, c.last, c.n, err)
			case !slices.Equal(got, c.want):
				t.Fatalf("Issue(%q, %d, %d) = %v, want %v", c.rv, c.last, c.n, got, c.want)
			}
			for _, tok := range got {
				if tok > MaxSafe {
					t.Fatalf("token %d is above 2⁵³−1", tok)
				}
			}
		})
	}
}

// casStore is an object with a resourceVersion that only a write preconditioned on the current
// one can change, as the API server's status subresource does; each write moves the version by
// one or more (other objects' writes share etcd's revision counter).
type casStore struct {
	mu   sync.Mutex
	rv   int64
	last int64 // status.fencingToken
}

func (s *casStore) read() (rv string, last int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatInt(s.rv, 10), s.last
}

func (s *casStore) write(precondition string, last int64, skip int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if precondition != strconv.FormatInt(s.rv, 10) {
		return false
	}
	s.rv += 1 + skip
	s.last = last
	return true
}

// TestConcurrentIssuersNeverShareAToken races issuers (a leader and deposed leaders, in effect)
// that each read the lock, issue tokens for one to three holders and write them back with a
// precondition; the writes that land must have issued tokens that are unique and increase in the
// order the writes landed.
func TestConcurrentIssuersNeverShareAToken(t *testing.T) {
	s := &casStore{rv: 1}
	var mu sync.Mutex
	var landed [][]int64 // in the order the writes landed
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 500 {
				rv, last := s.read()
				tokens, err := Issue(rv, last, 1+r.IntN(3))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock() // hold it across the write so that landed is in write order
				if s.write(rv, tokens[len(tokens)-1], r.Int64N(3)) {
					landed = append(landed, tokens)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	prev := int64(0)
	for _, tokens := range landed {
		for _, tok := range tokens {
			if seen[tok] {
				t.Fatalf("token %d issued twice", tok)
			}
			if tok <= prev {
				t.Fatalf("token %d issued after %d", tok, prev)
			}
			seen[tok], prev = true, tok
		}
	}
	if len(landed) < 500 {
		t.Fatalf("only %d writes landed", len(landed))
	}
	t.Logf("%d writes landed, %d tokens, all unique and increasing", len(landed), len(seen))
}
