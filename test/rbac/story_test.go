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

package rbac

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	redisbackend "github.com/lockwarden/lockwarden/internal/backends/redis"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
	"github.com/lockwarden/lockwarden/internal/keyledger"
	"github.com/lockwarden/lockwarden/internal/testutil/lockenv"
	"github.com/lockwarden/lockwarden/internal/testutil/rbacenv"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
	"github.com/lockwarden/lockwarden/internal/testutil/syncbuf"
	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// The story's tenants: appNamespace is admitted by the Redis LockBackend's namespaceSelector;
// in frozenNamespace an admission policy refuses LockClaims.
const (
	appNamespace    = "team-a"
	frozenNamespace = "team-frozen"
	tenantLabel     = "lockwarden.test/tenant"
)

// storyFailure carries a failed expectation of the story out of it, by panic: the story stops,
// but the test goes on to read the audit log, which usually names the refused request that
// broke it.
type storyFailure struct{ message string }

// story is what the steps share: an admin client, and a Gomega whose failures stop the story.
type story struct {
	g Gomega
	c client.Client
}

// runStory installs the RBAC, runs the manager as the ServiceAccount through every kind's life,
// and stops it. It returns why the story stopped early, if it did.
func runStory(t *testing.T, cp *lockenv.ControlPlane, rbacObjects []client.Object, grants []grant) (err error) {
	logs := &syncbuf.Buffer{}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(storyFailure)
			if !ok {
				panic(r)
			}
			err = errors.New(f.message)
			t.Logf("The manager's log:\n%s", logs.String())
		}
	}()
	logf.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	s := &story{c: cp.Client, g: NewGomega(func(message string, _ ...int) { panic(storyFailure{message}) })}
	s.g.SetDefaultEventuallyTimeout(30 * time.Second)
	s.g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNamespace, Labels: map[string]string{tenantLabel: "a"}}})
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: frozenNamespace}})
	// The annotated pods' account may create claims, as the annotation needs (the manager asks
	// with a SubjectAccessReview).
	for _, ns := range []string{appNamespace, frozenNamespace} {
		s.g.Expect(rbacenv.AllowClaims(context.Background(), s.c, ns)).To(Succeed())
	}
	s.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: serviceAccount}})
	for _, o := range rbacObjects {
		s.create(o)
	}
	s.waitAuthorized(grants)

	password := randomString()
	redis := redistest.Start(t, redistest.Options{Password: password})
	s.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "redis-auth"},
		Data: map[string][]byte{"password": []byte(password)}})

	// The manager as the chart runs it: its own namespace for Secrets and the built-in backend,
	// leader election, every request made as the ServiceAccount.
	asAccount := rest.CopyConfig(cp.Config)
	asAccount.Impersonate = rest.ImpersonationConfig{UserName: accountUser}
	mgr, err := lockenv.StartManager(asAccount, lockenv.ManagerOptions{
		Namespace: systemNamespace, LeaderElectionNamespace: electionNamespace, ProbeInterval: time.Second,
		Registry: []registry.Option{registry.WithFactory(locksv1alpha1.BackendRedis, redisbackend.Factory)},
	})
	s.g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		// Stopping gives up the leader Lease (an update), which is part of what is checked.
		if err := mgr.Stop(); err != nil {
			t.Logf("The manager stopped with: %v", err)
		}
	}()

	s.builtinBackendProbed()
	s.backendWithSecret(redis.Addr())
	s.handoff("db", "")
	s.handoff("cache", "redis")
	s.upgradedClaimLetGo("db")
	s.gatedPodFinishes("db")
	s.annotatedPodDeleted("cache")
	s.suspendedJobRuns("batch")
	s.refusedClaimRepeatsEvent()
	s.lostHolderEvicted(redis)
	s.standbyQueuedAgain("leader")
	s.leftoverKeyTakenOver("reborn")
	s.lockDeleted("db")
	s.lockDeleted("cache")
	s.backendsDeleted()
	return nil
}

// waitAuthorized waits until the API server's authorizer has seen every binding: a subject
// access review of one entry of each role must be allowed.
func (s *story) waitAuthorized(grants []grant) {
	for _, gr := range grants {
		rule := gr.Rules[0]
		resource, sub, _ := strings.Cut(rule.Resources[0], "/")
		review := func(g Gomega) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   accountUser,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: gr.Namespace, Verb: rule.Verbs[0],
					Group: rule.APIGroups[0], Resource: resource, Subresource: sub},
			}}
			g.Expect(s.c.Create(ctx(), sar)).To(Succeed())
			g.Expect(sar.Status.Allowed).To(BeTrue(), "%s: %+v", gr.Role, sar.Status)
		}
		s.g.Eventually(review).Should(Succeed())
	}
}

