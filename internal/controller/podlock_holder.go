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

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// This file holds how a pod whose claim holds is marked the holder: its fencing token and holder
// identity as annotations, the role label holder and the scheduling gate lifted, in one patch
// (markHolder, holderPatch). podlock_controller.go's followClaim decides when (with
// podlock_hold.go, which says whether the claim holds); podlock_role.go moves the label back to
// standby.

// markHolder writes the hold's token and identity as annotations and the role label holder, and
// removes the scheduling gate, in one patch: whoever sees the gate gone or the role holder also
// sees the token.
func (r *PodLockReconciler) markHolder(ctx context.Context, pod *corev1.Pod, claim *locksv1alpha1.LockClaim, hold podHoldOf) error {
	token := podTokenValue(claim, hold)
	gated := slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == locksv1alpha1.PodSchedulingGate
	})
	lastToGo := needsDeletionCost(pod)
	if pod.Annotations[locksv1alpha1.PodFencingTokenAnnotation] == token &&
		pod.Annotations[locksv1alpha1.PodHolderAnnotation] == hold.identity && !gated &&
		pod.Labels[locksv1alpha1.PodRoleLabel] == locksv1alpha1.PodRoleHolder && !lastToGo {
		return nil
	}
	patch, err := holderPatch(pod.UID, token, hold.identity, gated, lastToGo)
	if err != nil {
		return err
	}
	if err := r.Guard.Check(); err != nil {
		return err
	}
	// Read before the patch, which overwrites pod with the API server's answer.
	cameNow := pod.Labels[locksv1alpha1.PodRoleLabel] != locksv1alpha1.PodRoleHolder
	if err := r.Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("annotating pod %s with its fencing token: %w", pod.Name, err)
	}
	label := locksv1alpha1.LocksLabel(claim.Spec.Locks())
	if cameNow {
		r.failovers.holderCame(types.NamespacedName{Namespace: pod.Namespace, Name: label})
	}
	msg := fmt.Sprintf("Lock %s held with fencing token %s", label, token)
	if len(claim.Status.Locks) > 0 {
		msg = fmt.Sprintf("Locks %s held together with fencing tokens %s", label, token)
	}
	if gated {
		msg += "; scheduling gate lifted"
	}
	r.Recorder.Eventf(pod, claim, corev1.EventTypeNormal, "LockAcquired", "WaitForLock", "%s", msg)
	return nil
}

// podTokenValue is the fencing-token annotation of a pod whose claim holds: the token; for a
// claim of several locks, LOCK=TOKEN pairs in name order joined by commas.
func podTokenValue(claim *locksv1alpha1.LockClaim, hold podHoldOf) string {
	if len(claim.Spec.LockNames) == 0 {
		return strconv.FormatInt(hold.token, 10)
	}
	pairs := make([]string, len(claim.Status.Locks))
	for i, part := range claim.Status.Locks {
		pairs[i] = fmt.Sprintf("%s=%d", part.LockName, part.FencingToken)
	}
	return strings.Join(pairs, ",")
}

// holderPatch is the strategic merge patch that marks a pod as the holder: it sets the token and
// holder annotations and the role label holder, with lastToGo the highest pod-deletion-cost
// (holderDeletionCost) and, when gated, deletes the lockwarden scheduling gate by its name,
// leaving every other gate and annotation alone. Its metadata.uid is a precondition (a patch whose uid
// differs from the stored pod's fails), so a new pod of the same name is never marked. There is
// no resourceVersion precondition: nothing the patch writes depends on the rest of the pod, and
// pods change often while they wait (the scheduler, the kubelet), which made an optimistic lock
// fail and retry under churn.
func holderPatch(uid types.UID, token, holder string, ungate, lastToGo bool) ([]byte, error) {
	type gateDelete struct {
		Patch string `json:"$patch"`
		Name  string `json:"name"`
	}
	annotations := map[string]string{
		locksv1alpha1.PodFencingTokenAnnotation: token,
		locksv1alpha1.PodHolderAnnotation:       holder,
	}
	if lastToGo {
		annotations[podDeletionCostAnnotation] = holderDeletionCost
	}
	p := map[string]any{
		"metadata": map[string]any{
			"uid":         uid,
			"labels":      map[string]string{locksv1alpha1.PodRoleLabel: locksv1alpha1.PodRoleHolder},
			"annotations": annotations,
		},
	}
	if ungate {
		p["spec"] = map[string]any{
			"schedulingGates": []gateDelete{{Patch: "delete", Name: locksv1alpha1.PodSchedulingGate}},
		}
	}
	return json.Marshal(p)
}
