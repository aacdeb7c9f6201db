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

// Package latency summarizes measured latencies for the benchmarks (test/bench and
// test/bench/scale), so that both report percentiles the same way.
package latency

import (
	"math"
	"slices"
	"time"
)

// Quantiles are the 50th, 95th and 99th percentiles and the largest of N latencies.
type Quantiles struct {
	P50, P95, P99, Max time.Duration
	N                  int
}

// Of summarizes d by nearest rank (the p-th percentile is the ⌈p·N⌉-th smallest: of 100, the 99th
// percentile is the 99th value, not the largest); d is not modified.
func Of(d []time.Duration) Quantiles {
	if len(d) == 0 {
		return Quantiles{}
	}
	d = slices.Clone(d)
	slices.Sort(d)
	q := func(p float64) time.Duration {
		rank := int(math.Ceil(p * float64(len(d))))
		return d[min(max(rank, 1), len(d))-1]
	}
	return Quantiles{P50: q(0.50), P95: q(0.95), P99: q(0.99), Max: d[len(d)-1], N: len(d)}
}
