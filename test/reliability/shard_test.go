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

import "testing"

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in            string
		shard, shards int
		ok            bool
	}{
		{"0/1", 0, 1, true},
		{"1/2", 1, 2, true},
		{"2/2", 0, 0, false},
		{"-1/2", 0, 0, false},
		{"0/0", 0, 0, false},
		{"1", 0, 0, false},
		{"1/2x", 0, 0, false},
		{"", 0, 0, false},
	} {
		shard, shards, err := ParseShard(tc.in)
		if (err == nil) != tc.ok || shard != tc.shard || shards != tc.shards {
			t.Errorf("ParseShard(%q) = %d, %d, %v; want %d, %d, ok %v", tc.in, shard, shards, err, tc.shard, tc.shards, tc.ok)
		}
	}
}
