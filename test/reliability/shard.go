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
	"strconv"
	"strings"
)

// ParseShard reads a shard of a scenario set, "i/n": shard i of n, 0 <= i < n. A set runs in n
// processes at once, each taking the scenarios whose place in the set is i modulo n.
func ParseShard(v string) (shard, shards int, err error) {
	i, n, found := strings.Cut(v, "/")
	shard, errI := strconv.Atoi(i)
	shards, errN := strconv.Atoi(n)
	if !found || errI != nil || errN != nil || shards < 1 || shard < 0 || shard >= shards {
		return 0, 0, fmt.Errorf("-shard must be i/n with 0 <= i < n (e.g. 0/2), not %q", v)
	}
	return shard, shards, nil
}
