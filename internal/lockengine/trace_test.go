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
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// traced is one call of a Tracer.
type traced struct {
	point TracePoint
	lock  string
	claim string
}

// traceLog is a Tracer that keeps every call.
type traceLog struct{ calls []traced }

func (l *traceLog) Traced(point TracePoint, lock types.NamespacedName, claim string) {
	l.calls = append(l.calls, traced{point, lock.Name, claim})
}

// TestStepHandoffTraced: the pass that hands a lock over tells the Tracer that it began, that it
// sends and then has written the record naming the new holder, and then that the new holder's
// claim was written, in that order,
// and nothing about the waiter behind it (no write per waiter).
func TestStepHandoffTraced(t *testing.T) {
	e := newStepEnv(t, interceptor.Funcs{})
	e.lock("db")
	e.claim("a", "db")
	e.claim("b", "db")
	e.claim("c", "db")
	e.heldBy("db", "a")
	e.mustPass("db") // b and c waiting, written
	log := &traceLog{}
	e.r.Tracer = log

	e.remove(e.getClaim("a"))
	e.mustPass("db")
	want := []traced{{TracePassStart, "db", ""}, {TraceRecordWriting, "db", "b"}, {TraceRecordWritten, "db", "b"}, {TraceClaimWritten, "db", "b"}}
	if !slices.Equal(log.calls, want) {
		t.Fatalf("traced %+v, want %+v", log.calls, want)
	}
}
