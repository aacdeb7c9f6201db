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
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// These examples need a cluster with lockwarden installed, so they are compiled but not run.

// migrate stands for work that a lock protects: it passes the fencing token to the resource, which
// refuses writers with an older one, and stops when ctx ends.
func migrate(ctx context.Context, fencingToken int64) error {
	fmt.Println("migrating with fencing token", fencingToken)
	return ctx.Err()
}

// Acquire waits for the lock; the Hold's context ends if the lock is lost.
func ExampleClient_Acquire() {
	c, err := lockclient.New(ctrl.GetConfigOrDie())
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	hold, err := c.Acquire(ctx, lockclient.Request{
		Namespace: "team-a",
		Lock:      "db-migrate",
		Timeout:   10 * time.Minute,
		// The pod this process runs in, from the downward API; nil for a detached claim.
		Pod: &lockclient.Pod{Name: os.Getenv("POD_NAME"), UID: types.UID(os.Getenv("POD_UID"))},
	})
	switch {
	case errors.Is(err, lockclient.ErrTimedOut):
		log.Fatal("someone held the lock for more than 10 minutes: ", err)
	case err != nil:
		log.Fatal(err)
	}
	defer func() {
		if err := hold.Release(context.Background()); err != nil {
			log.Print(err)
		}
	}()

	if err := migrate(hold.Context(), hold.FencingToken); err != nil {
		if lost := hold.Err(); lost != nil {
			log.Print("stopped: ", lost) // an ErrLost *Error says why
		}
		log.Print(err)
	}
}

// TryAcquire takes the lock only if no one else holds it or waits for it.
func ExampleClient_TryAcquire() {
	c, err := lockclient.New(ctrl.GetConfigOrDie())
	if err != nil {
		log.Fatal(err)
	}
	hold, err := c.TryAcquire(context.Background(), lockclient.Request{Namespace: "team-a", Lock: "nightly-report"})
	switch {
	case errors.Is(err, lockclient.ErrLockBusy):
		fmt.Println("another report is running; skipping this one")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer func() { _ = hold.Release(context.Background()) }()
	fmt.Println("writing the report with fencing token", hold.FencingToken)
}

// WithLock takes the lock, runs a function whose context ends if the lock is lost, and releases
// the lock after it, also when the function panics.
func ExampleWithLock() {
	c, err := lockclient.New(ctrl.GetConfigOrDie())
	if err != nil {
		log.Fatal(err)
	}
	req := lockclient.Request{Namespace: "team-a", Lock: "db-migrate", Timeout: 10 * time.Minute}
	err = lockclient.WithLock(context.Background(), c, req, func(ctx context.Context, hold *lockclient.Hold) error {
		return migrate(ctx, hold.FencingToken)
	})
	if errors.Is(err, lockclient.ErrLost) {
		log.Fatal("the lock was lost while migrating; the migration may be incomplete: ", err)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// With Try, WithLock skips the function when the lock is taken.
func ExampleTry() {
	c, err := lockclient.New(ctrl.GetConfigOrDie())
	if err != nil {
		log.Fatal(err)
	}
	req := lockclient.Request{Namespace: "team-a", Lock: "nightly-report"}
	err = lockclient.WithLock(context.Background(), c, req, func(ctx context.Context, hold *lockclient.Hold) error {
		return migrate(ctx, hold.FencingToken)
	}, lockclient.Try())
	if errors.Is(err, lockclient.ErrLockBusy) {
		fmt.Println("busy; try again tomorrow")
	}
}

// A Hold's context ends when its claim stops holding the lock, whatever the reason.
func ExampleHold_Context() {
	c, err := lockclient.New(ctrl.GetConfigOrDie())
	if err != nil {
		log.Fatal(err)
	}
	hold, err := c.Acquire(context.Background(), lockclient.Request{Namespace: "team-a", Lock: "leader"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = hold.Release(context.Background()) }()

	<-hold.Context().Done()
	var lost *lockclient.Error
	if errors.As(hold.Err(), &lost) {
		fmt.Printf("no longer the leader: claim %s is %s (%s)\n", lost.Claim, lost.Phase, lost.Reason)
	}
}
