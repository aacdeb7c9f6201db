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

package lockclient_test

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

func TestClaimName(t *testing.T) {
	a := lockclient.ClaimName("web-7d9c-x2x4p", "uid-1", "db-migrate")
	if a != lockclient.ClaimName("web-7d9c-x2x4p", "uid-1", "db-migrate") {
		t.Fatal("ClaimName is not deterministic")
	}
	if !strings.HasPrefix(a, "web-7d9c-x2x4p-db-migrate-") {
		t.Fatalf("ClaimName %q does not start with the pod and the lock", a)
	}
	for _, other := range []string{
		lockclient.ClaimName("web-7d9c-x2x4p", "uid-2", "db-migrate"), // a replacement pod of the same name
		lockclient.ClaimName("web-7d9c-x2x4p", "uid-1", "db-other"),   // another lock
	} {
		if other == a {
			t.Fatalf("ClaimName collides: %q", a)
		}
	}
	long := lockclient.ClaimName(strings.Repeat("p", 200)+".x", "uid", strings.Repeat("l", 200))
	if errs := validation.IsDNS1123Subdomain(long); len(errs) > 0 {
		t.Fatalf("ClaimName of long names is not a valid name: %v", errs)
	}
	trimmed := lockclient.ClaimName(strings.Repeat("p", 241)+"-"+strings.Repeat("q", 20), "uid", "lock")
	if errs := validation.IsDNS1123Subdomain(trimmed); len(errs) > 0 {
		t.Fatalf("ClaimName %q is not a valid name: %v", trimmed, errs)
	}
}

func TestErrorMatchesItsKindAndCause(t *testing.T) {
	cause := errors.New("boom")
	err := error(&lockclient.Error{Kind: lockclient.ErrTimedOut, Detail: "timed out\n  waiting", Err: cause})
	if !errors.Is(err, lockclient.ErrTimedOut) || !errors.Is(err, cause) || errors.Is(err, lockclient.ErrLost) {
		t.Fatal("errors.Is does not match the kind and the cause")
	}
	if err.Error() != "timed out waiting" {
		t.Fatalf("Error() = %q, want one line", err.Error())
	}
	if got := (&lockclient.Error{Kind: lockclient.ErrForbidden, Err: cause}).Error(); got != "forbidden: boom" {
		t.Fatalf("Error() without detail = %q", got)
	}
}
