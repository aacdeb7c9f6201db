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

// Package lockclient asks lockwarden for distributed locks from Go programs: it creates a
// LockClaim (for a pod, or detached), waits for it by watching, and releases it. lockctl is built
// on it.
//
//	c, err := lockclient.New(cfg)
//	hold, err := c.Acquire(ctx, lockclient.Request{Namespace: "team-a", Lock: "db-migrate",
//		Pod: &lockclient.Pod{Name: os.Getenv("POD_NAME"), UID: types.UID(os.Getenv("POD_UID"))}})
//	defer hold.Release(context.WithoutCancel(ctx))
//	// work under hold.Context(), which ends if the lock is lost; pass hold.FencingToken to the
//	// protected resource
//
// TryAcquire takes a lock only if it is free (ErrLockBusy otherwise), and WithLock runs a
// function under a lock and releases it after.
//
// A claim made for a pod is owned by the pod (garbage collected with it) and has a name derived
// from the pod's UID and the lock, so a restarted process of the same pod finds its claim again
// instead of queueing twice. A detached claim holds the lock until it is deleted, or, with a
// Request.Heartbeat, until its process stops renewing the claim's heartbeat Lease.
//
// The RBAC a caller needs: create, get, list, watch and delete on lockclaims; get on
// distributedlocks; get on pods (for claims made for a pod); create, get, update and delete on
// coordination.k8s.io leases (for detached claims with a Request.Heartbeat).
package lockclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// ManagedByLabel marks the claims this package creates (value ManagedByValue).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "lockctl"
)

// cleanupTimeout bounds the deletion of a claim that an Acquire gave up on.
const cleanupTimeout = 10 * time.Second

// Client asks for, waits for and releases locks.
type Client struct {
	kube client.WithWatch
	// clock and skew keep holds' local deadlines (expiry.go).
	clock clock.Clock
	skew  time.Duration
}

// NewScheme returns a scheme with the kinds lockclient reads and writes: LockClaim,
// DistributedLock, Pod and Lease (heartbeats).
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := locksv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := coordinationv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// New returns a Client for the API server that cfg points at.
func New(cfg *rest.Config, opts ...ClientOption) (*Client, error) {
	s, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	return NewFromClient(c, opts...), nil
}

// NewFromClient returns a Client that uses c, whose scheme must know LockClaim, DistributedLock
// and Pod (and coordination.k8s.io Lease, for heartbeats). c must read from the API server, not from a cache.
func NewFromClient(c client.WithWatch, opts ...ClientOption) *Client {
	lc := &Client{kube: c, clock: clock.RealClock{}, skew: DefaultClockSkew}
	for _, o := range opts {
		o(lc)
	}
	return lc
}

// Pod names the pod a claim is made for.
type Pod struct {
	// Name of the pod, in the claim's namespace.
	Name string
	// UID of the pod (metadata.uid from the downward API). Empty: read from the pod.
	UID types.UID
}

// Request asks for a lock.
type Request struct {
	// Namespace of the lock (and of the pod, for a claim made for a pod).
	Namespace string
	// Lock is the DistributedLock's name.
	Lock string
	// Locks, instead of Lock, names 2 to 8 DistributedLocks of the namespace, all on one
	// LockBackend, to hold together (spec.lockNames): the claim holds all of them or none, and the
	// Result gives each one's fencing token (Result.Locks). Exactly one of Lock and Locks is set.
	Locks []string
	// Pod is the pod the claim is made for; nil makes a detached claim.
	Pod *Pod
	// Mode is how the claim holds the lock (spec.mode): locksv1alpha1.LockModeShared, one of the
	// lock's spec.maxHolders places beside other Shared holders, or LockModeExclusive, alone.
	// Empty asks for the API's default, Shared; on a lock of one place (a mutex) both hold it
	// alone. A pod's claim that already exists keeps its mode: asking for another one is an
	// error, since a claim's mode cannot change.
	Mode locksv1alpha1.LockMode
	// Priority places the claim in the lock's queue (spec.priority): claims of a higher priority
	// are granted before those of a lower one, whenever they came; it never ends a hold. 0, the
	// default, also accepts a pod's existing claim at whatever priority it has (its
	// lock-priority annotation may have set one); another value that differs from the existing
	// claim's is an error, since a claim's priority cannot change.
	Priority int32
	// Timeout bounds the wait (0 waits forever). It is also written to the claim as
	// spec.waitTimeoutSeconds, rounded up, so that the lock is never granted to a claim whose
	// caller has given up.
	Timeout time.Duration
	// Heartbeat, for a detached claim, is the duration (rounded up to seconds) of a heartbeat
	// Lease that the client creates, renews every third of it while the claim waits and holds,
	// and deletes on release: if this process dies without releasing, the controller releases
	// the claim once the Lease has gone that long without renewal. 0 (the default): no
	// heartbeat, the claim holds the lock until it is deleted. Not for a claim made for a pod,
	// whose liveness is the pod's. Only Acquire, TryAcquire and WithLock keep a heartbeat.
	Heartbeat time.Duration
}

