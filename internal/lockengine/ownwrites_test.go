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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

func TestOwnWrites(t *testing.T) {
	at := func(rv string) *locksv1alpha1.LockClaim {
		return &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{UID: "c", ResourceVersion: rv}}
	}
	w := newOwnWrites()
	if w.behind(at("5")) || w.caughtUp(at("5")) {
		t.Fatal("an object this process never wrote is neither behind nor awaited")
	}
	w.note(at("10"))
	w.note(at("7")) // an older answer arriving late does not lower the mark
	if !w.behind(at("9")) {
		t.Fatal("rv 9 is behind a write at rv 10")
	}
	if w.behind(at("10")) || w.behind(at("11")) {
		t.Fatal("rv 10 and later are not behind a write at rv 10")
	}
	if w.caughtUp(at("9")) {
		t.Fatal("rv 9 has not caught up with rv 10")
	}
	if !w.caughtUp(at("10")) {
		t.Fatal("rv 10 catches up the object a pass found behind")
	}
	if w.caughtUp(at("11")) {
		t.Fatal("an object says it caught up once per pass that found it behind")
	}
	if !w.behind(at("x")) {
		t.Fatal("a resourceVersion that is not an integer counts as behind")
	}
	w.forget("c")
	if w.behind(at("1")) || w.caughtUp(at("10")) {
		t.Fatal("a forgotten object is neither behind nor awaited")
	}
}
