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

// Package identity derives the value lockwarden writes to a backend for a hold.
//
// A claim's holder identity is chosen by whoever writes the claim (spec.holder.identity), so it
// can be any string, including a value some other client or another namespace's lock wrote to
// the same backend. Were that string written to the backend as it is, a forged identity would
// count as the owner of a key lockwarden never took: Redis would extend it, etcd would re-put it,
// and a release would delete it. The value on the backend is therefore derived from the lock's
// UID and the identity: only lockwarden writes values of this shape, and only the lock with
// that UID writes values with that UID, so no value written by anyone else can equal it.
package identity

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// prefix starts every value lockwarden writes to a backend for a hold.
const prefix = "lockwarden/"

// OnBackend is the value written to the backend for a hold of identity on the lock whose UID is
// lock: lockwarden/<lock UID>/<identity>. It stays readable, so that an operator who inspects
// the store (redis-cli, etcdctl) can tell which lock and which holder a key belongs to.
func OnBackend(lock types.UID, identity string) string {
	return prefix + string(lock) + "/" + identity
}

// Parse splits a value written by OnBackend into the lock's UID and the identity; ok is false
// for any other value (a client outside lockwarden, or a hold granted before values were
// derived).
func Parse(value string) (lock types.UID, identity string, ok bool) {
	rest, found := strings.CutPrefix(value, prefix)
	if !found {
		return "", "", false
	}
	uid, id, found := strings.Cut(rest, "/")
	if !found || uid == "" || id == "" {
		return "", "", false
	}
	return types.UID(uid), id, true
}
