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

package latency

import (
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, v := range n {
			d = append(d, time.Duration(v)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want Quantiles
	}{
		{"none", nil, Quantiles{}},
		{"one", ms(7), Quantiles{P50: 7 * time.Millisecond, P95: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond, N: 1}},
		{"unsorted", ms(3, 1, 2), Quantiles{P50: 2 * time.Millisecond, P95: 3 * time.Millisecond, P99: 3 * time.Millisecond, Max: 3 * time.Millisecond, N: 3}},
		{"a hundred: the 99th percentile is the 99th value, not the largest", ms(hundred...),
			Quantiles{P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond, N: 100}},
		{"twenty: p99 is the largest, as it must be", ms(hundred[80:]...),
			Quantiles{P50: 10 * time.Millisecond, P95: 19 * time.Millisecond, P99: 20 * time.Millisecond, Max: 20 * time.Millisecond, N: 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tc.in...)
			if got := Of(tc.in); got != tc.want {
				t.Errorf("Of = %+v, want %+v", got, tc.want)
			}
			for i := range in {
				if in[i] != tc.in[i] {
					t.Fatalf("Of reordered its input")
				}
			}
		})
	}
}
