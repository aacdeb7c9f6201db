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

// Package failpoint lets the reliability harness stop the manager at a named point of its work,
// as a SIGSTOP would, but at the one moment that matters (gofail's idea, cut down to pauses).
// Points are compiled in only with the failpoints build tag; in every other build Pause is an
// empty function that the compiler drops.
package failpoint

// Point names a place in the controller where the harness may stop the process.
type Point string

const (
	// GrantStatus is just before the claim status write that reports a fresh grant (phase Held),
	// after the leader guard's last check: the backend holds the key and the lock record has the
	// token, but the claim does not say so yet. A leader stopped here and woken after a standby
	// took over is a deposed leader in the middle of a handoff that its guard can no longer stop;
	// only the write's resourceVersion precondition keeps it from bringing an ended claim back.
	GrantStatus Point = "grant-status"
)