// Result describes a granted claim.
type Result struct {
	// Namespace, Lock and Claim name the lock and the claim that holds it.
	Namespace, Lock, Claim string
	// Pod is the holder pod; empty for a detached claim.
	Pod string
	// Identity is the holder identity on the backend.
	Identity string
	// Mode is the mode the claim asked for (Shared unless Exclusive was asked for). On a lock of
	// one place a Shared claim holds the lock alone too.
	Mode locksv1alpha1.LockMode
	// FencingToken is the token issued at the grant; pass it to the protected resource. A claim
	// of several locks has one per lock instead (Locks), and this is 0.
	FencingToken int64
	// Locks, for a claim of several locks (Request.Locks), are its locks in name order and the
	// token of each hold; a resource guarded by several of them checks each token.
	Locks []HeldLock
	// AcquireTime is when the lock was granted; ExpireTime when it expires unless renewed.
	AcquireTime, ExpireTime time.Time
	// Waited is how long the call took.
	Waited time.Duration
	// Reattached says the claim already existed (a restarted process of the same pod).
	Reattached bool

	// uid is the claim's UID: a claim of the same name with another UID is another claim.
	uid types.UID
}

// HeldLock is one lock of a claim of several locks and the fencing token of its hold.
type HeldLock struct {
	Lock         string
	FencingToken int64
}

// lockNames are the locks req asks for, in name order.
func (req Request) lockNames() []string {
	spec := locksv1alpha1.LockClaimSpec{LockName: req.Lock, LockNames: req.Locks}
	return spec.Locks()
}

// label names req's lock, or its locks, in messages.
func (req Request) label() string { return locksv1alpha1.LocksLabel(req.lockNames()) }

// validLocks says what is wrong with req's Lock and Locks; nil when nothing is.
func (req Request) validLocks() error {
	switch {
	case req.Lock != "" && len(req.Locks) > 0:
		return errors.New("lockclient: set one of Request.Lock and Request.Locks, not both")
	case len(req.Locks) == 0:
		if req.Lock == "" {
			return errors.New("lockclient: Request needs a Namespace and a Lock")
		}
		return nil
	case len(req.Locks) < 2 || len(req.Locks) > 8:
		return fmt.Errorf("lockclient: Request.Locks names 2 to 8 locks, not %d (one lock: Request.Lock)", len(req.Locks))
	case len(req.lockNames()) != len(req.Locks):
		return fmt.Errorf("lockclient: Request.Locks names a lock twice: %v", req.Locks)
	case slices.Contains(req.Locks, ""):
		return errors.New("lockclient: Request.Locks has an empty name")
	}
	return nil
}

// Holder is the pod name of a held claim, or the claim's name when it is detached.
func (r *Result) Holder() string {
	if r.Pod != "" {
		return r.Pod
	}
	return r.Claim
}

// ClaimName is the name of the claim that pod (with UID uid) makes for lock: stable across
// restarts of the pod's containers, different for a replacement pod of the same name. The
// controller gives an annotated pod's claim the same name (locksv1alpha1.PodClaimName), so that
// lockctl in such a pod attaches to it.
func ClaimName(pod string, uid types.UID, lock string) string {
	return locksv1alpha1.PodClaimName(pod, uid, lock)
}

// PodClaim returns the name of the claim that pod has (or would have) for lock in namespace, or,
// with more, for lock and more held together. It reads the pod only when pod.UID is empty.
func (c *Client) PodClaim(ctx context.Context, namespace string, pod Pod, lock string, more ...string) (string, error) {
	if pod.UID == "" {
		p, err := c.pod(ctx, namespace, pod)
		if err != nil {
			return "", err
		}
		pod.UID = p.UID
	}
	return locksv1alpha1.PodClaimNameOfLocks(pod.Name, pod.UID, append([]string{lock}, more...)), nil
}