// builtinBackendProbed creates the LockBackend "kubernetes", which makes the built-in backend
// visible and probed like the others, and waits for its probe.
func (s *story) builtinBackendProbed() {
	s.create(&locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: locksv1alpha1.BuiltinBackendName},
		Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendKubernetes}})
	s.waitReady(locksv1alpha1.BuiltinBackendName)
}

// backendWithSecret creates the LockBackend "redis", whose password is in a Secret in the
// controller's namespace and which admits appNamespace only, and waits for its probe.
func (s *story) backendWithSecret(addr string) {
	s.create(&locksv1alpha1.LockBackend{
		ObjectMeta: metav1.ObjectMeta{Name: "redis"},
		Spec: locksv1alpha1.LockBackendSpec{
			Type: locksv1alpha1.BackendRedis,
			Redis: &locksv1alpha1.RedisBackend{Address: locksv1alpha1.HostPort(addr),
				PasswordSecretRef: &locksv1alpha1.SecretKeySelector{Key: "password",
					SecretReference: locksv1alpha1.SecretReference{Namespace: systemNamespace, Name: "redis-auth"}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{tenantLabel: "a"}},
		},
	})
	s.waitReady("redis")
}

// waitReady waits until the LockBackend's probe reports it Ready.
func (s *story) waitReady(name string) {
	s.g.Eventually(func(g Gomega) {
		lb := &locksv1alpha1.LockBackend{}
		g.Expect(s.c.Get(ctx(), client.ObjectKey{Name: name}, lb)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(lb.Status.Conditions, locksv1alpha1.ConditionReady)).To(BeTrue(), "%+v", lb.Status.Conditions)
	}).Should(Succeed(), "LockBackend %s", name)
}

// handoff creates lock on backend ("" for the built-in one) with two detached claims: the first
// is granted and renewed, the second waits, and gets the lock with a higher token once the first
// is deleted.
func (s *story) handoff(lock, backend string) {
	s.create(&locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: lock},
		Spec: locksv1alpha1.DistributedLockSpec{BackendRef: locksv1alpha1.BackendReference{Name: backend}, LeaseDurationSeconds: 5}})
	first := s.claim(lock+"-first", lock)
	s.waitPhase(first, locksv1alpha1.ClaimHeld)
	second := s.claim(lock+"-second", lock)
	s.waitAcquired(second, "False/"+locksv1alpha1.ReasonQueued)
	// Held past a renewal: the renewer has written the backend, the claim's status followed.
	s.g.Eventually(func(g Gomega) {
		c := s.getClaim(g, first)
		g.Expect(c.Status.RenewTime.After(c.Status.AcquireTime.Time)).To(BeTrue(), "renewTime %v, acquireTime %v", c.Status.RenewTime, c.Status.AcquireTime)
	}).Should(Succeed())
	token := s.getClaim(s.g, first).Status.FencingToken

	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: first}})
	s.waitPhase(second, locksv1alpha1.ClaimHeld)
	s.g.Expect(s.getClaim(s.g, second).Status.FencingToken).To(BeNumerically(">", token))
	s.waitGone(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: first}})
}

// upgradedClaimLetGo creates a claim for lock with the release finalizer that lockwarden put on
// claims before the lock record named each hold's claim, as an upgrade finds them: the controller
// takes the finalizer off (an update of the claim: the one use left of that verb), and the claim,
// deleted, is gone at once.
func (s *story) upgradedClaimLetGo(lock string) {
	name := lock + "-upgraded"
	s.create(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: name,
		Finalizers: []string{locksv1alpha1.Finalizer}}, Spec: locksv1alpha1.LockClaimSpec{LockName: lock}})
	s.g.Eventually(func(g Gomega) []string {
		return s.getClaim(g, name).Finalizers
	}).Should(BeEmpty(), "claim %s keeps the old release finalizer", name)
	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: name}})
	s.waitGone(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: name}})
}

// leftoverKeyTakenOver creates lock on a backend key whose key ledger Lease outlived its owner (a
// lock whose finalizer was removed by hand before the controller's pass): the controller reads the
// gone owner on the API server, takes the key over and grants. Under RBAC without get on
// distributedlocks that read was refused and the lock never granted (issue 37, bug 5).
func (s *story) leftoverKeyTakenOver(lock string) {
	key := locksv1alpha1.NamespacedKeyPrefix(appNamespace) + lock
	s.create(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: keyledger.LeaseName(registry.StoreOf(nil), key),
			Labels: map[string]string{keyledger.LedgerLabel: "true"},
			Annotations: map[string]string{keyledger.BackendAnnotation: locksv1alpha1.BuiltinBackendName,
				keyledger.KeyAnnotation: key, keyledger.LockAnnotation: appNamespace + "/" + lock}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("uid-of-a-lock-deleted-long-ago")},
	})
	s.create(&locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: lock}})
	s.lockDeleted(lock) // its holder claim is granted first
}

