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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/lockwarden/lockwarden/internal/backends/zookeeper"
)

// observePeriod is how often the observer reads a key it cannot watch.
const observePeriod = 25 * time.Millisecond

// observer keeps the backend's own view of each lock key over time (KeyTimeline), read through
// the backend's protocol on a connection of the harness's own: a read every observePeriod, and,
// where the store can push changes (etcd keys, ZooKeeper nodes, the built-in backend's Leases), a
// watch that also catches a holder replaced by another between two reads, and on etcd and
// ZooKeeper an exclusive hold beside places or more places than the lock has.
type observer struct {
	reader backendReader
	// etcd and zk, when set, are watched for every key besides the reads.
	etcd *clientv3.Client
	zk   *zk.Conn
	// places is the locks' number of places (maxHolders), which the watches check the store's
	// places against.
	places int

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
		go o.watchZooKeeperPlaces(ctx, o.zk, key)
	}
}

// add records s on key's timeline, its holders given as claim identities.
func (o *observer) add(key string, s KeyState) {
	v := s.view().withIdentities(holderIdentity)
	s.Holder, s.Places = v.Holder, v.Places
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

// watchEtcd follows key and its places (one watch over a range that holds both, so that events
// come in revision order), from a read of both at one revision: after every revision the key's
// holds are recorded, and the store is checked (etcdShadow): a put that replaces one exclusive
// holder's value with another's (no delete between), an exclusive hold beside places, or more
// places than the lock has, means the store let too many identities hold the key at once.
func (o *observer) watchEtcd(ctx context.Context, key string) {
	prefix := etcdPlacePrefix(key)
	// Place keys sort before lock keys ("lockwarden-" < "lockwarden/"): [prefix, key+"\x00")
	// holds the key and its places, and other keys, which the shadow ignores.
	end := key + "\x00"
	for ctx.Err() == nil {
		resp, err := o.etcd.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())).Commit()
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		shadow := newEtcdShadow(key)
		for _, op := range resp.Responses {
			for _, kv := range op.GetResponseRange().GetKvs() {
				shadow.apply(string(kv.Key), string(kv.Value), false, kv.ModRevision)
			}
		}
		rev := resp.Header.Revision
		o.recordEtcd(key, shadow, time.Now(), rev)
		wctx, cancel := context.WithCancel(ctx)
		for wresp := range o.etcd.Watch(wctx, prefix, clientv3.WithRange(end), clientv3.WithRev(rev+1)) {
			if wresp.Err() != nil {
				break // compacted, or the watch was cancelled: read again
			}
			now := time.Now()
			for i, ev := range wresp.Events {
				rev = ev.Kv.ModRevision
				if p := shadow.apply(string(ev.Kv.Key), string(ev.Kv.Value), ev.Type == clientv3.EventTypeDelete, rev); p != "" {
					o.overlap(key, p)
				}
				// A transaction's events share its revision: judge the key after the last.
				if i+1 == len(wresp.Events) || wresp.Events[i+1].Kv.ModRevision != rev {
					o.recordEtcd(key, shadow, now, rev)
				}
			}
		}
		cancel()
		sleepCtx(ctx, 100*time.Millisecond) // the watch ended (server restarted): start again
	}
}

// recordEtcd records the shadow's view of key at, and what it finds wrong at revision rev.
func (o *observer) recordEtcd(key string, shadow *etcdShadow, at time.Time, rev int64) {
	for _, p := range shadow.problems(o.places, rev) {
		o.overlap(key, p)
	}
	v := shadow.view()
	o.add(key, KeyState{At: at, Known: true, Holder: v.Holder, Places: v.Places})
}