// Acquire creates a claim for req (or, for a pod, finds the one it already has) and waits until
// it holds the lock. On failure a claim that does not hold the lock is deleted, so that it is
// never granted to a caller that has given up. The Hold it returns says what was granted, tells
// when the hold ends (Hold.Context) and releases it (Hold.Release); ctx bounds only the wait.
func (c *Client) Acquire(ctx context.Context, req Request) (*Hold, error) {
	start := time.Now()
	waitCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, start.Add(req.Timeout))
		defer cancel()
	}
	claim, reattached, hb, err := c.claim(waitCtx, req)
	if err != nil {
		return nil, c.timedOut(ctx, waitCtx, req.Namespace, req.label(), "", err)
	}
	res, err := c.wait(waitCtx, claim.Namespace, claim.Name)
	if err != nil && waitCtx.Err() != nil && ctx.Err() == nil {
		// Our deadline passed: the lock may have been granted just now.
		if r, lastErr := c.check(ctx, claim.Namespace, claim.Name); lastErr == nil && r != nil {
			res, err = r, nil
		}
	}
	if err != nil {
		err = c.timedOut(ctx, waitCtx, req.Namespace, req.label(), claim.Name, err)
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		// Best effort: a claim left waiting must not be granted to a caller that has given up.
		_ = c.kube.Delete(cleanup, claim, client.Preconditions{UID: &claim.UID})
		_ = hb.stop(cleanup)
		return nil, err
	}
	res.Waited = time.Since(start)
	res.Reattached = reattached
	hold := newHold(ctx, c, res)
	hold.heartbeat = hb
	return hold, nil
}

// timedOut reports err as ErrTimedOut when waitCtx's deadline (and not the caller's) ended it.
func (c *Client) timedOut(ctx, waitCtx context.Context, ns, lock, claim string, err error) error {
	if errors.Is(err, ErrTimedOut) || waitCtx.Err() == nil || ctx.Err() != nil {
		return err
	}
	detail := fmt.Sprintf("timed out waiting for lock %q in namespace %q", lock, ns)
	if claim != "" {
		detail += fmt.Sprintf(" (claim %q", claim)
		if _, pos := c.queuePosition(ctx, ns, claim); pos > 0 {
			detail += fmt.Sprintf(", queue position %d", pos)
		}
		detail += ")"
	}
	return &Error{Kind: ErrTimedOut, Namespace: ns, Lock: lock, Claim: claim, Detail: detail, Err: context.DeadlineExceeded}
}

// queuePosition reads a claim's lock and place in the queue, for error messages.
func (c *Client) queuePosition(ctx context.Context, ns, name string) (lock string, position int32) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	claim := &locksv1alpha1.LockClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim); err != nil {
		return "", 0
	}
	return locksv1alpha1.LocksLabel(claim.Spec.Locks()), claim.Status.QueuePosition
}

// Claim creates the claim that req asks for and returns it. For a pod it first looks for the
// claim the pod already has for the lock (reattached is then true); one that has ended is
// replaced by a new one. It does not wait for the lock, and keeps no heartbeat (a Request with
// Heartbeat is refused: use Acquire or TryAcquire).
func (c *Client) Claim(ctx context.Context, req Request) (claim *locksv1alpha1.LockClaim, reattached bool, err error) {
	if req.Heartbeat > 0 {
		return nil, false, errors.New("lockclient: Claim keeps no heartbeat (Request.Heartbeat); use Acquire or TryAcquire")
	}
	claim, reattached, _, err = c.claim(ctx, req)
	return claim, reattached, err
}

// claim is Claim, which for a detached claim with a heartbeat also creates the heartbeat Lease
// and starts renewing it; the caller stops it.
func (c *Client) claim(ctx context.Context, req Request) (claim *locksv1alpha1.LockClaim, reattached bool, hb *heartbeat, err error) {
	switch {
	case req.Namespace == "":
		return nil, false, nil, errors.New("lockclient: Request needs a Namespace and a Lock")
	case req.validLocks() != nil:
		return nil, false, nil, req.validLocks()
	case req.Heartbeat < 0:
		return nil, false, nil, errors.New("lockclient: Request.Heartbeat must not be negative")
	case req.Heartbeat > 0 && req.Pod != nil:
		return nil, false, nil, errors.New("lockclient: Request.Heartbeat is for detached claims; a pod's liveness is its heartbeat")
	case req.Mode != "" && !req.Mode.IsValid():
		return nil, false, nil, fmt.Errorf("lockclient: Request.Mode must be %s or %s, not %q", locksv1alpha1.LockModeShared, locksv1alpha1.LockModeExclusive, req.Mode)
	}
	for _, lock := range req.lockNames() {
		if err := c.lockExists(ctx, req.Namespace, lock); err != nil {
			return nil, false, nil, err
		}
	}
	if req.Heartbeat > 0 {
		claim, hb, err := c.claimWithHeartbeat(ctx, req)
		return claim, false, hb, err
	}
	claim, reattached, err = c.claimPlain(ctx, req)
	return claim, reattached, nil, err
}

