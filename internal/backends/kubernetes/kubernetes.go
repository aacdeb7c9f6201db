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

// Package kubernetes is lockwarden's built-in lock store: it keeps lock state in the Kubernetes
// API itself, in coordination.k8s.io/v1 Lease objects in one namespace, so that a fresh install
// needs no external store.
//
// # Objects
//
// Each lock is one Lease named LeaseName(key) ("lock-" and a hash, since keys may be long and
// contain '/'), with the key in the KeyAnnotation annotation, the ManagedByLabel label and the
// SessionLabel label naming the session that keeps it alive. Its spec is what client-go's leader
// election writes: holderIdentity, leaseDurationSeconds (the TTL rounded up to whole seconds),
// acquireTime and renewTime (set when a hold begins or is refreshed by TryAcquire) and
// leaseTransitions (incremented at every change of holder).
//
// Each session also has a Lease of its own, named Config.SessionName and labelled like its
// locks. Renewing the session renews its locks: a lock Lease is held while holderIdentity is set
// and now < max(lock renewTime, session renewTime) + lock leaseDurationSeconds, where the session
// is the Lease that the lock's SessionLabel names. So Renew costs one LIST and one UPDATE however
// many locks it renews.
//
// # Safety
//
// Every write that changes a holder is a compare-and-swap on the lock Lease's resourceVersion, so
// two writers that saw the same state cannot both win. A session write can revive only what is
// still held at the time of the write, so Renew deletes its expired lock Leases first, and
// reports as renewed only locks that were still held when the session write returned (a lock
// that expired while the renewal was in flight may have been taken in between). Times come from
// the controller's clock, as in client-go leader election: holders must still use fencing tokens.
//
// # Session semantics
//
// Like an etcd lease or a ZooKeeper session, the session keeps alive the locks it holds, not
// only those passed to one Renew call: a lock stays held while the session is renewed more often
// than the lock's TTL. A caller that no longer wants a lock must Release it. A lock held under
// another session (a previous controller's with another SessionName) is moved into this one the
// first time this session acquires or renews it.
//
// Unlike an etcd lease, the session outlives the process: controller replicas share it, so that
// a newly elected leader keeps its predecessor's locks alive from its first renewal. That would
// also keep alive, for ever, a lock that no process wants any more: one taken by a deposed leader
// in the moment before it noticed, for a claim that the new leader had already let go. So a
// Backend keeps alive only what it has been asked for: a lock of the session that no TryAcquire
// or Renew of this Backend has named for one TTL of the lock (counted from the Backend's start
// for a lock it never named) is detached from the session by Renew, with its expiry unchanged,
// and expires unless a holder takes it up again before then (a TryAcquire or Renew naming it
// moves it back). Every held lock the controller tracks is named by Renew every sixth of a TTL,
// and a new leader resumes its holds with TryAcquire well within a TTL.
//
// # Lease values
//
// Lease.Version is the lock Lease's resourceVersion and a digest of its holder. It changes whenever the lock Lease is
// written: a new hold, a takeover, a reentrant TryAcquire, or a Renew that moves the lock into
// this session or changes its TTL; batched renewals write only the session Lease and leave it
// as it was. Lease.ExpireTime follows the rule above; Lease.TTL is the TTL asked for (Inspect
// reports leaseDurationSeconds). All times come from the injected clock of whichever process
// wrote or reads the Leases, so controller replicas that share a session need clocks in step,
// to well within the TTL, as client-go leader election does.
package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockwarden/lockwarden/internal/backends"
)

