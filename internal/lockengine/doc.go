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
// claims' status (DESIGN.md §3, "One writer per lock").
//
// A pass (Reconciler.Reconcile, reconciler.go) loads what it works from into its scope (scope.go:
// the lock, its claims, their pods, the holder pods' Nodes when the lock sets
// holderNodeLossSeconds, heartbeat Leases, and holder workload objects (workloads.go) from the
// cache, the backend session and the key ledger's verdict), then runs its steps in order:
//
//  1. endHolds (holds.go): which claims of the lock record go on holding, which let go and how
//     (decide.go's holderEnding), the backend release once no claim shares a hold, resuming a
//     hold after a leader change;
//  2. serveQueue (queue.go): waits that are over, claims that join a hold (reentrancy), claims
//     whose holder does not exist yet (they wait aside), and the one backend acquire for the head
//     of the queue (decide.go's planGrants says how many may be tried);
//  3. refreshHolds, decideLowPriority (holds.go, lowpriority.go): which status changes are due;
//  4. writeLock (write.go): the lock record, by a compare-and-swap that is also where fencing
//     tokens come from; a backend hold the pass took and could not record is given back
//     (Reconcile defers it, so no way out leaves one behind);
//  5. writeClaims, finishDeletes (write.go): the claims, the ended holds first and the new
//     holders next; then the lock's own finalizer.
//
// Decisions are pure functions with table tests (decide.go); the deliberate bugs of mutation
// testing enter through the seams of seams.go, never as branches in them. Steps are tested one
// by one against a fake client, backends/fake and a real Renewer (steps_*_test.go); the
// controller suite runs the whole engine against a real API server.
//
// A claim of several locks (spec.lockNames) is filed under each of its locks; each lock's pass
// works on the claim's part on that lock (several.go), and its home lock's pass grants all the
// locks at once (joint.go). A grant goes through five files: reconciler.go (the pass), scope.go (what it read), queue.go
// (the backend acquire), decide.go (who is granted, what the claims say) and write.go (the lock
// record, then the claims).
//
// What outlives a pass, and why: the Renewer (package renewal) renews held locks in batches;
// the refresh lane (refresh.go) keeps held claims' status.expireTime ahead of now without waiting
// behind grants; ownWrites (ownwrites.go) keeps a pass from working on a cache older than this
// process's own last write; passLocks (passlocks.go) keeps two passes of one lock apart; the
// free-key watches (freewatch.go) wake a lock whose backend key an outside client let go; the
// session bridge (session_bridge.go) keeps the built-in backend's sessions alive from a leader's
// first moment until its passes have resumed every hold.
package lockengine
