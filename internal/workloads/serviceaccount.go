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

package workloads

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ServiceAccount is the service account an object of the kind runs its pods as, as its spec
// names it ("" for the namespace's default): whoever creates the object acts as that account, so
// its annotation may ask for no more than that account could (claimrights). A kind that cannot be
// suspended makes no claims of its own, and has none.
func (k Kind) ServiceAccount(obj *unstructured.Unstructured) string {
	f, ok := k.suspend.accountField()
	if !ok {
		return ""
	}
	return f.stringIn(obj)
}
