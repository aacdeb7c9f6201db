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

package backendfixtures

import (
	"context"
	"fmt"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
)

// Secrets is an in-memory registry.SecretReader for factory tests: Secret "namespace/name" to
// its data. Missing Secrets and keys give errors wrapping registry.ErrSecret, as the real reader's
// do.
type Secrets map[string]map[string][]byte

var _ registry.SecretReader = Secrets(nil)

// Read returns the value of ref's key.
func (s Secrets) Read(_ context.Context, ref locksv1alpha1.SecretKeySelector) ([]byte, error) {
	data, ok := s[ref.Namespace+"/"+ref.Name]
	if !ok {
		return nil, fmt.Errorf("%w: Secret %s/%s not found", registry.ErrSecret, ref.Namespace, ref.Name)
	}
	v, ok := data[ref.Key]
	if !ok {
		return nil, fmt.Errorf("%w: Secret %s/%s has no key %q", registry.ErrSecret, ref.Namespace, ref.Name, ref.Key)
	}
	return v, nil
}
