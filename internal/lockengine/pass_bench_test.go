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

import (
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// BenchmarkHandoffPass measures the engine's passes of one handoff on a lock with depth claims
// waiting behind the holder, as make bench's hot lock runs it: the holder's claim is deleted and a
// pass grants the next; a new claim joins the tail and a pass writes its first status. The world
// is the step tests' (a fake client, the in-memory backend), so the figure is the engine's CPU
// and the fake client's, not an API server's; what it is for is how the pass grows with depth:
//
//	go test ./internal/lockengine -run '^$' -bench HandoffPass -cpuprofile /tmp/pass.prof
func BenchmarkHandoffPass(b *testing.B) {
	for _, depth := range []int{1, 10, 50, 200} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			e := newStepEnv(b, interceptor.Funcs{})
			e.lock("db")
			names := []string{}
			join := func() {
				name := fmt.Sprintf("c-%06d", len(names))
				names = append(names, name)
				e.claim(name, "db")
			}
			join()
			e.mustPass("db") // takes the key
			for range depth {
				join()
			}
			e.mustPass("db") // grants the first, queues the rest
			head := 0
			b.ResetTimer()
			for range b.N {
				e.remove(e.getClaim(names[head]))
				head++
				e.mustPass("db")
				join()
				e.mustPass("db")
			}
			b.StopTimer()
			if got := e.getClaim(names[head]); got.Status.Phase != locksv1alpha1.ClaimHeld {
				b.Fatalf("claim %s %s after %d handoffs, want Held", names[head], got.Status.Phase, b.N)
			}
		})
	}
}
