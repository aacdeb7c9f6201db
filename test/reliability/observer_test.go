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
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/zookeeper"
)

// observePeriod is how often the observer reads a key it cannot watch.
const observePeriod = 25 * time.Millisecond

// observer keeps the backend's own view of each lock key over time (KeyTimeline), read through
// the backend's protocol on a connection of the harness's own: a read every observePeriod, and,
// where the store can push changes (etcd keys, ZooKeeper nodes, the built-in backend's Leases), a
// watch that also catches a holder replaced by another between two reads.
type observer struct {
	reader backendReader
	// etcd and zk, when set, are watched for every key besides the reads.
	etcd *clientv3.Client
	zk   *zk.Conn

	mu        sync.Mutex
	timelines map[string]*KeyTimeline // by key
}

func newObserver(reader backendReader, etcd *clientv3.Client) *observer {
	return &observer{reader: reader, etcd: etcd, timelines: map[string]*KeyTimeline{}}
}

// watch starts observing lock's key until ctx ends.
func (o *observer) watch(ctx context.Context, lock, key string) {
	o.mu.Lock()
	o.timelines[key] = &KeyTimeline{Lock: lock, Key: key}
	o.mu.Unlock()
	go o.poll(ctx, key)
	if o.etcd != nil {
		go o.watchEtcd(ctx, key)
	}
	if o.zk != nil {
		go o.watchZooKeeper(ctx, o.zk, key)
	}
}

func (o *observer) add(key string, s KeyState) {
	s.Holder = holderIdentity(s.Holder)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.timelines[key].Add(s)
}

func (o *observer) poll(ctx context.Context, key string) {
	t := time.NewTicker(observePeriod)
	defer t.Stop()
	for {
		// A read that shows a holder proves it held at some moment between the read's start and
		// its end; the state is dated at the start and marked Polled, so that the checker does
		// not stretch it to the next read (KeyState.Polled).
		at := time.Now()
		v := o.reader.read(ctx, key)
		if ctx.Err() != nil {
			return
		}
		o.add(key, KeyState{At: at, Known: v.Known, Holder: v.Holder, Places: v.Places, Polled: true})
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
		// The reads and the watch date their states independently: put them in time order.
		c.States = append([]KeyState(nil), tl.States...)
		slices.SortStableFunc(c.States, func(a, b KeyState) int { return a.At.Compare(b.At) })
		c.Overlaps = append([]string(nil), tl.Overlaps...)
		c.End = end
		out = append(out, c)
	}
	return out
}

// watchRecords follows the built-in backend's lock records (the DistributedLocks' status.holder,
// in the order the API server wrote them), judged by the session Lease as it is when each change
// arrives. A record has one holder field, so two identities cannot hold one key at once by the
// store's own rule; what the watch adds is every change of holder, including those between two
// reads, for the check of claims against the backend's view.
func (o *observer) watchRecords(ctx context.Context, c client.WithWatch) {
	reader := recordReader{c: c}
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			var list locksv1alpha1.DistributedLockList
			if err := c.List(ctx, &list); err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			rv = list.ResourceVersion
		}
		w, err := c.Watch(ctx, &locksv1alpha1.DistributedLockList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for a := range dateOnArrival(w.ResultChan()) {
			ev := a.event
			l, ok := ev.Object.(*locksv1alpha1.DistributedLock)
			if !ok {
				rv = "" // an error (e.g. the history expired): list again
				break
			}
			rv = l.ResourceVersion
			now := a.at
			key := l.BackendKey(locksv1alpha1.KeyPolicyNamespaced) // the built-in backend
			o.mu.Lock()
			tl := o.timelines[key]
			o.mu.Unlock()
			if tl == nil {
				continue
			}
			if ev.Type == watch.Deleted {
				o.add(key, KeyState{At: now, Known: true})
				continue
			}
			session, ok := reader.session(ctx)
			if !ok {
				continue
			}
			v := recordView(l, session, now)
			o.add(key, KeyState{At: now, Known: v.Known, Holder: v.Holder, Places: v.Places})
		}
		w.Stop()
	}
}

// arrival is a watch event and when it arrived.
type arrival struct {
	event watch.Event
	at    time.Time
}

// dateOnArrival dates each event of events when it arrives, and hands it on. The record watch
// reads the session Lease for every event; dated after that read, an event that arrived while
// the previous one was being judged would be dated late by the read's latency, and a claim's
// Held, which the controller writes after the lock record, could then seem to come before it.
// The channel it returns is closed once events is, after every event already dated.
func dateOnArrival(events <-chan watch.Event) <-chan arrival {
	out := make(chan arrival, 4096)
	go func() {
		defer close(out)
		for ev := range events {
			out <- arrival{event: ev, at: time.Now()}
		}
	}()
	return out
}

// watchZooKeeper follows key's lock node with one-shot watches, re-armed after each event. A
// change of the node's data from one holder's record to another's, on the same node (the same
// creation zxid: not a delete and a create in between) and while the first record was still
// valid (its mtime plus TTL, by the server's clock, before the replacing write's mtime), means two
// identities held the key at once.
func (o *observer) watchZooKeeper(ctx context.Context, conn *zk.Conn, key string) {
	path := zkGuardPath(key) + "/" + zookeeper.LockNodeName
	var prev *zkRecord
	var prevCzxid int64
	var prevValidUntil time.Time
	for ctx.Err() == nil {
		data, stat, ch, err := conn.GetW(path)
		if errors.Is(err, zk.ErrNoNode) {
			prev = nil
			exists, _, ech, err := conn.ExistsW(path)
			switch {
			case err != nil:
				time.Sleep(100 * time.Millisecond)
			case !exists:
				select {
				case <-ech:
				case <-ctx.Done():
				}
			}
			continue
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var rec zkRecord
		if json.Unmarshal(data, &rec) != nil || rec.Holder == "" {
			rec = zkRecord{Holder: string(data)} // not lockwarden's record: held by its data
		}
		// The replacement's mtime is when the server applied it, on the same clock as the
		// previous record's validity.
		replacedAt := time.UnixMilli(stat.Mtime)
		if prev != nil && stat.Czxid == prevCzxid && prev.Holder != rec.Holder && prevValidUntil.After(replacedAt) {
			o.mu.Lock()
			tl := o.timelines[key]
			tl.Overlaps = append(tl.Overlaps, fmt.Sprintf("ZooKeeper node %s: holder %s replaced by %s at %s while %s's record was valid until %s (two holders at once)",
				path, prev.Holder, rec.Holder, replacedAt.Format(time.StampMilli), prev.Holder, prevValidUntil.Format(time.StampMilli)))
			o.mu.Unlock()
		}
		prev, prevCzxid, prevValidUntil = &rec, stat.Czxid, zkValidUntil(rec, stat)
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}