// gatedPodFinishes runs a pod that asks for lock, held by lock+"-second", by annotation behind
// the scheduling gate: the controller creates its claim, and once the holder goes it annotates
// the pod with the token and lifts the gate; the pod succeeds and its hold ends at once.
func (s *story) gatedPodFinishes(lock string) {
	pod := s.lockPod(appNamespace, "worker", lock, true)
	claim := s.podClaim(pod, lock)
	s.g.Expect(s.getPod(s.g, pod).Spec.SchedulingGates).NotTo(BeEmpty(), "the gate stays while the lock is held by another")

	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: lock + "-second"}})
	s.waitPhase(claim, locksv1alpha1.ClaimHeld)
	s.waitMarked(pod, claim)

	p := s.getPod(s.g, pod)
	p.Status.Phase = corev1.PodSucceeded
	s.g.Expect(s.c.Status().Update(ctx(), p)).To(Succeed())
	s.waitPhase(claim, locksv1alpha1.ClaimReleased)
	s.waitAcquired(claim, "False/"+locksv1alpha1.ReasonHolderTerminated)
	// There is no garbage collector here: delete the claim after its pod, as it would.
	s.delete(pod)
	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claim}})
	s.waitGone(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claim}})
}

// annotatedPodDeleted runs a pod that asks for lock by annotation alone (no gate); it gets the
// lock when the holder goes, and its deletion releases it.
func (s *story) annotatedPodDeleted(lock string) {
	pod := s.lockPod(appNamespace, "reader", lock, false)
	claim := s.podClaim(pod, lock)
	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: lock + "-second"}})
	s.waitPhase(claim, locksv1alpha1.ClaimHeld)
	s.waitMarked(pod, claim)

	s.delete(pod)
	s.waitPhase(claim, locksv1alpha1.ClaimReleased)
	s.waitAcquired(claim, "False/"+locksv1alpha1.ReasonHolderTerminated)
	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claim}})
	s.waitGone(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claim}})
}

// suspendedJobRuns runs a Job that asks for lock by annotation, created suspended as the Job
// admission policy leaves it: the controller (watching Jobs through its cache) creates its claim,
// and once the claim holds it resumes the Job with its token, by one patch (the patch on jobs);
// the Job completes and its hold ends at once.
func (s *story) suspendedJobRuns(lock string) {
	s.create(&locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: lock}})
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "nightly",
			Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: lock}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}},
	}
	s.create(job)
	claim := locksv1alpha1.WorkloadClaimName(job.Name, job.UID, lock)
	s.waitPhase(claim, locksv1alpha1.ClaimHeld)
	s.g.Eventually(func(g Gomega) {
		g.Expect(s.c.Get(context.Background(), client.ObjectKeyFromObject(job), job)).To(Succeed())
		g.Expect(job.Spec.Suspend).To(Equal(ptr.To(false)))
		g.Expect(job.Annotations).To(HaveKey(locksv1alpha1.PodFencingTokenAnnotation))
	}).Should(Succeed())

	// The Job controller's part: the Job completes.
	now := metav1.Now()
	job.Status.StartTime, job.Status.CompletionTime = &now, &now
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
	}
	s.g.Expect(s.c.Status().Update(context.Background(), job)).To(Succeed())
	s.waitPhase(claim, locksv1alpha1.ClaimReleased)
	// There is no garbage collector here: delete the claim after its Job, as it would.
	s.delete(job)
	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claim}})
	s.waitGone(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claim}})
	s.delete(&locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: lock}})
	s.waitGone(&locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: lock}})
}

