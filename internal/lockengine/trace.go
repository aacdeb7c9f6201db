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

import "k8s.io/apimachinery/pkg/types"

// TracePoint is a moment of a lock's handoff inside the controller.
type TracePoint int

const (
	// TraceClaimEvent is a watch event of claim that queued a pass of the lock.
	TraceClaimEvent TracePoint = iota
	// TracePassStart is the start of a pass of the lock (it holds the lock's pass lock).
	TracePassStart
	// TraceRecordWriting is the moment before the pass sends the lock record naming claim as a
	// new holder.
	TraceRecordWriting
	// TraceRecordWritten is the moment the lock record naming claim as a new holder was written.
	TraceRecordWritten
	// TraceClaimWritten is the moment claim's status was written.
	TraceClaimWritten
)

// Tracer sees the moments of a handoff that happen inside the controller, so that a benchmark
// can tell where the time between a client's delete and the next holder's grant goes
// (test/bench). The manager runs without one; Traced must be quick and must not block.
type Tracer interface {
	Traced(point TracePoint, lock types.NamespacedName, claim string)
}

// trace tells the Reconciler's Tracer, if any.
func (r *Reconciler) trace(point TracePoint, lock types.NamespacedName, claim string) {
	if r.Tracer != nil {
		r.Tracer.Traced(point, lock, claim)
	}
}
