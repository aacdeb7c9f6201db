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
	"testing"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// TestMadeFor: the pod lock and workload controllers follow only the claims they make: the
// lock named, and the holder exactly, without an identity of its own.
func TestMadeFor(t *testing.T) {
	pod := locksv1alpha1.ClaimHolder{PodName: "web-0"}
	job := locksv1alpha1.ClaimHolder{Object: &locksv1alpha1.HolderObject{APIVersion: "batch/v1", Kind: "Job", Name: "nightly"}}
	claim := func(lock string, h *locksv1alpha1.ClaimHolder) *locksv1alpha1.LockClaim {
		return &locksv1alpha1.LockClaim{Spec: locksv1alpha1.LockClaimSpec{LockName: lock, Holder: h}}
	}
	with := func(h locksv1alpha1.ClaimHolder, f func(*locksv1alpha1.ClaimHolder)) *locksv1alpha1.ClaimHolder {
		if h.Object != nil {
			o := *h.Object
			h.Object = &o
		}
		f(&h)
		return &h
	}
	for name, c := range map[string]struct {
		claim  *locksv1alpha1.LockClaim
		holder locksv1alpha1.ClaimHolder
		want   bool
	}{
		"the pod's own":            {claim("db", &pod), pod, true},
		"the Job's own":            {claim("db", &job), job, true},
		"another lock":             {claim("cache", &pod), pod, false},
		"detached":                 {claim("db", nil), pod, false},
		"the pod with an identity": {claim("db", with(pod, func(h *locksv1alpha1.ClaimHolder) { h.Identity = "uid-of-the-holder" })), pod, false},
		"another pod":              {claim("db", with(pod, func(h *locksv1alpha1.ClaimHolder) { h.PodName = "web-1" })), pod, false},
		"the Job with an identity": {claim("db", with(job, func(h *locksv1alpha1.ClaimHolder) { h.Identity = "x" })), job, false},
		"another Job":              {claim("db", with(job, func(h *locksv1alpha1.ClaimHolder) { h.Object.Name = "hourly" })), job, false},
		"the Job's name as a pod":  {claim("db", &locksv1alpha1.ClaimHolder{PodName: "nightly"}), job, false},
	} {
		if got := madeFor(c.claim, "db", c.holder); got != c.want {
			t.Errorf("%s: madeFor = %v, want %v", name, got, c.want)
		}
	}
}
