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
	"slices"
	"time"
)

// Quantiles are the 50th and 99th percentiles and the largest of N latencies.
type Quantiles struct {
	P50, P99, Max time.Duration
	N             int
}

// Of summarizes d (nearest-rank percentiles); d is not modified.
func Of(d []time.Duration) Quantiles {
	if len(d) == 0 {
		return Quantiles{}
	}
	d = slices.Clone(d)
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return Quantiles{P50: q(0.50), P99: q(0.99), Max: d[len(d)-1], N: len(d)}
}
