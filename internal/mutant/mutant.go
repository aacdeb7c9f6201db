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

// Package mutant names the deliberate bugs that the reliability harness plants in a test build
// of the manager to prove that its checkers can fail (mutation testing). A bug is switched on by
// listing its name in the environment variable LOCKWARDEN_MUTANT of a manager built with the
// mutants build tag; in every other build Active is a constant false, the compiler drops the
// guarded code, and the shipped binary carries none of it (a test in cmd/manager checks).
package mutant

// Name is one deliberate bug.
type Name string

// The bugs, each one a way a lock service has gone wrong elsewhere. docs/reliability.md lists
// which checker catches each.
const (
	// GrantUnacquired grants a claim although the backend refused the key (it is held by
	// someone else): two holders.
	GrantUnacquired Name = "grant-unacquired"
	// TokenReuse issues the lock's last fencing token again instead of a new one.
	TokenReuse Name = "token-reuse"
	// TokenLower issues a token below the lock's last one.
	TokenLower Name = "token-lower"
	// KeepDeadHolder never releases a lock when its holder pod dies.
	KeepDeadHolder Name = "keep-dead-holder"
	// ReleaseUnchecked releases a lock that its record shows free by plain delete, without
	// checking who holds the key: it frees another holder's key (a client outside lockwarden).
	ReleaseUnchecked Name = "release-unchecked"
	// BlindStatus writes claim status without a resourceVersion precondition, so that a deposed
	// leader's late write can bring an ended claim back to Held.
	BlindStatus Name = "blind-status"
	// RenewLost treats a lock the backend reports lost (expired, or given to someone else) as
	// renewed.
	RenewLost Name = "renew-lost"
	// NoStallGuard never trips the leader guard: a leader that woke up deposed goes on acting
	// until its leader election notices.
	NoStallGuard Name = "no-stall-guard"
	// IgnoreLockDelay grants at once after a hold ended without a release, whatever the lock's
	// lockDelaySeconds.
	IgnoreLockDelay Name = "ignore-lock-delay"
	// KeepCoveredGaps keeps every gap between a built-in-backend session's renewals in its
	// history, also those a later, longer gap makes redundant: the history fills up with the
	// regular renewals of a 30 s lease, and holds older than its oldest gap are judged lapsed
	// (a real bug, now fixed: every hold at the default lease was Lost within three minutes).
	KeepCoveredGaps Name = "keep-covered-gaps"
	// IgnorePlaces grants every Shared claim at the head of the queue, whatever the lock's
	// maxHolders: a semaphore with more holders than places.
	IgnorePlaces Name = "ignore-places"
	// WriterBesideReaders grants an Exclusive claim at the head of the queue while Shared
	// holders still hold their places: a writer beside readers.
	WriterBesideReaders Name = "writer-beside-readers"
	// KeepHolderLabel leaves the role label holder on a Standby pod whose hold ended while the
	// pod lives (its node was lost, its claim Lost or deleted): the next holder is labelled
	// beside it, and a Service that selects role: holder sends traffic to both.
	KeepHolderLabel Name = "keep-holder-label"
	// TerminatingHolderLabel leaves the role label holder on a terminating Standby holder until
	// its pod is gone: traffic keeps reaching a pod that is shutting down.
	TerminatingHolderLabel Name = "terminating-holder-label"
	// RecordAnyHolder marks a waiting pod as the holder (token, role label, gate lifted) as soon
	// as its lock's record names any holder, with that holder's token: the pod path's checks that
	// the record names this pod's own claim, with this pod, dropped (both: the one that marks a
	// waiting pod, and the one that lets a pod take the label from the lock's other pods).
	RecordAnyHolder Name = "record-any-holder"
	// IgnoreLocalDeadline (in lockctl and pkg/lockclient, not the manager) keeps a Hold going
	// past its local deadline: a holder cut off from the API server keeps running its command
	// after the controller has given the lock to the next.
	IgnoreLocalDeadline Name = "ignore-local-deadline"
	// ResumeLapsed takes a hold for alive when a pass resumes it after a restart or a leader
	// change although the backend let it go meanwhile (the class of etcd #11456, where a lease
	// was not checked again after a wait): the key is taken again for it, and it goes on with
	// its old token as if it had never lapsed.
	ResumeLapsed Name = "resume-lapsed"
	// ResumeUnheld resumes a Job (any workload object that waits suspended for a lock) as soon as
	// its claim is queued, before it holds: two Jobs of one lock run at once.
	ResumeUnheld Name = "resume-unheld"
	// JoinAnyHold lets a waiting claim re-enter the lock's first recorded hold whatever identity
	// holds it: reentrancy matched by the lock alone, so a claim of another pod shares the
	// holder's hold and token.
	JoinAnyHold Name = "join-any-hold"
	// GrantOneByOne grants a claim of several locks its first lock and reports it Held then,
	// without taking the others: Held on a subset of its locks (the hold-and-wait grant the joint
	// grant exists to avoid).
	GrantOneByOne Name = "grant-one-by-one"
)

// All lists every mutant, in the order the harness runs them.
var All = []Name{GrantUnacquired, TokenReuse, TokenLower, KeepDeadHolder, ReleaseUnchecked, BlindStatus, RenewLost, NoStallGuard, IgnoreLockDelay, KeepCoveredGaps,
	IgnorePlaces, WriterBesideReaders, KeepHolderLabel, TerminatingHolderLabel, ResumeUnheld, RecordAnyHolder,
	IgnoreLocalDeadline, ResumeLapsed, JoinAnyHold, GrantOneByOne}