// lostHolderEvicted runs a pod that holds lock "evict" on Redis under lossPolicy Evict; a client
// outside lockwarden takes the key, the hold is Lost, and the controller evicts the pod (an
// unscheduled pod goes at once). This is how the create on pods/eviction is used.
func (s *story) lostHolderEvicted(redis *redistest.Server) {
	lock := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "evict"},
		Spec: locksv1alpha1.DistributedLockSpec{BackendRef: locksv1alpha1.BackendReference{Name: "redis"},
			LeaseDurationSeconds: 5, LossPolicy: locksv1alpha1.LossPolicyEvict}}
	s.create(lock)
	first := s.claim(lock.Name+"-first", lock.Name)
	s.waitPhase(first, locksv1alpha1.ClaimHeld)
	pod := s.lockPod(appNamespace, "stale", lock.Name, false)
	claim := s.podClaim(pod, lock.Name)
	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: first}})
	s.waitPhase(claim, locksv1alpha1.ClaimHeld)

	s.g.Expect(redis.Client().Set(ctx(), "lockwarden/"+appNamespace+"/"+lock.Name, "intruder", 0).Err()).To(Succeed())
	s.waitPhase(claim, locksv1alpha1.ClaimLost)
	s.waitGone(pod)
	s.g.Eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(s.getClaim(g, claim).Status.Conditions, locksv1alpha1.ConditionEvicted)).To(BeTrue())
	}).Should(Succeed())
	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claim}})
	s.delete(lock)
	s.waitGone(lock)
}

// refusedClaimRepeatsEvent has an admission policy refuse every LockClaim in frozenNamespace,
// then runs an annotated pod there. The controller cannot create the pod's claim, says so in an
// event on the pod and retries; the repeated event becomes a series, which the recorder writes
// by patch. This is how the patch on events is used.
func (s *story) refusedClaimRepeatsEvent() {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "lockclaims-frozen"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{locksv1alpha1.GroupVersion.Group},
						APIVersions: []string{"*"}, Resources: []string{"lockclaims"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "LockClaims are frozen here"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "lockclaims-frozen"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: frozenNamespace}}},
		},
	}
	s.create(policy)
	s.create(binding)
	s.g.Eventually(func() error {
		probe := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: frozenNamespace, Name: "probe"},
			Spec: locksv1alpha1.LockClaimSpec{LockName: "db"}}
		return s.c.Create(ctx(), probe, client.DryRunAll)
	}).Should(MatchError(ContainSubstring("frozen")), "the policy takes effect")

	pod := s.lockPod(frozenNamespace, "blocked", "db", false)
	s.g.Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(s.c.List(ctx(), list, client.InNamespace(frozenNamespace))).To(Succeed())
		var series []string
		for _, e := range list.Items {
			if e.Regarding.Name == pod.Name && e.Reason == "ClaimFailed" && e.Series != nil {
				series = append(series, fmt.Sprintf("%s ×%d", e.Reason, e.Series.Count))
			}
		}
		g.Expect(series).NotTo(BeEmpty(), "events: %+v", list.Items)
	}).Should(Succeed())
	s.delete(pod)
	s.delete(binding)
	s.delete(policy)
}

// lockDeleted deletes lock while one claim holds it and another waits: the holder is released,
// both claims fail with LockNotFound, and the lock goes once its finalizer is off.
func (s *story) lockDeleted(lock string) {
	holder := s.claim(lock+"-holder", lock)
	s.waitPhase(holder, locksv1alpha1.ClaimHeld)
	waiter := s.claim(lock+"-waiter", lock)
	s.waitAcquired(waiter, "False/"+locksv1alpha1.ReasonQueued)

	l := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: lock}}
	s.delete(l)
	for _, c := range []string{holder, waiter} {
		s.waitPhase(c, locksv1alpha1.ClaimFailed)
		s.waitAcquired(c, "False/"+locksv1alpha1.ReasonLockNotFound)
	}
	s.waitGone(l)
	for _, c := range []string{holder, waiter} {
		claim := &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: c}}
		s.delete(claim)
		s.waitGone(claim)
	}
}

// standbyQueuedAgain runs a Standby pod on lock, deletes the lock under it and creates it again:
// the pod's claim fails, and the controller replaces it with a new one (the delete of an ended
// claim: the one use of that verb), which holds again.
func (s *story) standbyQueuedAgain(lock string) {
	l := &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: lock}}
	s.create(l.DeepCopy())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "standby",
		Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: lock, locksv1alpha1.PodLockWaitAnnotation: locksv1alpha1.PodLockWaitStandby}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	s.create(pod)
	claim := lockclient.ClaimName(pod.Name, pod.UID, lock)
	s.waitPhase(claim, locksv1alpha1.ClaimHeld)
	first := s.getClaim(s.g, claim).UID

	s.delete(l.DeepCopy())
	s.waitPhase(claim, locksv1alpha1.ClaimFailed)
	s.waitGone(l.DeepCopy())
	s.create(l.DeepCopy())
	s.g.Eventually(func(g Gomega) {
		c := s.getClaim(g, claim)
		g.Expect(c.UID).NotTo(Equal(first), "the ended claim is replaced")
		g.Expect(c.Status.Phase).To(Equal(locksv1alpha1.ClaimHeld))
	}).WithTimeout(45 * time.Second).Should(Succeed())

	s.delete(pod)
	s.delete(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claim}})
	s.waitGone(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claim}})
	s.delete(l.DeepCopy())
	s.waitGone(l.DeepCopy())
}

