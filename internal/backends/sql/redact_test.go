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

package sqlbackend

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

// The redactor removes the DSN, the password as written and as URLs escape it, and whatever looks
// like credentials; it keeps the rest of the message, and unwraps only to context errors.
func TestRedactor(t *testing.T) {
	const pw = "p@ss w/rd:1"
	dsn := "postgres://u:p%40ss%20w%2Frd%3A1@db:5432/x"
	r := newRedactor(dsn, pw)
	for in, want := range map[string]string{
		"failed: " + dsn: "failed: " + redacted,
		"echo " + pw + " and p%40ss%20w%2Frd%3A1":                "echo " + redacted + " and " + redacted,
		"p%40ss+w%2Frd%3A1":                                      redacted,
		"cannot parse postgres://bob:hunter2@h/db":               "cannot parse postgres://bob:" + redacted + "@h/db",
		"host=h password=hunter2 user=bob":                       "host=h password=" + redacted + " user=bob",
		"host=h password='hun ter2' user=bob":                    "host=h password=" + redacted + " user=bob",
		"dsn bob:hunter2@tcp(h:3306)/db":                         "dsn bob:" + redacted + "@tcp(h:3306)/db",
		"Access denied for user 'bob'@'h' (using password: YES)": "Access denied for user 'bob'@'h' (using password: YES)",
	} {
		g := NewWithT(t)
		g.Expect(r.clean(in)).To(Equal(want), "clean(%q)", in)
	}

	g := NewWithT(t)
	err := r.scrub(fmt.Errorf("dial %s: %w", dsn, context.DeadlineExceeded))
	g.Expect(err.Error()).To(Equal("dial " + redacted + ": context deadline exceeded"))
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue())
	inner := errors.New("driver says " + pw)
	err = r.scrub(fmt.Errorf("wrapped: %w", inner))
	g.Expect(errors.Is(err, inner)).To(BeFalse(), "the driver's error is not reachable")
	g.Expect(errors.Unwrap(err)).To(BeNil())
	g.Expect(r.scrub(nil)).To(BeNil())
}
