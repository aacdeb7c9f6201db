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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A lock whose backend failed for a while must try again soon after it recovers: the reliability
// harness saw a waiter sleep 51 s after a ten-second PostgreSQL restart under the default cap.
func TestPassRetriesAreCappedAfterALongOutage(t *testing.T) {
	limiter := passRateLimiter()
	claim := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "waiter"}}
	var waited time.Duration
	for range 40 { // a minute or more of failing passes
		d := limiter.When(claim)
		if d > maxRetryDelay {
			t.Fatalf("after %s of failures the next try waits %s, more than %s", waited, d, maxRetryDelay)
		}
		waited += d
	}
	if waited < time.Minute {
		t.Fatalf("40 failures took only %s: the backoff no longer grows to its cap", waited)
	}
	if first := passRateLimiter().When(claim); first > 10*time.Millisecond {
		t.Fatalf("the first retry waits %s; a blip should be retried at once", first)
	}
}
