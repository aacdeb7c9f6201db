//go:build reliability

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

package reliability

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// outsideIdentity is the value the outside client stores in the key it holds.
const outsideIdentity = "outside-client"

// releaseIfOwner is the standard owner-checked release of a Redis lock.
var releaseIfOwner = goredis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// outsideClient is a client outside lockwarden that holds a key on the same Redis with the
// standard protocol (SET key value NX PX ttl), as Redisson or a script on a VM would. docs/design.md
// §2 promises that lockwarden excludes it: no claim may be granted while it holds the key, and
// nothing lockwarden does may free its key. It checks the second itself, by reading its key
// every observePeriod while its lease runs.
type outsideClient struct {
	mu   sync.Mutex
	errs []string
	done chan struct{}
}

// holdOutside takes key for hold (retrying for a few seconds if it is busy) and watches it.
func holdOutside(ctx context.Context, c *goredis.Client, key string, hold time.Duration) *outsideClient {
	o := &outsideClient{done: make(chan struct{})}
	var since time.Time
	for deadline := time.Now().Add(5 * time.Second); ; {
		ok, err := c.SetNX(ctx, key, outsideIdentity, hold).Result()
		if err == nil && ok {
			since = time.Now()
			break
		}
		if time.Now().After(deadline) {
			o.errs = append(o.errs, fmt.Sprintf("the outside client could not take %s: %v", key, err))
			close(o.done)
			return o
		}
		time.Sleep(50 * time.Millisecond)
	}
	go func() {
		defer close(o.done)
		// Redis counts the lease from when it ran the SET, which is before since: stop checking
		// a little before since + hold.
		until := since.Add(hold - 100*time.Millisecond)
		for time.Now().Before(until) && ctx.Err() == nil {
			v, err := c.Get(ctx, key).Result()
			switch {
			case errors.Is(err, goredis.Nil):
				o.fail("the outside client's key %s was deleted %s into its %s lease", key, time.Since(since).Round(time.Millisecond), hold)
				return
			case err == nil && v != outsideIdentity:
				o.fail("the outside client's key %s was taken by %q %s into its %s lease", key, v, time.Since(since).Round(time.Millisecond), hold)
				return
			}
			time.Sleep(observePeriod)
		}
		_ = releaseIfOwner.Run(context.WithoutCancel(ctx), c, []string{key}, outsideIdentity).Err()
	}()
	return o
}

func (o *outsideClient) fail(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, fmt.Sprintf(format, args...))
}

// problems waits until the hold is over and returns what went wrong with it.
func (o *outsideClient) problems() []string {
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.errs...)
}