// backendsDeleted deletes the LockBackends, which the controller lets go without a finalizer.
func (s *story) backendsDeleted() {
	for _, name := range []string{"redis", locksv1alpha1.BuiltinBackendName} {
		lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: name}}
		s.delete(lb)
		s.waitGone(lb)
	}
}

// lockPod creates a pod that asks for lock by annotation, behind the scheduling gate if gated,
// as the chart's admission policy would add it.
func (s *story) lockPod(namespace, name, lock string, gated bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Annotations: map[string]string{locksv1alpha1.PodLockAnnotation: lock}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if gated {
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: locksv1alpha1.PodSchedulingGate}}
	}
	s.create(pod)
	return pod
}

// podClaim waits for the claim the controller creates for pod, owned by it and queued, and
// returns its name.
func (s *story) podClaim(pod *corev1.Pod, lock string) string {
	name := lockclient.ClaimName(pod.Name, pod.UID, lock)
	s.g.Eventually(func(g Gomega) {
		c := s.getClaim(g, name)
		g.Expect(metav1.IsControlledBy(c, pod)).To(BeTrue(), "owners: %+v", c.OwnerReferences)
	}).Should(Succeed())
	s.waitAcquired(name, "False/"+locksv1alpha1.ReasonQueued)
	return name
}

// waitMarked waits until pod carries the claim's token and holder and no lockwarden gate.
func (s *story) waitMarked(pod *corev1.Pod, claim string) {
	s.g.Eventually(func(g Gomega) {
		c, p := s.getClaim(g, claim), s.getPod(g, pod)
		g.Expect(p.Annotations).To(HaveKeyWithValue(locksv1alpha1.PodFencingTokenAnnotation, strconv.FormatInt(c.Status.FencingToken, 10)))
		g.Expect(p.Annotations).To(HaveKeyWithValue(locksv1alpha1.PodHolderAnnotation, c.Status.HolderIdentity))
		g.Expect(p.Spec.SchedulingGates).To(BeEmpty())
	}).Should(Succeed())
}

// claim creates a detached claim for lock in appNamespace.
func (s *story) claim(name, lock string) string {
	s.create(&locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: name},
		Spec: locksv1alpha1.LockClaimSpec{LockName: lock}})
	return name
}

func (s *story) getClaim(g Gomega, name string) *locksv1alpha1.LockClaim {
	c := &locksv1alpha1.LockClaim{}
	g.Expect(s.c.Get(ctx(), client.ObjectKey{Namespace: appNamespace, Name: name}, c)).To(Succeed())
	return c
}

func (s *story) getPod(g Gomega, pod *corev1.Pod) *corev1.Pod {
	p := &corev1.Pod{}
	g.Expect(s.c.Get(ctx(), client.ObjectKeyFromObject(pod), p)).To(Succeed())
	return p
}

func (s *story) waitPhase(claim string, phase locksv1alpha1.ClaimPhase) {
	s.g.Eventually(func(g Gomega) {
		g.Expect(s.getClaim(g, claim).Status.Phase).To(Equal(phase))
	}).Should(Succeed(), "claim %s", claim)
}

// waitAcquired waits until the claim's Acquired condition reads want, "Status/Reason".
func (s *story) waitAcquired(claim, want string) {
	s.g.Eventually(func(g Gomega) string {
		c := meta.FindStatusCondition(s.getClaim(g, claim).Status.Conditions, locksv1alpha1.ConditionAcquired)
		if c == nil {
			return ""
		}
		return fmt.Sprintf("%s/%s", c.Status, c.Reason)
	}).Should(Equal(want), "claim %s", claim)
}

func (s *story) create(o client.Object) {
	s.g.Expect(s.c.Create(ctx(), o)).To(Succeed(), "creating %T %s", o, o.GetName())
}

// delete deletes o at once (no kubelet finishes pods here).
func (s *story) delete(o client.Object) {
	s.g.Expect(s.c.Delete(ctx(), o, client.GracePeriodSeconds(0))).To(Succeed(), "deleting %T %s", o, o.GetName())
}

func (s *story) waitGone(o client.Object) {
	s.g.Eventually(func() bool {
		return apierrors.IsNotFound(s.c.Get(ctx(), client.ObjectKeyFromObject(o), o))
	}).Should(BeTrue(), "%T %s is deleted", o, o.GetName())
}

func ctx() context.Context { return context.Background() }

// randomString is a password for the story's Redis.
func randomString() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
