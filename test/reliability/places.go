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
	"sort"
	"time"
)

// CheckPlaces checks the two promises of a shared lock over the grants of every lock, in the
// order the watch observed them: never more claims Held at once than the lock's places
// (placesOf(lock); 1 is a mutex), and never an Exclusive claim Held beside any other. A claim is
// held from the watch's first sight of it Held (Acquired) to its first sight of it no longer held
// (Released; still held at the end when zero). The watch is ordered by the API server, and the
// controller marks a hold ended before it grants the place to another, so an observed overlap is
// a real one. A release and a grant seen at the same instant count release first.
func CheckPlaces(grants []Grant, placesOf func(lock string) int) []string {
	var out []string
	byLock := map[string][]Grant{}
	for _, g := range grants {
		if !g.Acquired.IsZero() {
			byLock[g.Lock] = append(byLock[g.Lock], g)
		}
	}
	for _, lock := range sortedKeys(byLock) {
		places := max(placesOf(lock), 1)
		type event struct {
			at      time.Time
			acquire bool
			g       Grant
		}
		var events []event
		for _, g := range byLock[lock] {
			events = append(events, event{at: g.Acquired, acquire: true, g: g})
			if !g.Released.IsZero() {
				events = append(events, event{at: g.Released, g: g})
			}
		}
		sort.SliceStable(events, func(i, j int) bool {
			if !events[i].at.Equal(events[j].at) {
				return events[i].at.Before(events[j].at)
			}
			return !events[i].acquire && events[j].acquire
		})
		held := map[string]Grant{}
		for _, e := range events {
			if !e.acquire {
				delete(held, e.g.Claim)
				continue
			}
			for _, h := range held {
				if h.Exclusive || e.g.Exclusive {
					out = append(out, fmt.Sprintf("lock %s: %s (token %d, %s) observed Held at %s beside %s (token %d, %s)",
						lock, e.g.Claim, e.g.Token, modeWord(e.g), e.at.Format(time.StampMicro), h.Claim, h.Token, modeWord(h)))
					break
				}
			}
			held[e.g.Claim] = e.g
			if len(held) > places {
				out = append(out, fmt.Sprintf("lock %s: %d claims observed Held at %s, more than its %d place(s) (the last: %s, token %d)",
					lock, len(held), e.at.Format(time.StampMicro), places, e.g.Claim, e.g.Token))
			}
		}
	}
	return out
}

// modeWord names a grant's mode for messages.
func modeWord(g Grant) string {
	if g.Exclusive {
		return "Exclusive"
	}
	return "Shared"
}

// holdsAlone keeps the grants that held their lock alone: the history the fenced-mutex model
// of linearizability describes.
func holdsAlone(grants []Grant) []Grant {
	var out []Grant
	for _, g := range grants {
		if g.Exclusive {
			out = append(out, g)
		}
	}
	return out
}
