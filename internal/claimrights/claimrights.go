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

// Package claimrights answers whether a service account may create LockClaims in its namespace,
// which is the rule for the claims the controller makes on a workload's behalf (docs/design.md §3,
// Pods and Workloads; docs/security.md, Inside a namespace). Anyone who may create a pod may run
// it as any service account of its namespace, and so act as that account; an annotation that
// asks for a lock is honoured only when that account could have made the claim itself (with
// lockctl), so the annotation is a convenience and never a way around RBAC.
//
// The API server's authorizer decides, through a SubjectAccessReview. Answers are kept for a
// short while, so that a Deployment scaled to a thousand pods costs one review, not a thousand;
// a refusal is asked again once it is that old, so that a RoleBinding made afterwards takes
// effect without restarting anything.
package claimrights

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// DefaultTTL is how long an answer is kept: how soon a new RoleBinding (or a removed one) is
// seen for the next workload that asks.
const DefaultTTL = 10 * time.Second

// DefaultServiceAccount is the account of a pod that names none.
const DefaultServiceAccount = "default"

// Checker answers for service accounts, keeping each answer for TTL.
type Checker struct {
	// Client creates SubjectAccessReviews (authorization.k8s.io, create).
	Client client.Client
	// TTL is how long an answer is kept (default DefaultTTL).
	TTL time.Duration
	// Clock tells the answers' ages (default: the real clock).
	Clock clock.PassiveClock

	mu      sync.Mutex
	answers map[types.NamespacedName]answer
}

// answer is what the authorizer said for one account, and when.
type answer struct {
	allowed bool
	reason  string
	at      time.Time
}

// Verdict is the answer for one account.
type Verdict struct {
	// Allowed says whether the account may create LockClaims in its namespace.
	Allowed bool
	// Reason is the authorizer's reason, when it gave one (for the event of a refusal).
	Reason string
	// RetryAfter is when to ask again after a refusal: when the answer is no longer kept.
	RetryAfter time.Duration
}

// MayClaim says whether serviceAccount (DefaultServiceAccount when empty) of namespace may create
// LockClaims there.
func (c *Checker) MayClaim(ctx context.Context, namespace, serviceAccount string) (Verdict, error) {
	if serviceAccount == "" {
		serviceAccount = DefaultServiceAccount
	}
	key := types.NamespacedName{Namespace: namespace, Name: serviceAccount}
	now := c.clock().Now()
	c.mu.Lock()
	a, ok := c.answers[key]
	c.mu.Unlock()
	if !ok || !fresh(a.at, now, c.ttl()) {
		review := Review(namespace, serviceAccount)
		if err := c.Client.Create(ctx, review); err != nil {
			return Verdict{}, fmt.Errorf("asking whether service account %s/%s may create LockClaims: %w", namespace, serviceAccount, err)
		}
		a = answer{allowed: review.Status.Allowed, reason: review.Status.Reason, at: now}
		c.mu.Lock()
		if c.answers == nil {
			c.answers = map[types.NamespacedName]answer{}
		}
		c.answers[key] = a
		c.mu.Unlock()
	}
	return Verdict{Allowed: a.allowed, Reason: a.reason, RetryAfter: retryAfter(a.at, now, c.ttl())}, nil
}

// Review is the SubjectAccessReview that asks whether serviceAccount of namespace may create
// LockClaims there: the user and groups the API server gives that account's tokens.
func Review(namespace, serviceAccount string) *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + namespace + ":" + serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace,
			Verb:      "create",
			Group:     locksv1alpha1.GroupVersion.Group,
			Resource:  "lockclaims",
		},
	}}
}

// fresh says whether an answer given at at is still kept at now.
func fresh(at, now time.Time, ttl time.Duration) bool {
	return now.Sub(at) < ttl
}

// retryAfter is how long until an answer given at at is no longer kept (at least a second, so that
// a caller never spins).
func retryAfter(at, now time.Time, ttl time.Duration) time.Duration {
	return max(at.Add(ttl).Sub(now), time.Second)
}

func (c *Checker) ttl() time.Duration {
	if c.TTL > 0 {
		return c.TTL
	}
	return DefaultTTL
}

func (c *Checker) clock() clock.PassiveClock {
	if c.Clock != nil {
		return c.Clock
	}
	return clock.RealClock{}
}
