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

package claimrights

import (
	"context"
	"errors"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestFreshAndRetryAfter(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		age       time.Duration
		wantFresh bool
		wantRetry time.Duration
	}{
		{"just given", 0, true, 10 * time.Second},
		{"half its life", 5 * time.Second, true, 5 * time.Second},
		{"a moment before it goes", 9500 * time.Millisecond, true, time.Second},
		{"as old as the TTL: asked again", 10 * time.Second, false, time.Second},
		{"long gone", time.Hour, false, time.Second},
	} {
		if got := fresh(at, at.Add(tc.age), 10*time.Second); got != tc.wantFresh {
			t.Errorf("%s: fresh %v, want %v", tc.name, got, tc.wantFresh)
		}
		if got := retryAfter(at, at.Add(tc.age), 10*time.Second); got != tc.wantRetry {
			t.Errorf("%s: retry after %v, want %v", tc.name, got, tc.wantRetry)
		}
	}
}

func TestReviewAsksAsTheAccount(t *testing.T) {
	r := Review("team-a", "web")
	attrs := r.Spec.ResourceAttributes
	if r.Spec.User != "system:serviceaccount:team-a:web" || attrs.Namespace != "team-a" || attrs.Verb != "create" ||
		attrs.Group != "locks.lockwarden.io" || attrs.Resource != "lockclaims" {
		t.Errorf("review %+v, attributes %+v", r.Spec, attrs)
	}
	want := []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"}
	if len(r.Spec.Groups) != len(want) {
		t.Fatalf("groups %v, want %v", r.Spec.Groups, want)
	}
	for i := range want {
		if r.Spec.Groups[i] != want[i] {
			t.Errorf("groups %v, want %v", r.Spec.Groups, want)
		}
	}
}

// authorizer answers reviews as an API server would for the accounts in allowed, and counts them.
func authorizer(allowed map[string]bool, asked *[]string, fail *error) client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			if *fail != nil {
				return *fail
			}
			r := obj.(*authorizationv1.SubjectAccessReview)
			*asked = append(*asked, r.Spec.User)
			r.Status.Allowed = allowed[r.Spec.User]
			if !r.Status.Allowed {
				r.Status.Reason = "no RBAC policy matched"
			}
			return nil
		},
	}).WithScheme(runtime.NewScheme()).Build()
}

func TestMayClaimKeepsAnswersForTheirTTL(t *testing.T) {
	ctx := context.Background()
	var asked []string
	var fail error
	allowed := map[string]bool{"system:serviceaccount:team-a:web": true}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	c := &Checker{Client: authorizer(allowed, &asked, &fail), TTL: 10 * time.Second, Clock: clk}

	v, err := c.MayClaim(ctx, "team-a", "web")
	if err != nil || !v.Allowed {
		t.Fatalf("web: %+v, %v; want allowed", v, err)
	}
	v, err = c.MayClaim(ctx, "team-a", "")
	if err != nil || v.Allowed || v.Reason != "no RBAC policy matched" || v.RetryAfter != 10*time.Second {
		t.Fatalf("the default account: %+v, %v; want refused with the reason, asked again in 10s", v, err)
	}
	if len(asked) != 2 || asked[1] != "system:serviceaccount:team-a:default" {
		t.Fatalf("asked %v; want web, then the pod without an account as default", asked)
	}

	// A thousand pods of one account within the TTL: no more reviews.
	clk.SetTime(clk.Now().Add(4 * time.Second))
	for range 1000 {
		if v, _ := c.MayClaim(ctx, "team-a", "web"); !v.Allowed {
			t.Fatal("web refused from the kept answer")
		}
	}
	// The same account name in another namespace is another account.
	if v, _ := c.MayClaim(ctx, "team-b", "web"); v.Allowed {
		t.Error("team-b's web allowed by team-a's answer")
	}
	if len(asked) != 3 {
		t.Fatalf("asked %v; want one review each for team-a/web, team-a/default, team-b/web", asked)
	}

	// Once the TTL has passed, a RoleBinding made meanwhile is seen.
	allowed["system:serviceaccount:team-a:default"] = true
	if v, _ := c.MayClaim(ctx, "team-a", "default"); v.Allowed || v.RetryAfter != 6*time.Second {
		t.Fatalf("before the TTL: %+v; want still refused, asked again in 6s", v)
	}
	clk.SetTime(clk.Now().Add(6 * time.Second))
	if v, _ := c.MayClaim(ctx, "team-a", "default"); !v.Allowed {
		t.Fatalf("after the TTL: %+v; want allowed", v)
	}

	// An error is returned, not taken for an answer, and nothing is kept.
	fail = errors.New("connection refused")
	clk.SetTime(clk.Now().Add(time.Minute))
	if _, err := c.MayClaim(ctx, "team-a", "web"); err == nil {
		t.Fatal("no error when the review could not be made")
	}
	fail = nil
	if v, err := c.MayClaim(ctx, "team-a", "web"); err != nil || !v.Allowed {
		t.Fatalf("after the error: %+v, %v", v, err)
	}
}
