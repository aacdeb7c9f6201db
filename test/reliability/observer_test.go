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
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// observePeriod is how often the observer reads a key it cannot watch.
const observePeriod = 25 * time.Millisecond

// observer keeps the backend's own view of each lock key over time (KeyTimeline), read through
// the backend's protocol on a connection of the harness's own: a read every observePeriod, and,
// where the store can push changes (etcd), a watch that also catches a holder replaced by another
// between two reads.
type observer struct {
	reader backendReader
	// etcd, when set, is watched for every key besides the reads.
	etcd *clientv3.Client

	mu        sync.Mutex
	timelines map[string]*KeyTimeline // by key
	wg        sync.WaitGroup
}

func newObserver(reader backendReader, etcd *clientv3.Client) *observer {
	return &observer{reader: reader, etcd: etcd, timelines: map[string]*KeyTimeline{}}
}

// watch starts observing lock's key until ctx ends.
func (o *observer) watch(ctx context.Context, lock, key string) {
	o.mu.Lock()
	o.timelines[key] = &KeyTimeline{Lock: lock, Key: key}
	o.mu.Unlock()
	o.wg.Go(func() { o.poll(ctx, key) })
	if o.etcd != nil {
		o.wg.Go(func() { o.watchEtcd(ctx, key) })
	}
}

func (o *observer) add(key string, s KeyState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.timelines[key].Add(s)
}

func (o *observer) poll(ctx context.Context, key string) {
	t := time.NewTicker(observePeriod)
	defer t.Stop()
	for {
		v := o.reader.read(ctx, key)
		if ctx.Err() != nil {
			return
		}
		o.add(key, KeyState{At: time.Now(), Known: v.Known, Holder: v.Holder})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchEtcd follows key's events: a put that replaces one holder's value with another's (no
// delete between) means the store let two identities hold the key at once.
func (o *observer) watchEtcd(ctx context.Context, key string) {
	for ctx.Err() == nil {
		for resp := range o.etcd.Watch(ctx, key, clientv3.WithPrevKV()) {
			for _, ev := range resp.Events {
				now := time.Now()
				switch {
				case ev.Type == clientv3.EventTypeDelete:
					o.add(key, KeyState{At: now, Known: true})
				case ev.PrevKv != nil && string(ev.PrevKv.Value) != string(ev.Kv.Value):
					o.mu.Lock()
					tl := o.timelines[key]
					tl.Overlaps = append(tl.Overlaps, fmt.Sprintf("etcd key %s: %q replaced by %q at revision %d without a delete (two holders at once)",
						key, ev.PrevKv.Value, ev.Kv.Value, ev.Kv.ModRevision))
					o.mu.Unlock()
					o.add(key, KeyState{At: now, Known: true, Holder: string(ev.Kv.Value)})
				default:
					o.add(key, KeyState{At: now, Known: true, Holder: string(ev.Kv.Value)})
				}
			}
		}
		select { // the watch ended (server restarted): start again
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// results stops nothing; it returns a copy of every timeline, each ending at end.
func (o *observer) results(end time.Time) []KeyTimeline {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]KeyTimeline, 0, len(o.timelines))
	for _, tl := range o.timelines {
		c := *tl
		c.States = append([]KeyState(nil), tl.States...)
		c.Overlaps = append([]string(nil), tl.Overlaps...)
		c.End = end
		out = append(out, c)
	}
	return out
}
