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

// Package lockengine is the per-lock pass: the one writer of each DistributedLock and of its
// claims' status (docs/design.md §3, "One writer per lock").
//
// A pass (Reconciler.Reconcile, reconciler.go) loads its scope (load.go; scope.go says what the
// scope holds): the lock and its claims from the cache, each claim's holder (holder.go: a pod
// with its Node, a heartbeat Lease, a workload object or none, one file per kind), the backend
// session and the key ledger's verdict. It then runs its steps in order; each returns what it
// asks of the pass besides its changes (step.go: when to look again, an error to retry), and
// Reconcile merges those:
//
//  1. settleParts (joint.go): record entries a stopped joint grant left for a claim of several
//     locks are listed in the claim, then given back;
//  2. endHolds (holds.go): which claims of the lock record go on holding, which let go and how
//     (decide.go's holderEnding), the backend release once no claim shares a hold, resuming a
//     hold after a leader change; writeEndedHolds (write.go) then says so in the claims whose
//     hold ended, before any key goes to anyone else;
//  3. queueClaims (queue.go): who waits and in what order (queueOf, the one definition of the
//     queue), waits that end, claims whose holder does not exist yet (they wait aside), claims
//     that join a live hold;
//  4. serveJoint (joint.go): the claim of several locks first in line is granted all of them
//     at once, by its home lock's pass;
//  5. serveQueue (queue.go, grant.go): the backend acquire for the head of the queue
//     (decide.go's planGrants says how many may be tried), the status of those that wait on;
//  6. refreshHolds, decideLowPriority (holds.go, lowpriority.go): which status changes are due;
//  7. writeLock, writeJoint (write.go, joint.go): the lock record, by a compare-and-swap that
//     is also where fencing tokens come from; a backend hold the pass took and could not record
//     is given back (Reconcile defers it, so no way out leaves one behind);
//  8. writeClaims, shedFinalizers, finishDeletes (write.go, vanished.go): the claims, the ended
//     holds first and the new holders next; then finalizers. A one-lock claim's Held write
//     leaves the pass through the held lane (heldlane.go): the record granted it already, and
//     the next pass sees the claim as that write makes it and writes nothing to it before it.
//
// A one-lock grant goes through reconciler.go (the pass), load.go and scope.go (what it read),
// holder.go (who the holder is), queue.go and grant.go (who is next, the backend acquire),
// decide.go (what the claims say), write.go (the lock record, then the claims) and heldlane.go.
//
// Decisions are pure functions with table tests (decide.go, several.go); the deliberate bugs of
// mutation testing enter through the seams of seams.go, never as branches in them. Steps are
// tested one by one and as whole passes against a fake client, backends/fake and a real Renewer
// (steps_*_test.go); the controller suite runs the whole engine against a real API server.
//
// A claim of several locks (spec.lockNames) is filed under each of its locks; each lock's pass
// works on the claim's part on that lock (several.go), and everything that concerns the claim as
// a whole (the joint grant, the settling of a stopped one, the refresh of every part at once)
// is joint.go's.
//
// What outlives a pass is lockMemory's (memory.go): the pass locks that keep two passes of one
// lock apart (passlocks.go), this process's own writes that a lagging cache must not hide
// (ownwrites.go), the free-key watches that wake a lock whose backend key an outside client let
// go (freewatch.go), the refresh lane that keeps held claims' status.expireTime ahead of now
// without waiting behind grants (refresh.go), the heartbeat tracker, event thinning
// (eventthin.go) and held-back low-priority writes (lowpriority.go). The Renewer (package
// renewal) renews held locks in batches; the session bridge (session_bridge.go) keeps the
// built-in backend's sessions alive from a leader's first moment until its passes have resumed
// every hold.
package lockengine
