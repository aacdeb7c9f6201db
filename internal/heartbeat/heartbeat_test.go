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

package heartbeat

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// sight is one look at the Lease: what it was (nil: absent) after a number of seconds.
type sight struct {
	after time.Duration
	lease *coordinationv1.Lease
}

func lease(uid, renew string, seconds int32) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: "1"},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(seconds)}}
	if renew != "" {
		t, err := time.Parse(time.RFC3339, renew)
		if err != nil {
			panic(err)
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: t}
	}
	return l
}

func TestTracker(t *testing.T) {
	name := types.NamespacedName{Namespace: "team-a", Name: "job-beat"}
	// The claimant's clock is a day behind the controller's: its renewTime says nothing of when
	// the controller saw it.
	const day = "2020-01-01T00:00:00Z"
	const nextBeat = "2020-01-01T00:00:05Z"
	tests := []struct {
		name   string
		sights []sight
		want   State
		// expireIn is, for Alive, how long after the last sight the heartbeat expires.
		expireIn time.Duration
		reason   string
	}{
		{name: "never seen: missing, waits for it",
			sights: []sight{{0, nil}}, want: Missing,
			reason: "heartbeat Lease job-beat does not exist in namespace team-a"},
		{name: "first sight counts as a renewal whatever renewTime says",
			sights: []sight{{0, lease("u1", day, 15)}}, want: Alive, expireIn: 15 * time.Second},
		{name: "unchanged for less than its duration: alive",
			sights: []sight{{0, lease("u1", day, 15)}, {14 * time.Second, lease("u1", day, 15)}}, want: Alive, expireIn: time.Second},
		{name: "unchanged for its duration: expired",
			sights: []sight{{0, lease("u1", day, 15)}, {15 * time.Second, lease("u1", day, 15)}}, want: Expired,
			reason: "heartbeat Lease job-beat in namespace team-a was not renewed for 15s"},
		{name: "a new renewTime is a renewal",
			sights: []sight{{0, lease("u1", day, 15)}, {10 * time.Second, lease("u1", nextBeat, 15)}, {20 * time.Second, lease("u1", nextBeat, 15)}},
			want:   Alive, expireIn: 5 * time.Second},
		{name: "a new resourceVersion is a renewal when there is no renewTime",
			sights: []sight{{0, lease("u1", "", 15)}, {10 * time.Second, func() *coordinationv1.Lease {
				l := lease("u1", "", 15)
				l.ResourceVersion = "2"
				return l
			}()}, {20 * time.Second, nil}},
			want: Deleted, reason: "heartbeat Lease job-beat in namespace team-a was deleted"},
		{name: "seen, then gone: deleted",
			sights: []sight{{0, lease("u1", day, 15)}, {time.Second, nil}}, want: Deleted,
			reason: "heartbeat Lease job-beat in namespace team-a was deleted"},
		{name: "a Lease re-created under the same name is a renewal",
			sights: []sight{{0, lease("u1", day, 15)}, {time.Second, nil}, {20 * time.Second, lease("u2", day, 15)}},
			want:   Alive, expireIn: 15 * time.Second},
		{name: "a deleted Lease is forgotten after an hour",
			sights: []sight{{0, lease("u1", day, 15)}, {time.Second, nil}, {2 * time.Hour, nil}}, want: Missing,
			reason: "heartbeat Lease job-beat does not exist in namespace team-a"},
		{name: "no duration: cannot be judged",
			sights: []sight{{0, func() *coordinationv1.Lease { l := lease("u1", day, 15); l.Spec.LeaseDurationSeconds = nil; return l }()}},
			want:   Invalid, reason: "heartbeat Lease job-beat in namespace team-a has no spec.leaseDurationSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker()
			start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
			var v Verdict
			var last time.Time
			for _, s := range tt.sights {
				last = start.Add(s.after)
				v = tr.Observe(name, s.lease, last)
			}
			if v.State != tt.want {
				t.Fatalf("state = %d, want %d (%+v)", v.State, tt.want, v)
			}
			if v.Reason != tt.reason {
				t.Errorf("reason = %q, want %q", v.Reason, tt.reason)
			}
			if tt.want == Alive && !v.ExpireAt.Equal(last.Add(tt.expireIn)) {
				t.Errorf("expires %s after the last sight, want %s", v.ExpireAt.Sub(last), tt.expireIn)
			}
		})
	}
}
