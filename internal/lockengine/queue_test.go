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
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/internal/backends"
)

func TestHeldFromRecord(t *testing.T) {
	pass := time.Date(2026, 12, 3, 20, 50, 14, 151e6, time.UTC)
	// TryAcquire read the clock after it was stepped 10 s ahead, as in kubernetes/clock-forward.
	stepped := backends.Lease{Key: "k", Identity: "id", TTL: 5 * time.Second,
		AcquireTime: pass.Add(10 * time.Second), ExpireTime: pass.Add(15 * time.Second), Version: "v"}
	for name, c := range map[string]struct {
		inRecord          bool
		acquired, expires time.Time
	}{
		"record mode: the record's instant": {true, pass, pass.Add(5 * time.Second)},
		"own store: the backend's lease":    {false, pass.Add(10 * time.Second), pass.Add(15 * time.Second)},
	} {
		got := heldFromRecord(stepped, pass, c.inRecord)
		if !got.AcquireTime.Equal(c.acquired) || !got.ExpireTime.Equal(c.expires) {
			t.Errorf("%s: acquired %s, expires %s; want %s, %s", name, got.AcquireTime, got.ExpireTime, c.acquired, c.expires)
		}
		if got.Key != stepped.Key || got.Identity != stepped.Identity || got.TTL != stepped.TTL || got.Version != stepped.Version {
			t.Errorf("%s: the lease's other fields changed: %+v", name, got)
		}
	}
}