// claimPlain is claim without a heartbeat.
func (c *Client) claimPlain(ctx context.Context, req Request) (claim *locksv1alpha1.LockClaim, reattached bool, err error) {
	if req.Pod == nil {
		claim = newClaim(req)
		claim.GenerateName = req.lockNames()[0] + "-"
		if err := c.kube.Create(ctx, claim); err != nil {
			return nil, false, c.createError(err, req)
		}
		return claim, false, nil
	}

	pod, err := c.pod(ctx, req.Namespace, *req.Pod)
	if err != nil {
		return nil, false, err
	}
	name := locksv1alpha1.PodClaimNameOfLocks(pod.Name, pod.UID, req.lockNames())
	for range 5 {
		existing := &locksv1alpha1.LockClaim{}
		err := c.kube.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: name}, existing)
		switch {
		case err == nil && !ownedBy(existing, pod, req.lockNames()):
			return nil, false, fmt.Errorf("LockClaim %s/%s exists but is not pod %s's claim for lock %s", req.Namespace, name, pod.Name, req.label())
		case err == nil && existing.DeletionTimestamp.IsZero() && !isFinal(existing.Status.Phase):
			if req.Mode != "" && claimMode(existing) != req.Mode {
				return nil, false, &Error{Kind: ErrModeConflict, Namespace: req.Namespace, Lock: req.label(), Claim: name,
					Detail: fmt.Sprintf("pod %s already has LockClaim %s for lock %q in mode %s, not %s, and a claim's mode cannot change",
						pod.Name, name, req.label(), claimMode(existing), req.Mode)}
			}
			if req.Priority != 0 && existing.Spec.Priority != req.Priority {
				return nil, false, &Error{Kind: ErrPriorityConflict, Namespace: req.Namespace, Lock: req.label(), Claim: name,
					Detail: fmt.Sprintf("pod %s already has LockClaim %s for lock %q at priority %d, not %d, and a claim's priority cannot change",
						pod.Name, name, req.label(), existing.Spec.Priority, req.Priority)}
			}
			return existing, true, nil
		case err == nil:
			// An ended claim (a previous attempt timed out, or its hold was lost): replace it.
			if err := c.deleteAndWait(ctx, existing); err != nil {
				return nil, false, err
			}
			continue
		case !apierrors.IsNotFound(err):
			return nil, false, apiError(err, "reading LockClaim "+name)
		}
		claim = newClaim(req)
		claim.Name = name
		claim.Spec.Holder = &locksv1alpha1.ClaimHolder{PodName: pod.Name}
		claim.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
		}}
		err = c.kube.Create(ctx, claim)
		if apierrors.IsAlreadyExists(err) {
			continue // created concurrently: re-read it
		}
		if err != nil {
			return nil, false, c.createError(err, req)
		}
		return claim, false, nil
	}
	return nil, false, fmt.Errorf("LockClaim %s/%s keeps changing; try again", req.Namespace, name)
}

func newClaim(req Request) *locksv1alpha1.LockClaim {
	claim := &locksv1alpha1.LockClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Labels: map[string]string{ManagedByLabel: ManagedByValue}},
		Spec:       locksv1alpha1.LockClaimSpec{LockName: req.Lock, Mode: req.Mode, Priority: req.Priority},
	}
	if len(req.Locks) > 0 {
		claim.Spec.LockName, claim.Spec.LockNames = "", req.lockNames()
	}
	if req.Timeout > 0 {
		secs := math.Ceil(req.Timeout.Seconds())
		claim.Spec.WaitTimeoutSeconds = ptr.To(int32(min(secs, math.MaxInt32)))
	}
	return claim
}

func (c *Client) createError(err error, req Request) error {
	if apierrors.IsNotFound(err) {
		// The namespace does not exist.
		return &Error{Kind: ErrLockNotFound, Namespace: req.Namespace, Lock: req.label(), Err: err,
			Detail: fmt.Sprintf("lock %q not found in namespace %q", req.label(), req.Namespace)}
	}
	return apiError(err, "creating LockClaim")
}

