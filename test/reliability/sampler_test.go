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
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	kbackend "github.com/lockwarden/lockwarden/internal/backends/kubernetes"
	"github.com/lockwarden/lockwarden/internal/identity"
)

// backendReader reads lock keys on a backend directly, through a connection of the harness's
// own that no fault proxy touches. Each backend's rule for "held" is its own protocol's, read
// from the store, not from the controller's code.
type backendReader interface {
	// read says who holds key now.
	read(ctx context.Context, key string) BackendView
	// held lists the keys under prefix that are held now, with their holders.
	held(ctx context.Context, prefix string) ([]BackendKey, error)
}

// identityReader reads through r and gives each holder (exclusive or of a place) as the claim
// identity it was derived from (package identity), so that the checkers compare backends'
// holders with claims' identities. A value lockwarden did not write stays as it is: a foreign
// holder.
type identityReader struct{ r backendReader }

func (i identityReader) read(ctx context.Context, key string) BackendView {
	return i.r.read(ctx, key).withIdentities(holderIdentity)
}

func (i identityReader) held(ctx context.Context, prefix string) ([]BackendKey, error) {
	keys, err := i.r.held(ctx, prefix)
	for j := range keys {
		keys[j].Holder = holderIdentity(keys[j].Holder)
	}
	return keys, err
}

// holderIdentity is the claim identity of a holder value lockwarden wrote, else the value.
func holderIdentity(value string) string {
	if _, id, ok := identity.Parse(value); ok {
		return id
	}
	return value
}

// readTimeout bounds one direct read, so that a paused backend does not stall the sampler.
const readTimeout = 300 * time.Millisecond

// redisReader: a key held exclusively is a string whose value is the holder identity, and
// exists only while its PX runs; a key held in shared places is a sorted set of identities
// (redisKeyRead.holding says which hold).
type redisReader struct{ c *goredis.Client }

func (r redisReader) read(ctx context.Context, key string) BackendView {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	h, err := readRedisNode(ctx, r.c, key)
	if err != nil {
		return BackendView{}
	}
	return h.view()
}

// readRedisNode reads key on one Redis node in one MULTI (so at one moment of the node): its
// type, its value or its places with their expiries, the place records and the node's clock.
func readRedisNode(ctx context.Context, c *goredis.Client, key string) (nodeHolding, error) {
	var typ *goredis.StatusCmd
	var get *goredis.StringCmd
	var members *goredis.ZSliceCmd
	var records *goredis.MapStringStringCmd
	var now *goredis.TimeCmd
	// EXEC answers each command on its own: GET fails on a sorted set and ZRANGE on a string,
	// and only the one the type names is read.
	_, _ = c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		typ = p.Type(ctx, key)
		get = p.Get(ctx, key)
		members = p.ZRangeWithScores(ctx, key, 0, -1)
		records = p.HGetAll(ctx, redisPlacesPrefix+key)
		now = p.Time(ctx)
		return nil
	})
	if err := errors.Join(typ.Err(), now.Err()); err != nil {
		return nodeHolding{}, err
	}
	read := redisKeyRead{typ: typ.Val(), nowMs: now.Val().UnixMilli()}
	switch read.typ {
	case "string":
		v, err := get.Result()
		if err != nil {
			return nodeHolding{}, err
		}
		read.value = v
	case "zset":
		zs, err := members.Result()
		if err != nil {
			return nodeHolding{}, err
		}
		for _, z := range zs {
			m, _ := z.Member.(string)
			read.members = append(read.members, redisMember{member: m, score: z.Score})
		}
		if read.records, err = records.Result(); err != nil {
			return nodeHolding{}, err
		}
	}
	return read.holding()
}

func (r redisReader) held(ctx context.Context, prefix string) ([]BackendKey, error) {
	keys, err := r.c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		return nil, err
	}
	return readHeld(ctx, r, "redis", keys)
}

