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

package renewal

import (
	"testing"
	"time"
)

func TestRenewAt(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 12, 0, 0, time.UTC)
	const ttl = 30 * time.Second
	cases := []struct {
		name          string
		renew, expire time.Time
		want          time.Time
	}{
		{"just renewed: a sixth of the TTL on", t0, t0.Add(ttl), t0.Add(5 * time.Second)},
		{"renewed a little before now: the expiry does not pull it in", t0, t0.Add(ttl + time.Second), t0.Add(5 * time.Second)},
		{"the backend's expiry a little early: five sixths before it", t0, t0.Add(ttl - time.Second), t0.Add(4 * time.Second)},
		{"taken over with 5 s left: due already", t0, t0.Add(5 * time.Second), t0.Add(-20 * time.Second)},
	}
	for _, c := range cases {
		if got := renewAt(c.renew, c.expire, ttl); !got.Equal(c.want) {
			t.Errorf("%s: renewAt = %s, want %s", c.name, got.Sub(t0), c.want.Sub(t0))
		}
	}
}