// overlap records a moment at which the store itself let too many identities hold key.
func (o *observer) overlap(key, what string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	tl := o.timelines[key]
	tl.Overlaps = append(tl.Overlaps, what)
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
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

// watchRecords follows the built-in backend's lock records (the DistributedLocks'
// status.holders) in the API server's etcd, every change in revision order, each judged by the
// session Lease as it stood at that change's revision. A record's one compare-and-swap writes all
// its holders, so the store's own rule keeps two exclusive holders out of one key; what the
// watch adds is every change of holder, including those between two reads, for the check of
// claims against the backend's view, read where the API server stored it.
func (o *observer) watchRecords(ctx context.Context, reader registryReader) {
	rev := int64(0) // the revision the watch resumes after; 0: read the current one first
	for ctx.Err() == nil {
		if rev == 0 {
			resp, err := reader.etcd.Get(ctx, registryLocksPrefix(""), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			rev = resp.Header.Revision
		}
		watchCtx, stop := context.WithCancel(ctx)
		for a := range dateWatchOnArrival(reader.etcd.Watch(watchCtx, registryLocksPrefix(""), clientv3.WithPrefix(), clientv3.WithRev(rev+1))) {
			if err := a.resp.Err(); err != nil {
				if a.resp.CompactRevision != 0 {
					rev = 0 // the history is gone: start again from now
				}
				break
			}
			for _, ev := range a.resp.Events {
				o.recordChange(ctx, reader, ev, a.at)
				rev = ev.Kv.ModRevision
			}
		}
		stop()
	}
}

// watchArrival is an etcd watch response and when it arrived.
type watchArrival struct {
	resp clientv3.WatchResponse
	at   time.Time
}

// dateWatchOnArrival is dateOnArrival for an etcd watch: each change is judged with a read of the
// session, and must not be dated after the reads for the changes before it.
func dateWatchOnArrival(responses clientv3.WatchChan) <-chan watchArrival {
	out := make(chan watchArrival, 4096)
	go func() {
		defer close(out)
		for wr := range responses {
			out <- watchArrival{resp: wr, at: time.Now()}
		}
	}()
	return out
}

// recordChange adds one stored change of a lock record, arrived at now, to its key's timeline.
func (o *observer) recordChange(ctx context.Context, reader registryReader, ev *clientv3.Event, now time.Time) {
	stored := string(ev.Kv.Key)
	rest := strings.TrimPrefix(stored, registryLocksPrefix(""))
	ns, name, _ := strings.Cut(rest, "/")
	key := "lockwarden/" + ns + "/" + name // the built-in backend's key for a namespaced lock
	o.mu.Lock()
	tl := o.timelines[key]
	o.mu.Unlock()
	if tl == nil {
		return
	}
	if ev.Type == clientv3.EventTypeDelete {
		o.add(key, KeyState{At: now, Known: true, Revision: ev.Kv.ModRevision})
		return
	}
	l, err := decodeLockRecord(ev.Kv.Value)
	if err != nil {
		o.overlap(key, fmt.Sprintf("the stored record %s at revision %d cannot be read: %v", stored, ev.Kv.ModRevision, err))
		return
	}
	session, err := reader.sessionAt(ctx, ev.Kv.ModRevision)
	if err != nil {
		return // a state the harness cannot judge is left out, as a read that failed
	}
	v := recordView(l, session, now)
	o.add(key, KeyState{At: now, Known: v.Known, Holder: v.Holder, Places: v.Places, Revision: ev.Kv.ModRevision})
}

// revisionOf reads a resourceVersion as the etcd revision the API server gives it; 0 when it is
// not one. Clients may not compare resourceVersions in general; the harness may, since it
// starts the API server and its etcd itself, and uses them only to order the records' and the
// claims' writes (arrivalOfStateAt).
func revisionOf(resourceVersion string) int64 {
	n, err := strconv.ParseInt(resourceVersion, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
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
	var prev string // the holder the node last showed; "" when there was none
	var prevCzxid int64
	var prevValidUntil time.Time
	for ctx.Err() == nil {
		data, stat, ch, err := conn.GetW(path)
		if errors.Is(err, zk.ErrNoNode) {
			prev = ""
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
		holder, validUntil, forever := zkNodeHolder(data, stat.Mtime)
		if forever {
			// Not lockwarden's record: lockwarden never writes over such a node.
			validUntil = time.UnixMilli(stat.Mtime)
		}
		// The replacement's mtime is when the server applied it, on the same clock as the
		// previous record's validity.
		replacedAt := time.UnixMilli(stat.Mtime)
		if prev != "" && stat.Czxid == prevCzxid && prev != holder && prevValidUntil.After(replacedAt) {
			o.overlap(key, fmt.Sprintf("ZooKeeper node %s: holder %s replaced by %s at %s while %s's record was valid until %s (two holders at once)",
				path, prev, holder, replacedAt.Format(time.StampMilli), prev, prevValidUntil.Format(time.StampMilli)))
		}
		prev, prevCzxid, prevValidUntil = holder, stat.Czxid, validUntil
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// watchZooKeeperPlaces follows key's places node (its children) and lock node with one-shot
// watches, re-armed after each event, and checks the store after each: never more identities
// holding place nodes than the lock has places (zkPlacesProblems), and never a lock node beside a
// place node. The backend creates a place only in a Multi that makes sure no lock node exists,
// and a lock node only in a Multi that deletes the places node (which fails while it has a
// child), so the two never exist at once, expired or not. The check lists the places, then reads
// the lock node, then each place listed again: a place listed before the lock node was seen and
// still there after it existed at that moment too.
func (o *observer) watchZooKeeperPlaces(ctx context.Context, conn *zk.Conn, key string) {
	guard := zkGuardPath(key)
	placesPath, lockPath := guard+"/"+zkPlacesNode, guard+"/"+zookeeper.LockNodeName
	for ctx.Err() == nil {
		_, _, lockCh, err := conn.ExistsW(lockPath)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		names, _, placesCh, err := conn.ChildrenW(placesPath)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			// No places node: wait for it (or the lock node) to change.
			_, _, ech, err := conn.ExistsW(placesPath)
			if err != nil {
				sleepCtx(ctx, 100*time.Millisecond)
				continue
			}
			placesCh = ech
		case err != nil:
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		default:
			for _, p := range zkPlacesProblems(placesPath, names, o.places) {
				o.overlap(key, p)
			}
			o.checkLockBesidePlaces(conn, key, lockPath, placesPath, names)
		}
		select {
		case <-lockCh:
		case <-placesCh:
		case <-ctx.Done():
			return
		}
	}
}

// checkLockBesidePlaces records an overlap when key's lock node exists while a place node that
// was listed (names, under placesPath) before it was read still exists after.
func (o *observer) checkLockBesidePlaces(conn *zk.Conn, key, lockPath, placesPath string, names []string) {
	if len(names) == 0 {
		return
	}
	exists, lockStat, err := conn.Exists(lockPath)
	if err != nil || !exists {
		return
	}
	for _, name := range names {
		if still, _, err := conn.Exists(placesPath + "/" + name); err == nil && still {
			o.overlap(key, fmt.Sprintf("ZooKeeper node %s (created at zxid %d) and place node %s/%s existed at once (an exclusive hold beside a place)",
				lockPath, lockStat.Czxid, placesPath, name))
			return
		}
	}
}