// etcdReader: the lock key's value is its exclusive holder's identity, and each place is a key
// of its own under etcdPlacePrefix(key), named after its identity; every one of them lives as
// long as its holder's etcd lease, so a key that exists holds.
type etcdReader struct{ c *clientv3.Client }

func (r etcdReader) read(ctx context.Context, key string) BackendView {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	// One transaction, so the key and its places are read at one revision.
	resp, err := r.c.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(etcdPlacePrefix(key), clientv3.WithPrefix(), clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return BackendView{}
	}
	shadow := newEtcdShadow(key)
	for _, op := range resp.Responses {
		for _, kv := range op.GetResponseRange().GetKvs() {
			shadow.apply(string(kv.Key), string(kv.Value), false, kv.ModRevision)
		}
	}
	return shadow.view()
}

// held lists the lock keys under prefix and every place key (whose lock key is under prefix),
// at one revision.
func (r etcdReader) held(ctx context.Context, prefix string) ([]BackendKey, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	resp, err := r.c.Txn(ctx).Then(clientv3.OpGet(prefix, clientv3.WithPrefix()), clientv3.OpGet(etcdPlaceKeyPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return nil, err
	}
	var out []BackendKey
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		out = append(out, BackendKey{Key: string(kv.Key), Holder: string(kv.Value)})
	}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		if key, id, ok := etcdPlaceOf(string(kv.Key)); ok && strings.HasPrefix(key, prefix) {
			out = append(out, BackendKey{Key: key, Holder: id})
		}
	}
	return out, nil
}

// registryReader reads the built-in backend, whose holds are the DistributedLocks' own records
// (status.holders) kept alive by the controller's session Lease: a holder holds while, since its
// acquireTime, the session went no lease duration without a renewal, and until a lease duration
// after the later of its acquireTime and the session's renewTime. The rule is restated here from
// the package documentation (kubernetes.Records), not borrowed from its code, so that a bug there
// cannot hide from the check. It reads below the API server, from its etcd (registry.go), the
// record and the session at one revision, so that neither the API server's answers, which the
// controller also reads, nor a change between two reads stands between the check and the store.
type registryReader struct {
	etcd   *clientv3.Client
	leases leaseDecoder
}

// recordSessionName is the session Lease the harness's managers share (the manager's default).
const recordSessionName = "lockwarden-session"

// lockOfKey names the DistributedLock of a default key, "lockwarden/<namespace>/<name>".
func lockOfKey(key string) (client.ObjectKey, bool) {
	rest, ok := strings.CutPrefix(key, "lockwarden/")
	if !ok {
		return client.ObjectKey{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	return client.ObjectKey{Namespace: ns, Name: name}, ok
}

func (r registryReader) read(ctx context.Context, key string) BackendView {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	name, ok := lockOfKey(key)
	if !ok {
		return BackendView{}
	}
	locks, session, _, err := r.readAtOneRevision(ctx, clientv3.OpGet(registryLocksPrefix(name.Namespace)+name.Name))
	switch {
	case err != nil:
		return BackendView{}
	case len(locks) == 0:
		return BackendView{Known: true}
	}
	return recordView(locks[0], session, time.Now())
}

// readAtOneRevision reads the records get selects and the session Lease in one transaction, so
// at one revision, which it returns; the session is nil when there is none yet.
func (r registryReader) readAtOneRevision(ctx context.Context, get clientv3.Op) ([]*locksv1alpha1.DistributedLock, *coordinationv1.Lease, int64, error) {
	resp, err := r.etcd.Txn(ctx).Then(get, clientv3.OpGet(registryLeaseKey(controllerNamespace, recordSessionName))).Commit()
	if err != nil {
		return nil, nil, 0, err
	}
	var locks []*locksv1alpha1.DistributedLock
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		l, err := decodeLockRecord(kv.Value)
		if err != nil {
			return nil, nil, 0, err
		}
		locks = append(locks, l)
	}
	session, err := r.sessionIn(resp.Responses[1].GetResponseRange().Kvs)
	return locks, session, resp.Header.Revision, err
}

// sessionIn decodes the session Lease a read found; nil when it found none.
func (r registryReader) sessionIn(kvs []*mvccpb.KeyValue) (*coordinationv1.Lease, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	return r.leases.decode(kvs[0].Value)
}

// sessionAt reads the session Lease as it stood at revision rev.
func (r registryReader) sessionAt(ctx context.Context, rev int64) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	resp, err := r.etcd.Get(ctx, registryLeaseKey(controllerNamespace, recordSessionName), clientv3.WithRev(rev))
	if err != nil {
		return nil, err
	}
	return r.sessionIn(resp.Kvs)
}

