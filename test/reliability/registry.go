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

package reliability

import (
	"encoding/json"
	"fmt"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// The built-in backend's records as the API server stores them in its etcd, read there by the
// harness rather than through the API server whose answers the controller also reads: a record
// the API server acknowledged but never stored, or stored other than it answered, shows here.
// Keys follow the API server's layout, <prefix>/<group>/<resource>/<namespace>/<name> for a
// custom resource and <prefix>/<resource>/<namespace>/<name> for a built-in one whose group is
// coordination.k8s.io (envtest keeps the default prefix).
const registryPrefix = "/registry"

// registryLocksPrefix is where every DistributedLock of namespace ns is stored ("" for all).
func registryLocksPrefix(ns string) string {
	p := registryPrefix + "/" + locksv1alpha1.GroupVersion.Group + "/distributedlocks/"
	if ns != "" {
		p += ns + "/"
	}
	return p
}

// registryClaimsPrefix is where every LockClaim of namespace ns is stored.
func registryClaimsPrefix(ns string) string {
	return registryPrefix + "/" + locksv1alpha1.GroupVersion.Group + "/lockclaims/" + ns + "/"
}

// registryLeaseKey is where the Lease ns/name is stored.
func registryLeaseKey(ns, name string) string {
	return registryPrefix + "/leases/" + ns + "/" + name
}

// decodeLockRecord reads a stored DistributedLock: custom resources are stored as JSON.
func decodeLockRecord(data []byte) (*locksv1alpha1.DistributedLock, error) {
	var l locksv1alpha1.DistributedLock
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("stored DistributedLock: %w", err)
	}
	if l.Kind != "DistributedLock" {
		return nil, fmt.Errorf("stored DistributedLock: kind %q", l.Kind)
	}
	return &l, nil
}

// decodeClaimRecord reads a stored LockClaim written at revision rev. The stored JSON has no
// resourceVersion (the API server gives each object its revision when it reads it): rev is set
// in its place.
func decodeClaimRecord(data []byte, rev int64) (*locksv1alpha1.LockClaim, error) {
	var c locksv1alpha1.LockClaim
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("stored LockClaim: %w", err)
	}
	if c.Kind != "LockClaim" {
		return nil, fmt.Errorf("stored LockClaim: kind %q", c.Kind)
	}
	c.ResourceVersion = strconv.FormatInt(rev, 10)
	return &c, nil
}

// leaseDecoder reads stored Leases, which the API server writes as protobuf (its default storage
// encoding for built-in types) behind the "k8s\x00" magic, or as JSON.
type leaseDecoder struct{ decoder runtime.Decoder }

func newLeaseDecoder(scheme *runtime.Scheme) leaseDecoder {
	return leaseDecoder{decoder: serializer.NewCodecFactory(scheme).UniversalDeserializer()}
}

func (d leaseDecoder) decode(data []byte) (*coordinationv1.Lease, error) {
	obj, _, err := d.decoder.Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("stored Lease: %w", err)
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil, fmt.Errorf("stored Lease: got %T", obj)
	}
	return lease, nil
}