// ownedBy says whether claim is the one lockctl (or the pod lock controller, for an annotated
// pod) makes for pod on lock: owned by the pod, its holder the pod alone. A claim with an
// identity of its own is not: anyone who may create claims can set an owner reference, and an
// identity copied from a lock's status once made such a claim share another pod's hold.
func ownedBy(claim *locksv1alpha1.LockClaim, pod *corev1.Pod, locks []string) bool {
	if !slices.Equal(claim.Spec.Locks(), locks) || claim.Spec.Holder == nil || *claim.Spec.Holder != (locksv1alpha1.ClaimHolder{PodName: pod.Name}) {
		return false
	}
	for _, ref := range claim.OwnerReferences {
		if ref.Kind == "Pod" && ref.UID == pod.UID {
			return true
		}
	}
	return false
}

func (c *Client) lockExists(ctx context.Context, ns, lock string) error {
	err := c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: lock}, &locksv1alpha1.DistributedLock{})
	if apierrors.IsNotFound(err) {
		return &Error{Kind: ErrLockNotFound, Namespace: ns, Lock: lock, Err: err,
			Detail: fmt.Sprintf("lock %q not found in namespace %q", lock, ns)}
	}
	return apiError(err, "reading DistributedLock "+lock)
}

// pod reads the pod p and checks its UID.
func (c *Client) pod(ctx context.Context, ns string, p Pod) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Name}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &Error{Kind: ErrPodNotFound, Namespace: ns, Err: err,
			Detail: fmt.Sprintf("pod %q not found in namespace %q", p.Name, ns)}
	case err != nil:
		return nil, apiError(err, "reading Pod "+p.Name)
	case p.UID != "" && pod.UID != p.UID:
		return nil, &Error{Kind: ErrPodNotFound, Namespace: ns,
			Detail: fmt.Sprintf("pod %q in namespace %q has UID %s, not %s: it was replaced", p.Name, ns, pod.UID, p.UID)}
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return nil, &Error{Kind: ErrPodNotFound, Namespace: ns,
			Detail: fmt.Sprintf("pod %q in namespace %q has finished (phase %s)", p.Name, ns, pod.Status.Phase)}
	}
	return pod, nil
}

// Release deletes a claim, which releases its lock (the controller records the release in its next
// pass), and waits until the claim is gone. A claim that is already gone counts as released.
func (c *Client) Release(ctx context.Context, namespace, name string) error {
	claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return c.deleteAndWait(ctx, claim)
}

// deleteAndWait deletes claim and waits until it is gone: at once, since claims carry no
// finalizer (the lock's record releases the hold in the controller's next pass), or, for a claim
// an earlier lockwarden gave its release finalizer, once the controller has released it.
func (c *Client) deleteAndWait(ctx context.Context, claim *locksv1alpha1.LockClaim) error {
	var opts []client.DeleteOption
	if claim.UID != "" {
		opts = append(opts, client.Preconditions{UID: &claim.UID})
	}
	err := c.kube.Delete(ctx, claim, opts...)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil // gone already, or replaced by a newer claim of that name
	case err != nil:
		return apiError(err, "deleting LockClaim "+claim.Name)
	}
	err = c.watchClaim(ctx, claim.Namespace, claim.Name, func(current *locksv1alpha1.LockClaim) (bool, error) {
		return current == nil || (claim.UID != "" && current.UID != claim.UID), nil
	})
	if err != nil && ctx.Err() != nil {
		return &Error{Kind: ErrTimedOut, Namespace: claim.Namespace, Lock: claim.Spec.LockName, Claim: claim.Name, Err: ctx.Err(),
			Detail: fmt.Sprintf("LockClaim %q in namespace %q was deleted but the controller has not released it yet", claim.Name, claim.Namespace)}
	}
	return err
}

// claimMode is the mode a claim asked for: Shared when it names none (a claim made before modes).
func claimMode(claim *locksv1alpha1.LockClaim) locksv1alpha1.LockMode {
	if claim.Spec.Mode == "" {
		return locksv1alpha1.LockModeShared
	}
	return claim.Spec.Mode
}

func isFinal(p locksv1alpha1.ClaimPhase) bool {
	switch p {
	case locksv1alpha1.ClaimReleased, locksv1alpha1.ClaimLost, locksv1alpha1.ClaimTimedOut, locksv1alpha1.ClaimFailed:
		return true
	}
	return false
}