// recordView is what lock's record holds at now, by session's renewals: every holder whose hold
// has not lapsed, a Shared one in a place, any other exclusively (the first, should there be
// more: the record's one compare-and-swap writes them all).
func recordView(lock *locksv1alpha1.DistributedLock, session *coordinationv1.Lease, now time.Time) BackendView {
	if session == nil || session.Spec.RenewTime == nil {
		return BackendView{Known: true}
	}
	var exclusive string
	var places []string
	ttl := time.Duration(lock.Spec.LeaseDurationSeconds) * time.Second
	for _, h := range lock.Status.CurrentHolders() {
		alive, ok := recordAlive(h.AcquireTime.Time, session, ttl, now)
		if !ok {
			return BackendView{}
		}
		switch {
		case !alive:
		case h.Mode == locksv1alpha1.LockModeShared:
			places = append(places, h.Identity)
		case exclusive == "":
			exclusive = h.Identity
		}
	}
	return placesView(exclusive, places)
}

// recordAlive says whether a record hold granted at acquired with ttl lives at now, by the
// session's renewals and the gaps it lists; ok is false when the session's annotations cannot be
// read.
func recordAlive(acquired time.Time, session *coordinationv1.Lease, ttl time.Duration, now time.Time) (alive, ok bool) {
	if since := session.Annotations[kbackend.CompleteSinceAnnotation]; since != "" {
		if t, err := time.Parse(time.RFC3339Nano, since); err != nil || acquired.Before(t) {
			return false, true
		}
	}
	if gaps := session.Annotations[kbackend.GapsAnnotation]; gaps != "" {
		for _, g := range strings.Split(gaps, ",") {
			from, to, _ := strings.Cut(g, "/")
			f, err1 := time.Parse(time.RFC3339Nano, from)
			t, err2 := time.Parse(time.RFC3339Nano, to)
			if err1 != nil || err2 != nil {
				return false, false
			}
			if f.Before(acquired) {
				f = acquired
			}
			if t.After(acquired) && t.Sub(f) >= ttl {
				return false, true // lapsed in a gap since the grant
			}
		}
	}
	last := session.Spec.RenewTime.Time
	if acquired.After(last) {
		last = acquired
	}
	return now.Before(last.Add(ttl)), true
}

func (r registryReader) held(ctx context.Context, prefix string) ([]BackendKey, error) {
	name, ok := lockOfKey(prefix + "x")
	if !ok {
		return nil, errors.New("registryReader: keys of the built-in backend start with lockwarden/<namespace>/")
	}
	locks, session, _, err := r.readAtOneRevision(ctx, clientv3.OpGet(registryLocksPrefix(name.Namespace), clientv3.WithPrefix()))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []BackendKey
	for _, l := range locks {
		if key := l.BackendKey(locksv1alpha1.KeyPolicyNamespaced); strings.HasPrefix(key, prefix) {
			out = append(out, heldKeys(key, recordView(l, session, now))...)
		}
	}
	return out, nil
}