const (
	// DefaultSessionName is the session Lease's name when Config.SessionName is empty.
	DefaultSessionName = "lockwarden-session"
	// DefaultCallTimeout bounds each API request unless WithCallTimeout says otherwise. It is far
	// below the minimum lock TTL (5 s), so that a hung request cannot outlive a lock.
	DefaultCallTimeout = 2 * time.Second

	// KeyAnnotation holds the lock's key on its Lease.
	KeyAnnotation = "locks.lockwarden.io/key"
	// SessionLabel names, on lock and session Leases, the session Lease that keeps them alive.
	SessionLabel = "locks.lockwarden.io/session"
	// ManagedByLabel and ManagedByValue mark every Lease this backend writes.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel.
	ManagedByValue = "lockwarden"
	// PingAnnotation records, on the session Lease, when Ping last wrote it.
	PingAnnotation = "locks.lockwarden.io/ping-time"

	// leaseNamePrefix starts every lock Lease's name; session names may not start with it.
	leaseNamePrefix = "lock-"
	// leaseNameHashLength is how many hex digits of the key's SHA-256 a lock Lease's name keeps:
	// 80 bits, so that collisions are out of reach, in a name short enough to read.
	leaseNameHashLength = 20
	// maxAttempts bounds how often a call retries after losing a compare-and-swap to a
	// concurrent writer before giving up.
	maxAttempts = 3
)

// Config says where the backend keeps its Leases.
type Config struct {
	// Client talks to the API server. Its reads must go to the API server, not to an informer
	// cache: a stale read would let two holders in. Use a client from client.New, or a manager
	// client with coordinationv1.Lease in Cache.DisableFor. Its scheme must know
	// coordination.k8s.io/v1.
	Client client.Client
	// Namespace holds the Leases; normally the controller's own.
	Namespace string
	// SessionName names this session's Lease and labels the lock Leases it keeps alive. Default
	// DefaultSessionName. Controller replicas that share a name share a session, so that a
	// restarted or newly elected controller resumes its predecessor's renewals at once.
	SessionName string
}

// Option configures New.
type Option func(*Backend)

// WithClock sets the clock the backend stamps and judges Leases with. Default: the real clock.
func WithClock(c clock.Clock) Option {
	return func(b *Backend) { b.clock = c }
}

// WithCallTimeout sets the timeout of each API request. Default DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option {
	return func(b *Backend) { b.callTimeout = d }
}

// Backend is one session with the Kubernetes API as a lock store. It is safe for concurrent use.
type Backend struct {
	client      client.Client
	namespace   string
	session     string
	clock       clock.Clock
	callTimeout time.Duration

	// roundTrips counts API requests (see RoundTrips).
	roundTrips atomic.Int64
	closed     atomic.Bool
	// wanted remembers which locks this Backend was last asked for, and when (see Session
	// semantics above).
	wanted wantedLocks
}

var _ backends.Backend = (*Backend)(nil)

// New returns a session that keeps locks in cfg.Namespace. It sends no request: Ping checks that
// the API server can be reached and written.
func New(cfg Config, opts ...Option) (*Backend, error) {
	b := &Backend{
		client:      cfg.Client,
		namespace:   cfg.Namespace,
		session:     cfg.SessionName,
		clock:       clock.RealClock{},
		callTimeout: DefaultCallTimeout,
	}
	if b.session == "" {
		b.session = DefaultSessionName
	}
	for _, opt := range opts {
		opt(b)
	}
	if b.clock != nil {
		b.wanted.since = b.clock.Now()
	}

	switch {
	case b.client == nil:
		return nil, errors.New("kubernetes backend: Config.Client is required")
	case b.clock == nil:
		return nil, errors.New("kubernetes backend: the clock must not be nil")
	case b.callTimeout <= 0:
		return nil, fmt.Errorf("kubernetes backend: the call timeout must be positive, got %s", b.callTimeout)
	}
	if errs := validation.IsDNS1123Label(b.namespace); len(errs) > 0 {
		return nil, fmt.Errorf("kubernetes backend: invalid namespace %q: %s", b.namespace, strings.Join(errs, "; "))
	}
	// The session name is both a Lease name and a label value.
	errs := append(validation.IsDNS1123Subdomain(b.session), validation.IsValidLabelValue(b.session)...)
	if strings.HasPrefix(b.session, leaseNamePrefix) {
		errs = append(errs, fmt.Sprintf("must not start with %q, which lock Leases use", leaseNamePrefix))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("kubernetes backend: invalid session name %q: %s", b.session, strings.Join(errs, "; "))
	}
	gvk := coordinationv1.SchemeGroupVersion.WithKind("Lease")
	if !b.client.Scheme().Recognizes(gvk) {
		return nil, fmt.Errorf("kubernetes backend: the client's scheme does not know %s", gvk)
	}
	return b, nil
}

