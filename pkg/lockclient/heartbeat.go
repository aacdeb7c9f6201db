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

package lockclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// A detached claim with Request.Heartbeat names a coordination.k8s.io Lease
// (spec.holder.leaseName) that this client creates before the claim, renews every third of its
// duration while it waits and holds, and deletes when it lets go. If the process dies without
// letting go (SIGKILL, a crash, a laptop that sleeps), the controller sees the Lease stop
// changing and releases the claim within the Lease's duration, as it would for a dead pod. The
// Lease is owned by the claim, so that deleting a left-over claim deletes its Lease too.

// heartbeat is the renewal of one claim's Lease.
type heartbeat struct {
	c     *Client
	lease *coordinationv1.Lease
	// interval is how often the Lease is renewed: a third of its duration.
	interval time.Duration

	// mu guards lease, which the renewals and own update, and what the Hold is told of them.
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	// until is the send of the last renewal the API server confirmed plus the Lease's duration,
	// on the client's clock: the controller, which times a heartbeat from when it saw it change,
	// cannot release the claim before then. confirmed, when set, is told each new one.
	until     time.Time
	duration  time.Duration
	confirmed func(until time.Time)
}

// confirmedUntil is when the controller may release the claim at the earliest, as of the last
// confirmed renewal; zero for a nil heartbeat.
func (h *heartbeat) confirmedUntil() time.Time {
	if h == nil {
		return time.Time{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

// onConfirmed tells fn of each later confirmed renewal's bound; a nil heartbeat has none.
func (h *heartbeat) onConfirmed(fn func(until time.Time)) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.confirmed = fn
}

// heartbeatSeconds is d as a Lease's leaseDurationSeconds, rounded up.
func heartbeatSeconds(d time.Duration) int32 {
	return int32(min(math.Ceil(d.Seconds()), math.MaxInt32))
}

// startHeartbeat creates the Lease called name in namespace and starts renewing it. ctx bounds
// the creation only: the renewals go on until stop.
func (c *Client) startHeartbeat(ctx context.Context, namespace, name string, d time.Duration) (*heartbeat, error) {
	secs := heartbeatSeconds(d)
	sent := c.clock.Now()
	now := metav1.NewMicroTime(sent)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
			locksv1alpha1.HeartbeatLabel: "true", ManagedByLabel: ManagedByValue}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(secs),
			AcquireTime: &now, RenewTime: &now},
	}
	if err := c.kube.Create(ctx, lease); err != nil {
		return nil, err
	}
	renewCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	duration := time.Duration(secs) * time.Second
	h := &heartbeat{c: c, lease: lease, interval: duration / 3, cancel: cancel, done: make(chan struct{}),
		duration: duration, until: sent.Add(duration)}
	go h.run(renewCtx)
	return h, nil
}

// run renews the Lease every interval until ctx ends. A renewal that fails is tried again at the
// next tick: two failures in a row still leave a third of the duration.
func (h *heartbeat) run(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if errors.Is(h.renew(ctx, nil), errLeaseGone) {
				// Deleted by someone: the controller releases the claim, which the Hold's
				// context reports. Nothing is left to renew.
				return
			}
		}
	}
}

var errLeaseGone = errors.New("heartbeat Lease deleted")

// renew moves the Lease's renewTime to now, and, with owner, makes the claim its owner.
func (h *heartbeat) renew(ctx context.Context, owner *locksv1alpha1.LockClaim) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	callCtx, cancel := context.WithTimeout(ctx, max(h.interval, time.Second))
	defer cancel()
	for range 3 {
		next := h.lease.DeepCopy()
		sent := h.c.clock.Now()
		next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(sent))
		if owner != nil {
			next.OwnerReferences = []metav1.OwnerReference{{APIVersion: locksv1alpha1.GroupVersion.String(),
				Kind: "LockClaim", Name: owner.Name, UID: owner.UID}}
		}
		err := h.c.kube.Update(callCtx, next)
		switch {
		case err == nil:
			h.lease = next
			h.until = sent.Add(h.duration)
			if h.confirmed != nil {
				h.confirmed(h.until)
			}
			return nil
		case apierrors.IsNotFound(err):
			return errLeaseGone
		case !apierrors.IsConflict(err):
			return err
		}
		// Someone else wrote it (a label edited by hand): read it again and renew that.
		current := &coordinationv1.Lease{}
		if err := h.c.kube.Get(callCtx, client.ObjectKeyFromObject(h.lease), current); err != nil {
			if apierrors.IsNotFound(err) {
				return errLeaseGone
			}
			return err
		}
		h.lease = current
	}
	return fmt.Errorf("renewing heartbeat Lease %s: other writers kept changing it", h.lease.Name)
}

// stop ends the renewals and deletes the Lease (gone already counts as deleted). A nil heartbeat
// does nothing, and stop may be called more than once.
func (h *heartbeat) stop(ctx context.Context) error {
	if h == nil {
		return nil
	}
	var err error
	h.once.Do(func() {
		h.cancel()
		<-h.done
		h.mu.Lock()
		defer h.mu.Unlock()
		err = client.IgnoreNotFound(h.c.kube.Delete(ctx, h.lease, client.Preconditions{UID: &h.lease.UID}))
		if err != nil {
			err = apiError(err, "deleting heartbeat Lease "+h.lease.Name)
		}
	})
	return err
}

// claimWithHeartbeat creates a detached claim whose liveness is a heartbeat Lease of the same
// name, created first so that the controller can grant the claim at its first pass, and starts
// renewing it.
func (c *Client) claimWithHeartbeat(ctx context.Context, req Request) (*locksv1alpha1.LockClaim, *heartbeat, error) {
	for range 5 {
		// The claim's name is chosen here, not by the API server (generateName), because the
		// Lease is named after it and must exist first.
		first := req.lockNames()[0]
		name := first + "-" + utilrand.String(5)
		if len(name) > 253 {
			name = first[:253-6] + name[len(name)-6:]
		}
		hb, err := c.startHeartbeat(ctx, req.Namespace, name, req.Heartbeat)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return nil, nil, c.createHeartbeatError(err, req, name)
		}
		claim := newClaim(req)
		claim.Name = name
		claim.Spec.Holder = &locksv1alpha1.ClaimHolder{LeaseName: name}
		err = c.kube.Create(ctx, claim)
		if err != nil {
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_ = hb.stop(cleanup)
			cancel()
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return nil, nil, c.createError(err, req)
		}
		// Best effort: without the owner, a Lease left by a killed process stays until deleted
		// by hand; it is expired either way.
		_ = hb.renew(ctx, claim)
		return claim, hb, nil
	}
	return nil, nil, fmt.Errorf("could not find a free name for a claim on lock %s in namespace %s; try again", req.label(), req.Namespace)
}

func (c *Client) createHeartbeatError(err error, req Request, name string) error {
	if apierrors.IsNotFound(err) {
		return c.createError(err, req)
	}
	return apiError(err, fmt.Sprintf("creating heartbeat Lease %s in namespace %s", name, req.Namespace))
}
