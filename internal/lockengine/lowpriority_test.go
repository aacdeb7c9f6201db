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

package lockengine

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// claimsNamed returns one claim per name, its UID the name.
func claimsNamed(names ...string) []*locksv1alpha1.LockClaim {
	out := make([]*locksv1alpha1.LockClaim, 0, len(names))
	for _, n := range names {
		out = append(out, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Name: n, UID: types.UID(n)}})
	}
	return out
}

func namesOf(claims []*locksv1alpha1.LockClaim) []string {
	out := []string{}
	for _, c := range claims {
		out = append(out, c.Name)
	}
	return out
}

func pendingOf(names ...string) map[types.UID]bool {
	m := map[types.UID]bool{}
	for _, n := range names {
		m[types.UID(n)] = true
	}
	return m
}

func TestPickLowBatch(t *testing.T) {
	cases := []struct {
		name       string
		queue, low []string
		pending    []string
		n          int
		want       []string
	}{
		{"queue order, not list order", []string{"a", "b", "c", "d"}, []string{"d", "c", "b", "a"}, []string{"a", "b", "c", "d"}, 2, []string{"a", "b"}},
		{"only pending claims", []string{"a", "b", "c"}, []string{"a", "b", "c"}, []string{"c"}, 8, []string{"c"}},
		{"only claims with a change", []string{"a", "b", "c"}, []string{"b"}, []string{"a", "b", "c"}, 8, []string{"b"}},
		{"claims out of the queue last", []string{"b"}, []string{"x", "b"}, []string{"x", "b"}, 8, []string{"b", "x"}},
		{"bounded", []string{"a", "b", "c"}, []string{"x", "a", "b", "c"}, []string{"x", "a", "b", "c"}, 3, []string{"a", "b", "c"}},
		{"nothing pending", []string{"a"}, []string{"a"}, nil, 8, []string{}},
	}
	for _, c := range cases {
		got := namesOf(pickLowBatch(claimsNamed(c.queue...), claimsNamed(c.low...), pendingOf(c.pending...), c.n))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTrimRound(t *testing.T) {
	cases := []struct {
		name                  string
		pending, low, written []string
		want                  []string
	}{
		{"written claims leave", []string{"a", "b", "c"}, []string{"a", "b", "c"}, []string{"a", "b"}, []string{"c"}},
		{"claims without a change leave", []string{"a", "b", "c"}, []string{"c"}, nil, []string{"c"}},
		{"new changes do not join a round", []string{"a"}, []string{"a", "z"}, nil, []string{"a"}},
		{"done", []string{"a"}, []string{"a"}, []string{"a"}, []string{}},
	}
	for _, c := range cases {
		pending := pendingOf(c.pending...)
		n := trimRound(pending, claimsNamed(c.low...), claimsNamed(c.written...))
		var got []string
		for uid := range pending {
			got = append(got, string(uid))
		}
		slices.Sort(got)
		if got == nil {
			got = []string{}
		}
		if n != len(c.want) || !slices.Equal(got, c.want) {
			t.Errorf("%s: left %v (%d), want %v", c.name, got, n, c.want)
		}
	}
}
