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

package lockengine

// This file decides which waiting claims a pass may try to grant, as a pure function of the
// queue, the current holds and the lock's number of places (grants_test.go). The rules
// (DESIGN §3 "Grant"):
//   - strict FIFO across modes: a claim is tried only if every claim ahead of it is granted in
//     the same pass;
//   - an Exclusive claim is granted only into an empty lock, and holds it alone;
//   - the run of Shared claims at the head of the queue is granted together while places are
//     free; an Exclusive claim in the queue blocks every claim behind it, so that a stream of
//     readers cannot starve a writer;
//   - on a lock of one place every hold is exclusive, whatever the claims asked for;
//   - a lock whose places were lowered below its holders grants nothing until enough have left.
//
// A claim whose holder does not exist yet (a pod or heartbeat Lease never seen) is not in the
// queue at all: it waits aside, so that it never blocks the claims behind it (serveQueue).

// grantMode is how a claim holds, or would hold, a lock.
type grantMode int

const (
	// grantShared takes one of the lock's places beside other Shared holders.
	grantShared grantMode = iota
	// grantExclusive holds the lock alone.
	grantExclusive
)

// effectiveMode is how a claim that asks for mode exclusive (or not) holds a lock of maxHolders
// places: a lock of one place has no room for sharing.
func effectiveMode(exclusive bool, maxHolders int32) grantMode {
	if exclusive || maxHolders <= 1 {
		return grantExclusive
	}
	return grantShared
}

// waiterSlot is what planGrants needs of one waiting claim.
type waiterSlot struct {
	mode grantMode
	// identity is the holder identity the claim would hold with: claims of one identity share
	// one place.
	identity string
}

// holdSlot is what planGrants needs of one current hold.
type holdSlot struct {
	mode     grantMode
	identity string
}

// planGrants returns how many claims from the head of queue the pass tries to grant, in order:
// it stops at the first that the rules above refuse, and so does the pass at the first its
// backend refuses.
func planGrants(queue []waiterSlot, holds []holdSlot, maxHolders int32) int {
	places := int(max(maxHolders, 1))
	taken := map[string]bool{}
	for _, h := range holds {
		if h.mode == grantExclusive {
			return 0
		}
		taken[h.identity] = true
	}
	n := 0
	for _, w := range queue {
		if w.mode == grantExclusive {
			if n == 0 && len(taken) == 0 {
				n = 1
			}
			break
		}
		if !taken[w.identity] && len(taken) >= places {
			break
		}
		taken[w.identity] = true
		n++
	}
	return n
}