// LeaseName returns the name of the Lease that holds key's lock.
func LeaseName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return leaseNamePrefix + hex.EncodeToString(sum[:])[:leaseNameHashLength]
}

// RoundTrips returns how many API requests the session has sent, failed ones included.
func (b *Backend) RoundTrips() int64 {
	return b.roundTrips.Load()
}

// Close ends the session. It deletes nothing: the session's locks stay held until their TTL runs
// out, unless a session of the same name or of another holder's controller resumes them. Calls
// after Close fail.
func (b *Backend) Close(context.Context) error {
	b.closed.Store(true)
	return nil
}

// Ping lists the session Lease and writes it (creates it, or stamps PingAnnotation), which proves
// that the API server is reachable, that the client is authorized to list and write Leases in the
// namespace, and that writes land. It never touches renewTime, which would revive the session's
// expired locks.
func (b *Backend) Ping(ctx context.Context) error {
	if err := b.usable(); err != nil {
		return err
	}
	for range maxAttempts {
		var list coordinationv1.LeaseList
		err := b.call(ctx, "cannot list Leases in namespace "+b.namespace, func(ctx context.Context) error {
			return b.client.List(ctx, &list, client.InNamespace(b.namespace), client.MatchingFields{"metadata.name": b.session})
		})
		if err != nil {
			return err
		}
		stamp := b.clock.Now().UTC().Format(time.RFC3339)
		if len(list.Items) == 0 {
			session := b.newSession()
			metav1.SetMetaDataAnnotation(&session.ObjectMeta, PingAnnotation, stamp)
			err = b.create(ctx, session)
		} else {
			session := list.Items[0].DeepCopy()
			metav1.SetMetaDataAnnotation(&session.ObjectMeta, PingAnnotation, stamp)
			err = b.update(ctx, session)
		}
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue // a concurrent writer; look again
		}
		return err
	}
	return fmt.Errorf("cannot write Lease %s/%s: other writers kept changing it", b.namespace, b.session)
}

// newSession returns this session's Lease as first written.
func (b *Backend) newSession() *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      b.session,
			Namespace: b.namespace,
			Labels:    map[string]string{ManagedByLabel: ManagedByValue, SessionLabel: b.session},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(b.session)},
	}
}

// usable fails once the session is closed.
func (b *Backend) usable() error {
	if b.closed.Load() {
		return errors.New("kubernetes backend: session is closed")
	}
	return nil
}