// sampler lists a namespace's claims every period and, for each claim the list shows Held,
// reads its lock's key on the backend right after: the samples feed CheckBackendSamples (S4)
// and the snapshots CheckControllerExclusion.
type sampler struct {
	c      client.Client
	ns     string
	reader backendReader
	period time.Duration

	mu        sync.Mutex
	samples   []HeldSample
	snapshots []Snapshot
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.once(ctx)
	}
}

func (s *sampler) once(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var list locksv1alpha1.LockClaimList
	if err := s.c.List(lctx, &list, client.InNamespace(s.ns)); err != nil {
		return
	}
	snap := Snapshot{At: time.Now()}
	var samples []HeldSample
	for i := range list.Items {
		cl := &list.Items[i]
		for _, part := range claimParts(cl) {
			// A claim being deleted is released by its deletion: the controller hands the lock on
			// without writing its status again, and takes its finalizer off after.
			st := ClaimState{Lock: s.ns + "/" + part.LockName, Claim: cl.Name,
				Held:  cl.Status.Phase == locksv1alpha1.ClaimHeld && cl.DeletionTimestamp == nil,
				Token: part.FencingToken, Identity: cl.Status.HolderIdentity, Exclusive: cl.Spec.Mode == locksv1alpha1.LockModeExclusive}
			if part.ExpireTime != nil {
				st.ExpireTime = part.ExpireTime.Time
			}
			snap.Claims = append(snap.Claims, st)
			// A claim being deleted has been given up (its holder deleted it, or its pod is gone):
			// the controller releases the backend key first, and a leader paused right after
			// leaves it Held with the key free until the next leader's pass.
			if !st.Held {
				continue
			}
			view := s.reader.read(ctx, "lockwarden/"+s.ns+"/"+part.LockName)
			samples = append(samples, HeldSample{At: time.Now(), Lock: st.Lock, Claim: st.Claim, Token: st.Token,
				Identity: st.Identity, ExpireTime: st.ExpireTime, Backend: view})
		}
	}
	s.mu.Lock()
	s.samples = append(s.samples, samples...)
	s.snapshots = append(s.snapshots, snap)
	s.mu.Unlock()
}

func (s *sampler) results() ([]HeldSample, []Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]HeldSample(nil), s.samples...), append([]Snapshot(nil), s.snapshots...)
}

// orphans waits until TTL and a margin passed since the workload's last claim went, then lists
// the keys held on the backend for the namespace's locks and the claims the API shows Held.
func orphans(ctx context.Context, c client.Client, reader backendReader, ns string) ([]string, error) {
	var list locksv1alpha1.LockClaimList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	heldBy := map[string][]string{}
	for i := range list.Items {
		cl := &list.Items[i]
		if cl.Status.Phase == locksv1alpha1.ClaimHeld {
			for _, part := range claimParts(cl) {
				k := "lockwarden/" + ns + "/" + part.LockName
				heldBy[k] = append(heldBy[k], cl.Status.HolderIdentity)
			}
		}
	}
	keys, err := reader.held(ctx, "lockwarden/"+ns+"/")
	if err != nil {
		return nil, err
	}
	return CheckOrphans(keys, heldBy), nil
}

// claimParts are the locks claim cl asks for, each with the token and expiry the claim shows for
// it: its one lock with its own, or, for a claim of several locks, each of them with the entry
// of status.locks (none until it is Held).
func claimParts(cl *locksv1alpha1.LockClaim) []locksv1alpha1.ClaimLock {
	if len(cl.Spec.LockNames) == 0 {
		return []locksv1alpha1.ClaimLock{{LockName: cl.Spec.LockName, FencingToken: cl.Status.FencingToken, ExpireTime: cl.Status.ExpireTime}}
	}
	parts := make([]locksv1alpha1.ClaimLock, 0, len(cl.Spec.LockNames))
	for _, lock := range cl.Spec.Locks() {
		part := locksv1alpha1.ClaimLock{LockName: lock}
		for _, p := range cl.Status.Locks {
			if p.LockName == lock {
				part = p
			}
		}
		parts = append(parts, part)
	}
	return parts
}
