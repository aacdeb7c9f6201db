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

package identity

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestOnBackendRoundTrips(t *testing.T) {
	for _, c := range []struct {
		lock     types.UID
		identity string
	}{
		{"0f3c2a9e-1111-4a4a-9b9b-000000000001", "pod-uid"},
		{"0f3c2a9e-1111-4a4a-9b9b-000000000001", "with/slashes/inside"},
		{"0f3c2a9e-1111-4a4a-9b9b-000000000001", "lockwarden/other-uid/x"},
	} {
		v := OnBackend(c.lock, c.identity)
		lock, id, ok := Parse(v)
		if !ok || lock != c.lock || id != c.identity {
			t.Errorf("Parse(OnBackend(%q, %q)) = %q, %q, %v", c.lock, c.identity, lock, id, ok)
		}
	}
}

// A value written by anyone else never parses, and never equals a derived value of another
// lock, whatever identity a claim chooses.
func TestForeignValues(t *testing.T) {
	for _, v := range []string{"", "pod-uid", "lockwarden/", "lockwarden//x", "lockwarden/uid", "lockwarden/uid/", "redisson:1234"} {
		if _, _, ok := Parse(v); ok {
			t.Errorf("Parse(%q) accepted a value lockwarden does not write", v)
		}
	}
	victim := OnBackend("uid-a", "pod-1")
	if forged := OnBackend("uid-b", victim); forged == victim {
		t.Errorf("a claim of lock uid-b with identity %q forges lock uid-a's value", victim)
	}
	if forged := OnBackend("uid-b", "pod-1"); forged == victim {
		t.Errorf("the same identity on two locks gives one value: %q", forged)
	}
}