// call sends one API request with the per-call timeout and counts it. what says, for the error
// message, what the request was.
func (b *Backend) call(ctx context.Context, what string, do func(context.Context) error) error {
	b.roundTrips.Add(1)
	callCtx, cancel := context.WithTimeout(ctx, b.callTimeout)
	defer cancel()
	err := do(callCtx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("%s: the Kubernetes API server did not answer within %s: %w", what, b.callTimeout, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// get reads the Lease called name; nil when there is none.
func (b *Backend) get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	err := b.call(ctx, fmt.Sprintf("cannot read Lease %s/%s", b.namespace, name), func(ctx context.Context) error {
		return b.client.Get(ctx, client.ObjectKey{Namespace: b.namespace, Name: name}, lease)
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lease, nil
}

// list reads the Leases that carry labels.
func (b *Backend) list(ctx context.Context, labels client.MatchingLabels) ([]coordinationv1.Lease, error) {
	var list coordinationv1.LeaseList
	err := b.call(ctx, "cannot list Leases in namespace "+b.namespace, func(ctx context.Context) error {
		return b.client.List(ctx, &list, client.InNamespace(b.namespace), labels)
	})
	return list.Items, err
}

// create writes a new Lease; lease becomes what the server stored.
func (b *Backend) create(ctx context.Context, lease *coordinationv1.Lease) error {
	return b.call(ctx, fmt.Sprintf("cannot create Lease %s/%s", b.namespace, lease.Name), func(ctx context.Context) error {
		return b.client.Create(ctx, lease)
	})
}

// update writes lease if nobody changed it since it was read (its resourceVersion is the
// precondition); lease becomes what the server stored.
func (b *Backend) update(ctx context.Context, lease *coordinationv1.Lease) error {
	return b.call(ctx, fmt.Sprintf("cannot update Lease %s/%s", b.namespace, lease.Name), func(ctx context.Context) error {
		return b.client.Update(ctx, lease)
	})
}

// remove deletes lease if nobody changed it since it was read.
func (b *Backend) remove(ctx context.Context, lease *coordinationv1.Lease) error {
	return b.call(ctx, fmt.Sprintf("cannot delete Lease %s/%s", b.namespace, lease.Name), func(ctx context.Context) error {
		return b.client.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
	})
}

// lostRace says whether err means that another writer changed the Lease since it was read.
func lostRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
}

// checkArgs rejects calls that cannot be served.
func checkArgs(key, identity string, ttl time.Duration) error {
	switch {
	case key == "":
		return errors.New("kubernetes backend: key must not be empty")
	case identity == "":
		return errors.New("kubernetes backend: identity must not be empty")
	}
	return checkTTL(ttl)
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > math.MaxInt32*time.Second {
		return fmt.Errorf("kubernetes backend: ttl must be between 1ns and %d s, got %s", math.MaxInt32, ttl)
	}
	return nil
}

// durationSeconds is ttl as a Lease's leaseDurationSeconds: rounded up, so that a lock is never
// reported free before its TTL.
func durationSeconds(ttl time.Duration) int32 {
	return int32((ttl + time.Second - 1) / time.Second)
}

// holderOf returns lock's holder, "" for none.
func holderOf(lock *coordinationv1.Lease) string {
	if lock == nil {
		return ""
	}
	return ptr.Deref(lock.Spec.HolderIdentity, "")
}

// microTime returns t's time, zero when unset.
func microTime(t *metav1.MicroTime) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// expireTime is when lock stops being held: leaseDurationSeconds after the later of its own
// renewTime and its session's. session is the Lease that lock's SessionLabel names, or nil.
// Zero when lock has no holder.
func expireTime(lock, session *coordinationv1.Lease) time.Time {
	if holderOf(lock) == "" {
		return time.Time{}
	}
	last := microTime(lock.Spec.RenewTime)
	if session != nil && session.Name == lock.Labels[SessionLabel] && session.Annotations[KeyAnnotation] == "" {
		if t := microTime(session.Spec.RenewTime); t.After(last) {
			last = t
		}
	}
	return last.Add(time.Duration(ptr.Deref(lock.Spec.LeaseDurationSeconds, 0)) * time.Second)
}

// leaseOf describes lock, which expires at expire, as a backends.Lease.
func leaseOf(key string, lock *coordinationv1.Lease, expire time.Time, ttl time.Duration) backends.Lease {
	return backends.Lease{
		Key:         key,
		Identity:    holderOf(lock),
		TTL:         ttl,
		AcquireTime: microTime(lock.Spec.AcquireTime),
		ExpireTime:  expire,
		Version:     versionOf(lock.ResourceVersion, holderOf(lock)),
	}
}

// versionOf makes a Lease.Version from the lock Lease's resourceVersion and its holder, so that a
// Version names one hold of one holder: Release can trust it without reading the Lease first.
func versionOf(resourceVersion, holder string) string {
	sum := sha256.Sum256([]byte(holder))
	return resourceVersion + "/" + hex.EncodeToString(sum[:6])
}

// resourceVersionOf returns the resourceVersion in version if version was made for identity.
func resourceVersionOf(version, identity string) (string, bool) {
	rv, _, ok := strings.Cut(version, "/")
	return rv, ok && rv != "" && version == versionOf(rv, identity)
}
