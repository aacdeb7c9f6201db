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

package zookeeper_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	. "github.com/onsi/gomega"

	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/zookeeper"
	"github.com/lockwarden/lockwarden/internal/testutil/zktest"
)

// Places are ephemeral children of the key's places node, named by the escaped identity; an
// exclusive hold removes the places node with the last place, and the lock node of a client
// outside lockwarden refuses places.
func TestPlacesLayout(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := zktest.Start(t)
	b := newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}})
	raw := rawConn(t, srv.Addr())
	guard := zookeeper.DefaultRoot + "/" + url.PathEscape("team/a")
	places := guard + "/" + zookeeper.PlacesNodeName

	l, err := b.TryAcquireShared(ctx, "team/a", "pod/a;1", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	names, _, err := raw.Children(places)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(HaveLen(1))
	g.Expect(names[0]).To(HavePrefix(url.PathEscape("pod/a;1") + ";"))
	data, stat, err := raw.Get(places + "/" + names[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(ContainSubstring(`"holder":"pod/a;1"`))
	g.Expect(stat.EphemeralOwner).NotTo(BeZero(), "a place is ephemeral")
	_, _, err = raw.Get(guard + "/" + zookeeper.LockNodeName)
	g.Expect(err).To(MatchError(zk.ErrNoNode), "a key held in places has no lock node")

	g.Expect(b.Release(ctx, l)).To(Succeed())
	_, err = b.TryAcquire(ctx, "team/a", "writer", holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = raw.Get(places)
	g.Expect(err).To(MatchError(zk.ErrNoNode), "the exclusive acquire deleted the places node")

	// A client outside lockwarden holds a key with a lock node of its own, without a record.
	foreign := zookeeper.DefaultRoot + "/" + url.PathEscape("foreign")
	_, err = raw.Create(foreign, nil, 0, zk.WorldACL(zk.PermAll))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.Create(foreign+"/"+zookeeper.LockNodeName, []byte("batch-job-on-a-vm"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.TryAcquireShared(ctx, "foreign", "reader", holdTTL, 5)
	var locked *backends.LockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue(), "got %v", err)
	g.Expect(locked.Holder).To(Equal("batch-job-on-a-vm"))
}

// Identities become node names: whatever they hold, each takes, shows and gives back its own
// place.
func TestPlacesOfAwkwardIdentities(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := zktest.Start(t)
	b := newBackend(t, zookeeper.Config{Servers: []string{srv.Addr()}})
	ids := []string{"..", ".", "a/b", "a;b", "zookeeper", "ünï cödé", "tab\there", "100%", strings.Repeat("x", 300)}
	leases := map[string]backends.Lease{}
	for _, id := range ids {
		l, err := b.TryAcquireShared(ctx, "awkward", id, holdTTL, len(ids))
		g.Expect(err).NotTo(HaveOccurred(), "identity %q", id)
		leases[id] = l
	}
	holders, err := b.Holders(ctx, "awkward")
	g.Expect(err).NotTo(HaveOccurred())
	var got []string
	for _, h := range holders {
		g.Expect(h.Shared).To(BeTrue())
		got = append(got, h.Identity)
	}
	g.Expect(got).To(ConsistOf(ids))
	for i, id := range ids {
		g.Expect(b.Release(ctx, leases[id])).To(Succeed())
		holders, err := b.Holders(ctx, "awkward")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holders).To(HaveLen(len(ids)-i-1), "releasing %q frees its place alone", id)
	}
}

// WatchFree on a key held in places fires when a place goes (released, or its session ended),
// not when one is renewed; on a key whose places are all gone it fires at once.
func TestWatchFreeOnPlaces(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := zktest.Start(t)
	cfg := zookeeper.Config{Servers: []string{srv.Addr()}}
	holder := newBackend(t, cfg)
	waiter := newBackend(t, cfg)
	watch := func(key string) <-chan struct{} {
		fired := make(chan struct{})
		g.Expect(waiter.WatchFree(ctx, key, func() { close(fired) })).To(Succeed())
		return fired
	}

	a, err := holder.TryAcquireShared(ctx, "shared", "pod-a", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = holder.TryAcquireShared(ctx, "shared", "pod-b", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())
	fired := watch("shared")
	_, lost, err := holder.Renew(ctx, []backends.Lease{a}, holdTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost).To(BeEmpty())
	g.Consistently(fired).Within(500*time.Millisecond).ShouldNot(BeClosed(), "a renewal frees no place")
	g.Expect(holder.Release(ctx, a)).To(Succeed())
	g.Eventually(fired).Within(2*time.Second).Should(BeClosed(), "a released place")
	_, err = waiter.TryAcquireShared(ctx, "shared", "pod-c", holdTTL, 2)
	g.Expect(err).NotTo(HaveOccurred())

	// The holder's session ends: ZooKeeper deletes its place.
	fired = watch("shared")
	g.Expect(holder.Close(ctx)).To(Succeed())
	g.Eventually(fired).Within(2*time.Second).Should(BeClosed(), "a place of an ended session")

	// The places node outlives its last place for a while; the key is free all the same.
	holders, err := waiter.Holders(ctx, "shared")
	g.Expect(err).NotTo(HaveOccurred())
	for _, h := range holders {
		g.Expect(waiter.Release(ctx, h)).To(Succeed())
	}
	g.Eventually(watch("shared")).Within(2 * time.Second).Should(BeClosed())
}
